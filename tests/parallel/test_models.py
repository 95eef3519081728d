"""The strategies the strategy tests run under are what their names say: a split that does not
fit a layer is refused, not replaced by a sample split, and the (model, kind, n) left out of the
tests are those under which no layer would be split other than data parallelism splits it."""

import pytest

from flexflow.core import FFConfig, FFModel

from .models import BATCH, MODELS, NO_SPLIT, SplitError, strategy


def graph(name):
    ff = FFModel(FFConfig(argv=[], batch_size=BATCH))
    MODELS[name](ff)
    return ff.graph


@pytest.mark.parametrize("name, kind, n", list(NO_SPLIT))
def test_left_out_cases_split_no_layer(name, kind, n):
    with pytest.raises(SplitError, match=f"{name}, {kind} on {n} devices: splits no layer"):
        strategy(kind, graph(name), n, name)


def test_a_split_that_does_not_fit_a_layer_is_refused():
    with pytest.raises(SplitError, match=r"mlp, parameter on 3 devices: layer Dense_100 has "
                                         r"parameter dims of sizes \[16\], none of which 3"):
        strategy("parameter", graph("mlp"), 3, "mlp")
