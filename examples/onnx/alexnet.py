"""AlexNet imported from the ONNX file `alexnet_pt.py` wrote (`-f FILE`, default
`alexnet_pt.onnx`), trained on CIFAR-10 upsampled to 229x229, then evaluated.

Flags: FFConfig's (-b, -e, -d ...), plus -f/--file, -a/--test_acc and --num-samples N.
"""

from flexflow.core import *
from flexflow.onnx.model import ONNXModel

from onnx_example_utils import (INPUT_NAME, ModelAccuracy, check_accuracy, compile_and_train,
                                flags, script_args, cifar10_training_data)


def top_level_task():
    args = script_args()
    ffconfig = FFConfig()
    ffmodel = FFModel(ffconfig)
    input_tensor = ffmodel.create_tensor([ffconfig.batch_size, 3, 229, 229], DataType.DT_FLOAT)
    onnx_model = ONNXModel(flags("alexnet_pt.onnx").file)
    output = onnx_model.apply(ffmodel, {INPUT_NAME: input_tensor})
    ffmodel.softmax(output)
    x_train, y_train = cifar10_training_data(ffconfig, args.num_samples or 256, 229)
    compile_and_train(ffmodel, ffconfig, input_tensor, x_train, y_train)
    if args.test_acc:
        check_accuracy(ffmodel, ModelAccuracy.CIFAR10_ALEXNET)


if __name__ == "__main__":
    print("alexnet (from ONNX)")
    top_level_task()
