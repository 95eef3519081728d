"""MNIST MLP imported from the ONNX file `mnist_mlp_pt.py` wrote (`-f FILE`, default
`mnist_mlp_pt.onnx`), trained from the PyTorch weights, then evaluated on the training set.

Flags: FFConfig's (-b, -e, -d ...), plus -f/--file, -a/--test_acc and --num-samples N.
"""

from flexflow.core import *
from flexflow.onnx.model import ONNXModel

from onnx_example_utils import (INPUT_NAME, ModelAccuracy, check_accuracy, compile_and_train,
                                flags, script_args, mnist_training_data)


def top_level_task():
    args = script_args()
    ffconfig = FFConfig()
    ffmodel = FFModel(ffconfig)
    input_tensor = ffmodel.create_tensor([ffconfig.batch_size, 784], DataType.DT_FLOAT)
    onnx_model = ONNXModel(flags("mnist_mlp_pt.onnx").file)
    output = onnx_model.apply(ffmodel, {INPUT_NAME: input_tensor})
    ffmodel.softmax(output)
    x_train, y_train = mnist_training_data(ffconfig, (784,), args.num_samples)
    compile_and_train(ffmodel, ffconfig, input_tensor, x_train, y_train)
    if args.test_acc:
        check_accuracy(ffmodel, ModelAccuracy.MNIST_MLP)


if __name__ == "__main__":
    print("mnist_mlp (from ONNX)")
    top_level_task()
