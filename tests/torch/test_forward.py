"""Forward outputs of translated models equal PyTorch's (1e-5), in-process and through a .ff
file with its .npz weights; models in eval mode (batch norm on running statistics, no dropout),
FlexFlow in inference mode."""

import pytest
import torch

from . import models
from .harness import assert_outputs_match, ff_outputs, torch_outputs

pytestmark = pytest.mark.filterwarnings("ignore:Implicit dimension choice for softmax")


def _trained_statistics(model):
    """Non-trivial batch-norm running statistics, as after some training."""
    generator = torch.Generator().manual_seed(1)
    for m in model.modules():
        if isinstance(m, torch.nn.modules.batchnorm._BatchNorm):
            m.running_mean.copy_(torch.randn(m.num_features, generator=generator) * 0.1)
            m.running_var.copy_(torch.rand(m.num_features, generator=generator) + 0.5)
    return model


CASES = {
    "mlp": (models.MLP, lambda: models.float_inputs((4, 784))),
    "fact_sheet_cnn": (models.FactSheetCNN, lambda: models.float_inputs((2, 3, 16, 16),
                                                                        (2, 3, 16, 16))),
    "example_cnn": (models.CNN, lambda: models.float_inputs((2, 3, 32, 32), (2, 3, 32, 32))),
    "resnet18": (models.ResNet18, lambda: models.float_inputs((2, 3, 32, 32))),
    "vgg": (models.VGG, lambda: models.float_inputs((4, 3, 16, 16))),
    "encoder_mha": (models.EncoderLayer, lambda: models.float_inputs((4, 5, 16))),
    "encoder_mha_seq_first": (lambda: models.EncoderLayer(batch_first=False),
                              lambda: models.float_inputs((4, 5, 16))),
    "encoder_mha_dropout": (lambda: models.EncoderLayer(dropout=0.1),
                            lambda: models.float_inputs((4, 5, 16))),
    "encoder_matmul": (models.MatmulAttentionLayer, lambda: models.float_inputs((4, 5, 16))),
    "embedding_bag": (models.EmbeddingBag, lambda: models.int_inputs(50, (4, 7))),
    "embedding_positional": (models.EmbeddingPositional,
                             lambda: models.int_inputs(30, (4, 6), (4, 6))),
    "constructs": (models.Constructs, lambda: models.float_inputs((4, 3, 8, 8))),
}


@pytest.mark.parametrize("route", ["in-process", "file"])
@pytest.mark.parametrize("name", list(CASES))
def test_forward_matches_pytorch(name, route, tmp_path):
    make, inputs = CASES[name]
    torch.manual_seed(0)
    model = _trained_statistics(make()).eval()
    x = inputs()
    assert_outputs_match(ff_outputs(model, x, route, tmp_path), torch_outputs(model, x))


def test_data_type_changes_are_casts():
    inputs = models.int_inputs(9, (4, 3)) + models.float_inputs((4, 3))
    ours, theirs = ff_outputs(models.Casts(), inputs), torch_outputs(models.Casts(), inputs)
    assert [a.dtype for a in ours] == [b.dtype for b in theirs]
    assert_outputs_match(ours, theirs)
