"""Inspecting and editing a model's layers and weights from Python: get_layers, get_layer_by_id,
Parameter.set_weights / get_weights, and inline_map / get_array / inline_unmap on a weight; then
the model trains on MNIST.

Flags: FFConfig's (-b, -e, -d ...), plus --num-samples N.
"""

from flexflow.core import *

from example_utils import mnist_training_data, script_args

HIDDEN = 128


def top_level_task():
    args = script_args()
    ffconfig = FFConfig()
    ffmodel = FFModel(ffconfig)

    input_tensor = ffmodel.create_tensor([ffconfig.batch_size, 784], DataType.DT_FLOAT)
    t = ffmodel.dense(input_tensor, HIDDEN, ActiMode.AC_MODE_RELU, name="hidden")
    t = ffmodel.dense(t, 10, name="logits")
    t = ffmodel.softmax(t)

    ffmodel.compile(optimizer=SGDOptimizer(ffmodel, 0.01),
                    loss_type=LossType.LOSS_SPARSE_CATEGORICAL_CROSSENTROPY,
                    metrics=[MetricsType.METRICS_ACCURACY,
                             MetricsType.METRICS_SPARSE_CATEGORICAL_CROSSENTROPY])
    label_tensor = ffmodel.label_tensor
    x_train, y_train = mnist_training_data(ffconfig, (784,), args.num_samples)
    dataloader_input = ffmodel.create_data_loader(input_tensor, x_train)
    dataloader_label = ffmodel.create_data_loader(label_tensor, y_train)
    num_samples = dataloader_input.num_samples
    ffmodel.init_layers()

    for idx, layer in ffmodel.get_layers().items():
        print(f"layer {idx}: {layer} name={layer.name} output dims "
              f"{layer.get_output_tensor().dims}")

    # Weights are written after init_layers, which would otherwise overwrite them.
    hidden_bias = ffmodel.get_layer_by_id(0).get_bias_tensor()
    hidden_bias.set_weights(ffmodel, np.full(HIDDEN, 0.125, dtype=np.float32))
    assert np.all(hidden_bias.get_weights(ffmodel) == 0.125), "set_weights did not take effect"
    print(f"{hidden_bias}: set to 0.125")

    logits_kernel = ffmodel.get_layer_by_name("logits").get_weight_tensor()
    before = logits_kernel.get_weights(ffmodel)
    logits_kernel.inline_map(ffconfig)
    mapped = logits_kernel.get_array(ffconfig)
    mapped *= 0.5
    logits_kernel.inline_unmap(ffconfig)
    after = logits_kernel.get_weights(ffmodel)
    assert np.allclose(after, before * 0.5), "a mapped weight's edit was not written back"
    print(f"{logits_kernel}: halved through inline_map, max |w| {np.abs(before).max():.4f} -> "
          f"{np.abs(after).max():.4f}")

    epochs = ffconfig.epochs
    ts_start = ffconfig.get_current_time()
    ffmodel.fit(x=dataloader_input, y=dataloader_label, epochs=epochs)
    ts_end = ffconfig.get_current_time()
    run_time = 1e-6 * (ts_end - ts_start)
    print("epochs %d, ELAPSED TIME = %.4fs, THROUGHPUT = %.2f samples/s"
          % (epochs, run_time, num_samples * epochs / run_time))

    trained_bias = hidden_bias.get_weights(ffmodel)
    print(f"{hidden_bias} after training: mean {trained_bias.mean():.4f}, "
          f"range [{trained_bias.min():.4f}, {trained_bias.max():.4f}]")


if __name__ == "__main__":
    print("print layers")
    top_level_task()
