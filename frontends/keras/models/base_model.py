"""BaseModel: what Sequential and functional Models share. The graph of layer calls, compile
(which builds the FFModel), weights, summary, and the training calls (in `training.py`).

Every model creates its own FFConfig, which reads FlexFlow's flags (-b, -e, ...) from the
command line, as FlexFlow's Keras models do; `ffconfig=` (ours) passes one instead.
"""

from __future__ import annotations

from flexflow import archive, checkpoint
from flexflow.core import CompMode, FFConfig, FFModel

from .. import losses, metrics as metrics_module, optimizers
from ..layers.base_layer import unique_name
from . import training, weights_file
from .graph import replay
from ..tensor import Tensor


class BaseModel:
    def __init__(self, name=None, ffconfig=None, default_name="model"):
        self.name = name if name is not None else unique_name(default_name)
        self._ffconfig = ffconfig if ffconfig is not None else FFConfig()
        print(f"Python API batchSize({self._ffconfig.batch_size}) workersPerNodes("
              f"{self._ffconfig.workers_per_node}) numNodes({self._ffconfig.num_nodes})")
        self._inputs: list[Tensor] = []
        self._output: Tensor | None = None
        self._nodes = []
        self._ffmodel = None
        self._optimizer = None
        self._loss = None
        self._metrics = []
        self.label_tensor = None
        self.stop_training = False
        self.history = None

    # ---- structure ------------------------------------------------------------------------------
    @property
    def input(self) -> list[Tensor]:
        return list(self._inputs)

    @property
    def output(self) -> Tensor | None:
        return self._output

    @property
    def layers(self) -> list:
        """The layers in execution order (each once; input layers are not listed)."""
        seen = {}
        for node in self._nodes:
            seen.setdefault(id(node.layer), node.layer)
        return list(seen.values())

    @property
    def ffmodel(self) -> FFModel | None:
        return self._ffmodel

    @property
    def ffconfig(self) -> FFConfig:
        return self._ffconfig

    @property
    def optimizer(self):
        return self._optimizer

    def __call__(self, inputs):
        """Apply this model's layers to new tensors; returns the new output tensor."""
        tensors = list(inputs) if isinstance(inputs, (list, tuple)) else [inputs]
        _, mapping = replay(self._nodes, self._inputs, tensors)
        return mapping[id(self._output)]

    def get_layer(self, name=None, index=None):
        layers = self.layers
        if index is not None:
            if not 0 <= index < len(layers):
                raise ValueError(f"Was asked to retrieve layer at index {index} but model only "
                                 f"has {len(layers)} layers.")
            return layers[index]
        if name is None:
            raise ValueError("Provide either a layer name or layer index.")
        for layer in layers:
            if layer.name == name:
                return layer
        raise ValueError(f"No such layer: {name}")

    def summary(self, line_length=None, positions=None, print_fn=None) -> str:
        """FlexFlow's summary: one line per input and layer call (name (type), output shape,
        input shape, the layers it reads from). Printed with `print_fn` (default `print`, as
        Keras does) and returned as a string (as FlexFlow did: its examples print the result)."""
        if line_length is not None or positions is not None:
            raise ValueError("summary(): line_length and positions are not supported")
        lines = ["Layer (type)\t\tOutput Shape\t\tInput Shape\tConnected to\n"]
        for tensor in self._inputs:
            label = f"{tensor.name} (InputLayer)"
            lines.append(f"{label:<25}\t{tensor.batch_shape}\t\t{tensor.batch_shape}\t\n")
        for node in self._nodes:
            label = f"{node.layer.name} ({node.layer.layer_type})"
            outs = ", ".join(str(t.batch_shape) for t in node.outputs)
            ins = ", ".join(str(t.batch_shape) for t in node.inputs)
            sources = "\t".join(t.from_layer.name for t in node.inputs)
            lines.append(f"{label:<25}\t{outs}\t\t{ins}\t{sources}\n")
        text = "".join(lines)
        (print if print_fn is None else print_fn)(text)
        return text

    # ---- compile --------------------------------------------------------------------------------
    def compile(self, optimizer, loss=None, metrics=None, loss_weights=None,
                weighted_metrics=None, run_eagerly=None, comp_mode=None, **kwargs):
        """Build the FFModel: one op (or a few) per layer call, then FFModel.compile. `optimizer`
        is an SGD/Adam instance or the name 'sgd'/'adam'; `loss` a Loss or its name; `metrics` a
        list of Metrics or names."""
        for key, value in dict(loss_weights=loss_weights, weighted_metrics=weighted_metrics,
                               run_eagerly=run_eagerly, **kwargs).items():
            if value is not None:
                raise ValueError(f"compile(): {key} is not supported")
        if self._output is None:
            raise ValueError(f"model '{self.name}' has no layers to compile")
        if loss is None:
            raise ValueError("compile(): loss is required")
        self._optimizer = optimizers.get(optimizer)
        self._loss = losses.get(loss)
        if metrics is not None and not isinstance(metrics, (list, tuple)):
            raise ValueError(f"compile(): metrics must be a list, got {metrics!r}")
        self._metrics = [metrics_module.get(m) for m in metrics or ()]
        ffmodel = FFModel(self._ffconfig)
        mapping = self._build(ffmodel)
        self._ff_inputs = [mapping[id(t)] for t in self._inputs]
        self._ff_output = mapping[id(self._output)]
        ffmodel.optimizer = self._optimizer.create_ffhandle(ffmodel)
        ffmodel.compile(loss_type=self._loss.type, metrics=[m.type for m in self._metrics],
                        comp_mode=comp_mode if comp_mode is not None else CompMode.TRAINING)
        self._ffmodel = ffmodel
        label = ffmodel.label_tensor
        self.label_tensor = Tensor(label.dims[1:], str(label.spec.dtype), name="label")
        self.label_tensor.batch_size, self.label_tensor.ffhandle = label.dims[0], label

    def _build(self, ffmodel) -> dict:
        """Emit every layer call into `ffmodel`; returns keras tensor id -> FFModel tensor."""
        batch = self._ffconfig.batch_size
        mapping = {}
        for tensor in self._inputs:
            mapping[id(tensor)] = ffmodel.create_tensor((batch,) + tensor.shape_without_batch,
                                                        tensor.dtype)
        for index, layer in enumerate(self.layers):
            layer.layer_id = index
        for node in self._nodes:
            outputs = node.layer.emit(ffmodel, [mapping[id(t)] for t in node.inputs])
            mapping.update({id(t): out for t, out in zip(node.outputs, outputs)})
        for tensor in self._inputs + [t for node in self._nodes for t in node.outputs]:
            ff_tensor = mapping[id(tensor)]
            if tuple(ff_tensor.dims) != (batch,) + tensor.shape_without_batch:
                raise RuntimeError(f"internal error: {tensor!r} became an FFModel tensor of "
                                   f"dims {ff_tensor.dims}")
            tensor.batch_size, tensor.ffhandle = batch, ff_tensor
        return mapping

    def _require_compiled(self, what: str) -> None:
        if self._ffmodel is None:
            raise RuntimeError(f"{what}() needs a compiled model: call model.compile(...) first")

    # ---- what fit/evaluate expect ------------------------------------------------------------
    @property
    def sparse_labels(self) -> bool:
        return isinstance(self._loss, losses.SparseCategoricalCrossentropy)

    @property
    def label_shape(self) -> tuple:
        return self.label_tensor.shape_without_batch

    @property
    def label_dtype(self) -> str:
        return self.label_tensor.dtype_str

    @property
    def metrics_names(self) -> list[str]:
        return ["loss"] + [m.name for m in self._metrics]

    # ---- weights --------------------------------------------------------------------------------
    def _weighted_layers(self) -> list:
        self._require_compiled("weights")
        return [layer for layer in self.layers if layer._ffops.get(self._ffmodel) is not None]

    def get_weights(self) -> list:
        """Every weight of the model, layer by layer, as float32 arrays."""
        return [w for layer in self._weighted_layers()
                for w in layer.get_weights(self._ffmodel)]

    def set_weights(self, weights) -> None:
        """The inverse of get_weights."""
        weights = list(weights)
        for layer in self._weighted_layers():
            count = len(layer.weight_names(self._ffmodel))
            if len(weights) < count:
                raise ValueError("set_weights(): fewer arrays than the model has weights")
            layer.set_weights(self._ffmodel, weights[:count])
            weights = weights[count:]
        if weights:
            raise ValueError(f"set_weights(): {len(weights)} more arrays than the model has "
                             f"weights")

    def _layer_weights(self, arrays: bool) -> list:
        """[(layer name, [(weight name, array or shape), ...])] for the layers with weights."""
        out = []
        for layer in self._weighted_layers():
            params = layer._parameters(self._ffmodel)
            values = layer.get_weights(self._ffmodel) if arrays else [p.dims for p in params]
            out.append((layer.name, list(zip(layer.weight_names(self._ffmodel), values))))
        return out

    def save_weights(self, filepath):
        """Write every weight to `filepath` (format: models/weights_file.py); returns the path."""
        return weights_file.save(filepath, self._layer_weights(arrays=True))

    def load_weights(self, filepath, by_name=False) -> None:
        """Read weights written by save_weights (layer by layer in order, or by layer name), or
        a full checkpoint written by ModelCheckpoint / FFModel.save_checkpoint, told apart by
        content. A checkpoint restores the whole training state, matching layers by their
        FFModel names (`by_name` does not apply); fit(initial_epoch=N) then resumes it."""
        self._require_compiled("load_weights")
        if archive.is_archive_with(filepath, checkpoint.METADATA):
            self._ffmodel.load_checkpoint(filepath)
            self._optimizer.lr = float(self._ffmodel.optimizer.lr)  # a scheduled rate
            return
        arrays = weights_file.load(filepath, self._layer_weights(arrays=False), by_name)
        for layer, values in zip(self._weighted_layers(), arrays):
            layer.set_weights(self._ffmodel, values)

    # ---- training -------------------------------------------------------------------------------
    def fit(self, x=None, y=None, batch_size=None, epochs=1, verbose=1, callbacks=None,
            validation_split=0.0, validation_data=None, shuffle=True, class_weight=None,
            sample_weight=None, initial_epoch=0, steps_per_epoch=None, validation_steps=None,
            validation_batch_size=None, validation_freq=1, max_queue_size=10, workers=1,
            use_multiprocessing=False):
        """Train; returns a History. See training.fit."""
        for key, value in dict(class_weight=class_weight, sample_weight=sample_weight,
                               steps_per_epoch=steps_per_epoch,
                               validation_steps=validation_steps).items():
            if value is not None:
                raise ValueError(f"fit(): {key} is not supported")
        self._require_compiled("fit")
        return training.fit(self, x, y, batch_size, epochs, verbose, callbacks,
                            validation_split, validation_data, shuffle, initial_epoch,
                            validation_batch_size, validation_freq)

    def evaluate(self, x=None, y=None, batch_size=None, verbose=1, sample_weight=None,
                 steps=None, callbacks=None, max_queue_size=10, workers=1,
                 use_multiprocessing=False, return_dict=False):
        """Loss and metrics over (x, y) in inference mode: the loss alone without metrics, else
        [loss, metric...] in compile order, or a dict with return_dict=True."""
        for key, value in dict(sample_weight=sample_weight, steps=steps).items():
            if value is not None:
                raise ValueError(f"evaluate(): {key} is not supported")
        self._require_compiled("evaluate")
        logs = training.evaluate(self, x, y, batch_size, verbose, callbacks)
        if return_dict:
            return logs
        values = [logs[name] for name in self.metrics_names]
        return values[0] if len(values) == 1 else values

    def predict(self, x, batch_size=None, verbose=0, steps=None, callbacks=None,
                max_queue_size=10, workers=1, use_multiprocessing=False):
        """The model output for every sample of x (inference mode)."""
        if steps is not None or callbacks is not None:
            raise ValueError("predict(): steps and callbacks are not supported")
        self._require_compiled("predict")
        return training.predict(self, x, batch_size)

    def train_on_batch(self, x, y):
        """One training step on exactly one batch; returns the loss (and metrics) of it."""
        self._require_compiled("train_on_batch")
        return training.on_batch(self, x, y, train=True)

    def test_on_batch(self, x, y):
        self._require_compiled("test_on_batch")
        return training.on_batch(self, x, y, train=False)

    def predict_on_batch(self, x):
        self._require_compiled("predict_on_batch")
        return training.predict(self, x, None, exact_batch=True)
