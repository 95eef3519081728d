"""FFModel: FlexFlow's model-building and training API.

Op builders append layers to an `ops.graph.Graph` (shapes inferred at once, so a mismatch fails
on the line that caused it, naming the layer). `compile` fixes the label, the objective and the
loss and hands the model to a `CompiledRun` (flexflow/compiled.py), which picks a strategy,
builds the iteration's TaskGraph and an executor, and owns what running changes; the training
calls (`forward`, `backward`, `update`, `fit`, `eval`) run phases of that graph on the batches
fed here. Host access to tensors and weights goes through the CompiledRun.
"""

from __future__ import annotations

from typing import Callable, Sequence

import numpy as np

from . import checkpoint, deployment, report
from .compiled import CompiledRun, require_compiled
from .config import FFConfig
from .dataloader import SingleDataLoader, check_full_array, check_same_samples
from .scheduler.last_use import Released
from .initializers import ArrayInitializer, Initializer, default_initializer
from .losses import CROSS_ENTROPY_LOSSES, SPARSE_LOSSES, loss_function
from .metrics import PerfMetrics
from .op import Op, wrap
from .ops.attention import MultiHeadAttention
from .ops.batch_matmul import BatchMatmul
from .ops.batch_norm import BatchNorm, take_statistics
from .ops.cast import Cast
from .ops.concat import Concat, Split
from .ops.compare import Compare
from .ops.conv2d import Conv2D
from .ops.dense import Dense
from .ops.dropout import Dropout
from .ops.elementwise import ElementBinary, ElementUnary
from .ops.embedding import Embedding
from .ops.erf import Erf
from .ops.graph import Graph, GraphTensor
from .ops.layer_norm import LayerNorm
from .ops.log import Log
from .ops.log_softmax import LogSoftmax
from .ops.pool2d import Pool2D
from .ops.power import Power
from .ops.reduce import Mean
from .ops.reshape import Flat, Reshape, Reverse, Transpose
from .ops.softmax import Softmax
from .ops.spec import ShapeError, TensorSpec
from .ops.weight import Weight
from .ops.where import Where
from .nonfinite import NonFiniteError
from .scheduler.feeds import host_batch
from .scheduler.taskgraph import Objective
from .tensor import Parameter, Tensor, tensor_name
from .trace import Call, Trace, watch
from .type import (ACTIVATION, AGGREGATION, NUMPY_DTYPE, ActiMode, AggrMode, CompMode, DataType,
                   LossType, MetricsType, PoolType)

TRAIN_STEP = ("forward", "loss", "backward", "update")


def _elementwise_binary(func: str):
    """FFModel's method for a binary element-wise layer, in FlexFlow's form `(x, y,
    inplace_a=False, name=None)`; `inplace_a` is accepted and has no effect (nothing here
    shares buffers between layers)."""
    def method(self, x, y, inplace_a=False, name=None):
        return self._add(ElementBinary(func), [x, y], name)
    method.__name__ = func
    return method


def _scalar_elementwise(func: str):
    """FFModel's method for an element-wise layer with a scalar operand, in FlexFlow's form
    `(input, scalar, inplace=True, name=None)`."""
    def method(self, input, scalar, inplace=True, name=None):
        return self._unary(func, input, name, scalar)
    method.__name__ = func
    return method


class FFModel:
    def __init__(self, ffconfig: FFConfig | None = None):
        self._ffconfig = ffconfig if ffconfig is not None else FFConfig()
        self.graph = Graph()
        self._tensors: dict[int, Tensor] = {}
        self._initializers: dict[tuple[int, int], Initializer] = {}
        self._optimizer = None
        self._label_id: int | None = None
        self._compiled: CompiledRun | None = None  # what compile() made
        self._feeds: dict = {}  # the batches fed for the next run: host arrays or feeds.Rows
        self._training = True  # the mode of the last forward pass (backward runs in it)
        self._perf = PerfMetrics()
        self._comp_mode = CompMode.TRAINING
        self._ran_forward = False
        self._trace = Trace()  # calls deferred while the config traces (flexflow/trace.py)
        watch(self._ffconfig, self)

    @property
    def ffconfig(self) -> FFConfig:
        return self._ffconfig

    # ---- tensors --------------------------------------------------------------------------------
    def create_tensor(self, dims: Sequence[int], data_type=DataType.DT_FLOAT,
                      create_grad: bool = True) -> Tensor:
        spec = _tensor_spec(dims, data_type, "create_tensor")
        return self._tensor(self.graph.add_input(spec).id)

    def create_constant(self, dims: Sequence[int], value: float,
                        data_type=DataType.DT_FLOAT) -> Tensor:
        spec = _tensor_spec(dims, data_type, "create_constant")
        return self._tensor(self.graph.add_constant(spec, value).id)

    def create_weight(self, dims: Sequence[int], trainable: bool = True,
                      initializer: Initializer | None = None, name=None) -> Tensor:
        """(ours) A float32 weight used as a tensor: a layer with no inputs whose output is the
        weight, for models that add or multiply parameters directly. Its value comes from
        `initializer` or `t.owner_op.get_parameter_by_id(0).set_weights(...)` (before or after
        compile); a frozen weight (`trainable=False`) is a constant the optimizer never changes."""
        op = Weight(tuple(int(d) for d in dims), bool(trainable))
        return self._add(op, [], name, None, (initializer,))

    def _tensor(self, tensor_id: int) -> Tensor:
        if tensor_id not in self._tensors:
            producer = self.graph.tensors[tensor_id].producer
            owner = wrap(self, producer[0]) if producer else None
            self._tensors[tensor_id] = Tensor(self, tensor_id, owner)
        return self._tensors[tensor_id]

    # ---- layer building -------------------------------------------------------------------------
    def _add(self, op, inputs: Sequence[Tensor], name=None, shared_op=None,
             initializers: Sequence[Initializer | None] = ()):
        for t in inputs:
            if not isinstance(t, Tensor) or t._model is not self:
                raise ShapeError(f"layer '{name or op.type_name}': inputs must be tensors of this "
                                 f"model, got {t!r}")
        shared = shared_op.idx if isinstance(shared_op, Op) else None
        layer = self.graph.add_layer(op, [t._id for t in inputs], name, shared)
        for k, init in enumerate(initializers):
            if init is not None:
                self._initializers[(layer.index, k)] = init
        outputs = [self._tensor(t) for t in layer.outputs]
        return outputs if isinstance(op, Split) else outputs[0]

    def dense(self, input, out_dim, activation=ActiMode.AC_MODE_NONE, use_bias=True,
              shared_op=None, kernel_initializer=None, bias_initializer=None, name=None,
              datatype=None, kernel_regularizer=None):
        op = Dense(int(out_dim), ACTIVATION[activation], bool(use_bias))
        return self._add(op, [input], name, shared_op, (kernel_initializer, bias_initializer))

    def conv2d(self, input, out_channels, kernel_h, kernel_w, stride_h, stride_w, padding_h,
               padding_w, activation=ActiMode.AC_MODE_NONE, groups=1, use_bias=True,
               shared_op=None, kernel_initializer=None, bias_initializer=None, name=None):
        op = Conv2D(int(out_channels), (int(kernel_h), int(kernel_w)),
                    (int(stride_h), int(stride_w)), _padding(padding_h, padding_w),
                    ACTIVATION[activation], int(groups), bool(use_bias))
        return self._add(op, [input], name, shared_op, (kernel_initializer, bias_initializer))

    def pool2d(self, input, kernel_h, kernel_w, stride_h, stride_w, padding_h, padding_w,
               pool_type=PoolType.POOL_MAX, activation=ActiMode.AC_MODE_NONE, name=None,
               count_include_pad=True):
        """`count_include_pad` (ours) applies to average pooling: False divides each window by
        the number of its elements inside the input (Keras/TensorFlow 'same' pooling)."""
        op = Pool2D((int(kernel_h), int(kernel_w)), (int(stride_h), int(stride_w)),
                    _padding(padding_h, padding_w),
                    "max" if pool_type == PoolType.POOL_MAX else "avg", ACTIVATION[activation],
                    bool(count_include_pad))
        return self._add(op, [input], name)

    def batch_norm(self, input, relu=True, name=None, eps=1e-5, momentum=0.1):
        """`eps` and `momentum` (ours; PyTorch's meaning: running = (1 - momentum) * running +
        momentum * batch statistic) default to the values FlexFlow hard-codes."""
        return self._add(BatchNorm(bool(relu), float(eps), float(momentum)), [input], name)

    def layer_norm(self, input, axes, elementwise_affine=True, eps=1e-05, name=None):
        return self._add(LayerNorm(tuple(axes), bool(elementwise_affine), float(eps)), [input],
                         name)

    def embedding(self, input, num_embeddings=None, embedding_dim=None,
                  aggr=AggrMode.AGGR_MODE_NONE, shared_op=None, kernel_initializer=None,
                  name=None, **legacy):
        num_embeddings = legacy.pop("num_entires", num_embeddings)  # r21.09 keyword names
        embedding_dim = legacy.pop("out_dim", embedding_dim)
        if legacy:
            raise TypeError(f"embedding() got unexpected arguments {sorted(legacy)}")
        op = Embedding(int(num_embeddings), int(embedding_dim), AGGREGATION[aggr])
        return self._add(op, [input], name, shared_op, (kernel_initializer,))

    def flat(self, input, name=None):
        return self._add(Flat(), [input], name)

    def softmax(self, input, axis=-1, name=None):
        return self._add(Softmax(int(axis)), [input], name)

    def log_softmax(self, input, axis=-1, name=None):
        """(ours) log(softmax(input)), computed stably along `axis`."""
        return self._add(LogSoftmax(int(axis)), [input], name)

    def concat(self, tensors, axis, name=None):
        return self._add(Concat(int(axis)), list(tensors), name)

    def split(self, input, sizes, axis, name=None):
        axis = int(axis)
        length = input.dims[axis]
        if isinstance(sizes, (int, np.integer)):
            if sizes <= 0 or length % sizes:
                raise ShapeError(f"layer '{name or 'Split'}': cannot split dim {axis} of size "
                                 f"{length} into {sizes} equal parts (input {input.dims})")
            sizes = [length // int(sizes)] * int(sizes)
        return self._add(Split(tuple(int(s) for s in sizes), axis), [input], name)

    def reshape(self, input, shape, name=None):
        return self._add(Reshape(tuple(int(s) for s in shape)), [input], name)

    def transpose(self, input, perm, name=None):
        return self._add(Transpose(tuple(int(p) for p in perm)), [input], name)

    def reverse(self, input, axis, name=None):
        return self._add(Reverse(int(axis)), [input], name)

    add = _elementwise_binary("add")
    subtract = _elementwise_binary("subtract")
    multiply = _elementwise_binary("multiply")
    divide = _elementwise_binary("divide")
    max = _elementwise_binary("maximum")
    min = _elementwise_binary("minimum")

    def _unary(self, func, x, name, scalar=None):
        return self._add(ElementUnary(func, None if scalar is None else float(scalar)), [x], name)

    def exp(self, x, name=None):
        return self._unary("exp", x, name)

    def rsqrt(self, input, name=None):
        return self._unary("rsqrt", input, name)

    def erf(self, input, name=None):
        """(ours) The error function, element-wise."""
        return self._add(Erf(), [input], name)

    def log(self, input, name=None):
        """(ours) The natural logarithm, element-wise."""
        return self._add(Log(), [input], name)

    def compare(self, x, y, func, name=None):
        """(ours) A bool tensor: x `func` y element-wise with broadcasting, `func` one of
        "less", "less_equal", "greater", "greater_equal", "equal"."""
        return self._add(Compare(str(func)), [x, y], name)

    def where(self, cond, x, y, name=None):
        """(ours) x where the bool tensor `cond` holds, else y, with broadcasting."""
        return self._add(Where(), [cond, x, y], name)

    def cast(self, input, data_type, name=None):
        """(ours) `input` converted to the DataType `data_type`."""
        if data_type not in NUMPY_DTYPE:
            raise ShapeError(f"cast: unsupported data type {data_type!r}")
        return self._add(Cast(NUMPY_DTYPE[data_type]), [input], name)

    def pow(self, input, exponent, name=None):
        """`exponent` is a number, or (ours) a tensor broadcast against `input`."""
        if isinstance(exponent, Tensor):
            return self._add(Power(), [input, exponent], name)
        return self._unary("pow", input, name, exponent)

    def mean(self, input, dims, keepdims=False, name=None):
        return self._add(Mean(tuple(int(d) for d in dims), bool(keepdims)), [input], name)

    scalar_multiply = _scalar_elementwise("scalar_multiply")
    scalar_add = _scalar_elementwise("scalar_add")
    scalar_sub = _scalar_elementwise("scalar_sub")
    scalar_true_divide = _scalar_elementwise("scalar_true_divide")

    scalar_truediv = scalar_true_divide

    def relu(self, input, inplace=True, name=None):
        return self._unary("relu", input, name)

    def elu(self, input, inplace=True, name=None):
        return self._unary("elu", input, name)

    def gelu(self, input, inplace=True, name=None):
        return self._unary("gelu", input, name)

    def sigmoid(self, input, name=None):
        return self._unary("sigmoid", input, name)

    def tanh(self, input, name=None):
        return self._unary("tanh", input, name)

    def identity(self, input, name=None):
        return self._unary("identity", input, name)

    def dropout(self, input, rate, seed=0, name=None):
        return self._add(Dropout(float(rate), int(seed)), [input], name)

    def batch_matmul(self, A, B, a_seq_length_dim=None, b_seq_length_dim=None, name=None):
        return self._add(BatchMatmul(a_seq_length_dim, b_seq_length_dim), [A, B], name)

    def multihead_attention(self, query, key, value, embed_dim, num_heads, kdim=0, vdim=0,
                            dropout=0.0, bias=True, add_bias_kv=False, add_zero_attn=False,
                            kernel_initializer=None, name=None):
        op = MultiHeadAttention(int(embed_dim), int(num_heads), int(kdim), int(vdim),
                                float(dropout), bool(bias), bool(add_bias_kv),
                                bool(add_zero_attn))
        projections = [kernel_initializer if w.initializer == "glorot_uniform" else None
                       for w in op.weight_specs([query.spec, key.spec, value.spec])]
        return self._add(op, [query, key, value], name, None, projections)

    # ---- layers and weights ---------------------------------------------------------------------
    def get_layers(self) -> dict[int, Op]:
        return {layer.index: wrap(self, layer.index) for layer in self.graph.layers}

    def get_layer_by_id(self, layer_id: int) -> Op:
        if not 0 <= layer_id < len(self.graph.layers):
            raise IndexError(f"the model has {len(self.graph.layers)} layers, asked for "
                             f"#{layer_id}")
        return wrap(self, layer_id)

    def get_last_layer(self) -> Op:
        return self.get_layer_by_id(len(self.graph.layers) - 1)

    def get_layer_by_name(self, layer_name: str) -> Op:
        for layer in self.graph.layers:
            if layer_name in (layer.user_name, layer.name):
                return wrap(self, layer.index)
        raise KeyError(f"no layer named {layer_name!r}; layers: "
                       f"{[layer.user_name or layer.name for layer in self.graph.layers]}")

    def get_tensor_by_id(self, tensor_id: int) -> Parameter:
        """The `tensor_id`-th weight of the model, counting layer by layer."""
        params = [(layer.index, k) for layer in self.graph.layers
                  if layer.weight_owner == layer.index for k in range(len(layer.weights))]
        if not 0 <= tensor_id < len(params):
            raise IndexError(f"the model has {len(params)} weights, asked for #{tensor_id}")
        return Parameter(self, *params[tensor_id])

    def print_layers(self, id: int = -1) -> None:
        for layer in self.graph.layers:
            if id in (-1, layer.index):
                shapes = [self.graph.tensors[t].spec.shape for t in layer.outputs]
                weights = [(w.name, w.shape) for w in layer.weights]
                print(f"layer {layer.index} {layer.name}: outputs {shapes} weights {weights}")

    # ---- compile --------------------------------------------------------------------------------
    @property
    def optimizer(self):
        return self._optimizer

    @optimizer.setter
    def optimizer(self, optimizer) -> None:
        self.set_optimizer(optimizer)

    def set_optimizer(self, optimizer) -> None:
        self._optimizer = optimizer

    set_sgd_optimizer = set_adam_optimizer = set_optimizer

    @property
    def label_tensor(self) -> Tensor:
        if self._label_id is None:
            raise RuntimeError("label_tensor exists after compile()")
        return self._tensor(self._label_id)

    def compile(self, optimizer=None, loss_type=None, metrics=None, comp_mode=None, *,
                strategy: dict | None = None) -> None:
        """FlexFlow's compile. `strategy` (ours) maps layer names to ParallelConfigs and takes
        precedence over `--import`; without either, every layer is data parallel. What running
        needs and changes is then the CompiledRun's (flexflow/compiled.py)."""
        if optimizer is not None:
            self.optimizer = optimizer
        if not self.graph.layers:
            raise ShapeError("compile(): the model has no layers")
        self._comp_mode = comp_mode if comp_mode is not None else CompMode.TRAINING
        if self._comp_mode == CompMode.TRAINING and self._optimizer is None:
            raise ValueError("compile(): training needs an optimizer (pass optimizer= or set "
                             "ffmodel.optimizer first)")
        loss_type = loss_type if loss_type is not None else LossType.LOSS_SPARSE_CATEGORICAL_CROSSENTROPY
        if not isinstance(loss_type, LossType):
            raise ValueError(f"compile(): loss_type must be a LossType, got {loss_type!r}")
        metrics = tuple(metrics or ())
        for metric in metrics:
            if not isinstance(metric, MetricsType):
                raise ValueError(f"compile(): metrics must be MetricsType members, got {metric!r}")
        deployment.check_inputs(self.graph, self._ffconfig.batch_size)
        if self._comp_mode == CompMode.TRAINING:
            deployment.check_output_batch(self.graph, self._ffconfig.batch_size)
        objective, loss = self._objective_and_loss(loss_type, metrics)
        take_statistics(self.graph, self._ffconfig.per_partition_batch_norm)
        self._perf = PerfMetrics(metrics)
        deployment.check_diagnostics(self._ffconfig)
        previous = self._compiled.executor if self._compiled is not None else None
        self._compiled = None
        self._compiled = CompiledRun(self, objective, loss,
                                              deployment.start_cluster(self._ffconfig), strategy,
                                              self._initial_weights, previous)
        if self._ffconfig.profile_file:
            report.start(self._compiled.cluster.client, self._ffconfig.profile_file)
        print("Compiled ffmodel!")

    def _objective_and_loss(self, loss_type: LossType, metrics: tuple):
        """The label tensor (made at the first compile, its shape set by the loss), what
        training optimises and the loss kernel."""
        last = self.graph.layers[-1]
        output = self.graph.tensors[last.outputs[0]].spec
        batch = output.shape[0]
        sparse = loss_type in SPARSE_LOSSES
        label_spec = TensorSpec((batch,) + (output.shape[1:-1] + (1,) if sparse
                                            else output.shape[1:]),
                                "int32" if sparse else "float32")
        if self._label_id is None:
            self._label_id = self.graph.add_label(label_spec).id
        else:  # compiled again, maybe with another loss
            self.graph.tensors[self._label_id] = GraphTensor(self._label_id, label_spec)
        through_softmax = (isinstance(last.op, Softmax) and last.op.axis in (-1, output.ndim - 1)
                           and loss_type in CROSS_ENTROPY_LOSSES)
        loss = loss_function(loss_type, metrics, batch, output.size // batch, through_softmax)
        return Objective(last.outputs[0], self._label_id, through_softmax), loss

    @property
    def compiled(self) -> CompiledRun | None:
        """(ours) What compile() made and running changes (strategy, task graph, executor,
        counters): flexflow/compiled.py. None before compile. The calls a trace deferred are
        made first (flexflow/trace.py), so whatever reads the run sees them done."""
        self._settle()
        return self._compiled

    @property
    def strategy(self) -> dict:
        """(ours) The strategy the model runs under, layer name -> ParallelConfig."""
        return require_compiled(self, "strategy").strategy

    @property
    def objective(self) -> Objective | None:
        """(ours) What training optimizes, once compiled: the output and label tensors."""
        return self._compiled.objective if self._compiled is not None else None

    def _initial_weights(self) -> dict:
        """Every weight compile creates, by (owner layer, index): set before compile, given an
        initializer, or else the default one seeded by the layer and --seed."""
        seed = self._ffconfig.seed
        arrays = {}
        for layer in self.graph.layers:
            if layer.weight_owner != layer.index:
                continue
            for k, spec in enumerate(layer.weights):
                init = self._initializers.get((layer.index, k)) or default_initializer(
                    spec, seed * 1_000_003 + (layer.index + 100) * 31 + k)
                arrays[(layer.index, k)] = init(spec)
        return arrays

    def init_layers(self) -> None:
        """Weights are created and initialised by compile(); kept for FlexFlow's call order."""
        require_compiled(self, "init_layers")

    # ---- training -------------------------------------------------------------------------------
    def _run(self, *phases: str, zero_gradients: bool = False) -> list:
        """Run `phases` on the fed batches, in the mode of the last forward pass."""
        run = require_compiled(self, phases[0])
        missing = [t for t in self.graph.inputs + [self._label_id]
                   if t not in self._feeds and ("forward" in phases or t == self._label_id)
                   and (t == self._label_id and "loss" in phases or self.graph.consumers(t))]
        if missing:
            raise RuntimeError(f"no data for {', '.join(tensor_name(self, t) for t in missing)}: "
                               f"create a data loader and call next_batch(), or set_tensor()")
        try:
            return run.run(phases, run.iteration(self._feeds, self._training), zero_gradients)
        except NonFiniteError:
            if "forward" in phases:  # it ran: its values can be read to look into the error
                self._ran_forward = True
            raise

    def forward(self, seq_length=None, training: bool | None = None) -> None:
        """`training` (ours) overrides the compile mode for this pass: False runs inference
        (dropout off, batch norm on its running statistics) without needing a label."""
        require_compiled(self, "forward")
        self._training = self._comp_mode == CompMode.TRAINING if training is None else training
        if not self._deferred("forward"):
            self._run("forward")
        self._ran_forward = True

    def backward(self, seq_length=None) -> None:
        """Metrics of the last forward, then gradients; prints the `[Metrics]` line, as
        FlexFlow's backward computes and prints them at every iteration of a hand-written
        loop (forward, zero_gradients, backward, update)."""
        self._require_forward("backward")
        if not self._deferred("backward"):
            self._perf.add(self._run("loss", "backward"))
            self._perf.print()

    def update(self) -> None:
        if not self._deferred("update"):
            self._run("update")

    def zero_gradients(self) -> None:
        if not self._deferred("zero_gradients"):
            require_compiled(self, "zero_gradients").perform(
                lambda executor: executor.zero_gradients())

    def _deferred(self, call: str) -> bool:
        """Inside a trace, note the call to make later instead of making it now."""
        if not self._ffconfig.tracing or self._compiled is None or self._trace.making:
            return False
        self._trace.calls.append(Call(call, dict(self._feeds), self._training))
        return True

    def _settle(self) -> None:
        """Make the calls the trace deferred: each hand-written training iteration as one
        training step, printing its metrics as backward does; other calls one by one."""
        if not self._trace.calls or self._trace.making:
            return
        fed, mode = self._feeds, self._training
        self._trace.making = True
        try:
            for training_step, (first, *_) in self._trace.take():
                self._feeds, self._training = first.feeds, first.training
                if training_step:
                    self.train_step()
                    self._perf.print()
                elif first.name == "forward":
                    self.forward(training=first.training)
                else:
                    getattr(self, first.name)()
        finally:
            self._feeds, self._training = fed, mode
            self._trace.making = False

    def compute_metrics(self) -> None:
        self._require_forward("compute_metrics")
        self._perf.add(self._run("loss"))

    def _require_forward(self, what: str) -> None:
        if not self._ran_forward:
            raise RuntimeError(f"{what}() needs a forward() first")

    def reset_metrics(self) -> None:
        self._settle()
        self._perf.reset()

    def get_perf_metrics(self) -> PerfMetrics:
        """The metrics since the last reset; with --profiling also (ours) `peak_memory`, each
        device's measured peak allocated bytes (flexflow/profiling.py), else None."""
        self._settle()
        profiler = self._compiled.profiler if self._compiled is not None else None
        self._perf.peak_memory = (None if profiler is None or not profiler.peaks
                                  else [profiler.peaks.get(d) for d in
                                        range(len(profiler.predicted_memory))])
        return self._perf

    def prefetch(self) -> None:
        """Batches are sliced on the devices as needed; nothing to prefetch."""

    def train_step(self) -> float:
        """forward + zero_gradients + backward + update as one graph; returns the batch loss."""
        require_compiled(self, "train_step")
        self._training = True
        self._perf.add(self._run(*TRAIN_STEP, zero_gradients=True))
        self._ran_forward = True
        return self._perf.last_loss

    def eval_step(self) -> float:
        """Inference forward + metrics of the fed batch (input and label) as one graph, no
        update; returns the batch loss."""
        require_compiled(self, "eval_step")
        self._training = False
        self._perf.add(self._run("forward", "loss"))
        self._ran_forward = True
        return self._perf.last_loss

    def fit(self, x=None, y=None, batch_size=None, epochs=1) -> None:
        """FlexFlow's fit. After a checkpoint is loaded (ours), the first fit resumes at the
        checkpoint's epoch and iteration, `epochs` counting from the start as before."""
        loaders = _loader_list(x, y, "fit")
        iterations = self._iterations(loaders[-1])
        run = require_compiled(self, "fit")
        try:
            self._fit_epochs(run, loaders, iterations, int(epochs))
        except KeyboardInterrupt as interrupt:  # (Ctrl-C: say where, for its one-line report)
            epoch, iteration = run.fit_position
            interrupt.add_note(f"fit, epoch {epoch + 1} of {int(epochs)} after iteration "
                               f"{iteration} of {iterations}")
            raise
        if run.profiler:
            run.profiler.print_pending()

    def _fit_epochs(self, run, loaders: list, iterations: int, epochs: int) -> None:
        """fit's epochs, from the run's resume point on."""
        first_epoch, done = run.resume_point()
        for epoch in range(first_epoch, epochs):
            for loader in loaders:
                loader.reset()
            self.reset_metrics()
            window = []  # the batches of the iterations to run together (CompiledRun.run_window)
            for iteration in range(iterations):
                for loader in loaders:
                    loader.next_batch(self)
                if epoch == first_epoch and iteration < done:
                    continue  # trained before the checkpoint
                window.append(self._fed())
                if len(window) == run.window_length() or iteration == iterations - 1:
                    self._train_window(window, epoch, iteration + 1 - len(window),
                                       iterations)
                    window = []
            run.fit_position = (epoch + 1, 0)

    def _train_window(self, window: list[dict], epoch: int, first: int, iterations: int) -> None:
        """Train on the batches of `window`, iterations `first`.. of the `iterations` of `epoch`
        of a fit, printing the `[Metrics]` line every `ffconfig.metrics_every` iterations and at
        the epoch's end."""
        run, every = self.compiled, self._ffconfig.metrics_every
        done = iter(range(first + 1, first + len(window) + 1))

        def each():
            iteration = next(done)
            run.fit_position = (epoch, iteration)
            if iteration % every == 0 or iteration == iterations:
                self._perf.print()
        self._train_batches(window, each)

    def _train_batches(self, window: list[dict], each: Callable[[], None]) -> None:
        """Train on each set of fed batches of `window` (`compiled.window_length()` of them at
        most) in turn, as one window of iterations; `each()` is called once every iteration's
        metrics are counted."""
        def counted(pieces):
            self._perf.add(pieces)
            each()
        self._training = True
        try:
            self.compiled.run_window(TRAIN_STEP, window, True, True, counted)
        finally:
            self._ran_forward = True

    def eval(self, x=None, y=None, batch_size=None) -> None:
        loaders = _loader_list(x, y, "eval")
        for loader in loaders:
            loader.reset()
        self.reset_metrics()
        for _ in range(self._iterations(loaders[-1])):
            for loader in loaders:
                loader.next_batch(self)
            self.eval_step()
            self._perf.print()

    def _iterations(self, label_loader) -> int:
        return int(label_loader.num_samples / self._ffconfig.batch_size)

    def create_data_loader(self, batch_tensor: Tensor, full_array) -> SingleDataLoader:
        array = check_full_array(self, batch_tensor, full_array)
        return SingleDataLoader(self, batch_tensor, array, len(array))

    # ---- checkpoints (ours) ---------------------------------------------------------------------
    def save_checkpoint(self, path, epoch: int | None = None, iteration: int = 0):
        """Write the training state (weights, optimizer state, counters, fit's position,
        strategy) to `path`, format in flexflow/checkpoint.py; returns the path. `epoch` and
        `iteration` record a position other than fit's own, for other training loops."""
        state = require_compiled(self, "save_checkpoint").capture()
        if epoch is not None:
            state.epoch, state.iteration = int(epoch), int(iteration)
        return checkpoint.save(path, state, self)

    def load_checkpoint(self, path) -> None:
        """Restore a checkpoint of a model built the same way, under any strategy and device
        count, after checking all of it (`CheckpointError` naming the problem). The next `fit`
        resumes at the saved epoch and iteration, with the saved optimizer hyper-parameters."""
        checkpoint.load(path, self)

    # ---- host access used by Tensor / Parameter ------------------------------------------------
    def _is_label(self, tensor_id: int) -> bool:
        return tensor_id == self._label_id

    def _fed(self) -> dict:
        """The batches fed for the next run, as they are now."""
        return dict(self._feeds)

    def _feed(self, tensor_id: int, array) -> None:
        """Feed a host array, or the `feeds.Rows` of a data set, for the next run."""
        self._feeds[tensor_id] = array

    def _read_tensor(self, tensor_id: int, for_write: bool = False) -> np.ndarray:
        spec = self.graph.tensors[tensor_id].spec
        if tensor_id in self._feeds:
            batch = host_batch(self._feeds[tensor_id])
            return np.array(batch) if for_write else batch
        if self.graph.tensors[tensor_id].producer is None:
            if for_write:  # mapping an unfed input to fill it in, as FlexFlow scripts do
                return np.zeros(spec.shape, spec.dtype)
            raise RuntimeError(f"{tensor_name(self, tensor_id)} has no data yet")
        self._require_forward("get_tensor")
        return self._read_held(tensor_id, lambda executor: executor.get_value(
            tensor_id, spec.shape, spec.dtype))

    def _write_back(self, tensor_id: int, array: np.ndarray) -> None:
        if self.graph.tensors[tensor_id].producer is not None:
            raise RuntimeError(f"{tensor_name(self, tensor_id)} is computed by the model; only "
                               f"inputs, the label and weights can be written")
        self._feed(tensor_id, array)

    def _read_gradient(self, tensor_id: int) -> np.ndarray:
        self._require_forward("get_gradients")
        if self.graph.tensors[tensor_id].producer is None:
            raise RuntimeError(f"{tensor_name(self, tensor_id)} is a model input: no gradient "
                               f"is computed for it (only layer outputs and weights have one)")
        shape = self.graph.tensors[tensor_id].spec.shape
        return self._read_held(tensor_id, lambda executor: executor.get_grad(tensor_id, shape))

    def _read_held(self, tensor_id: int, action):
        """`_read(action)`, a read of one of the last run's tensors; a RuntimeError saying why
        where that run (a whole step) dropped it at its last use (scheduler/last_use.py)."""
        try:
            return self._read(action)
        except Released as released:
            what = {"value": "values", "grad": "gradient"}[released.kind]
            raise RuntimeError(
                f"the {what} of {tensor_name(self, tensor_id)} were freed at their last use: "
                f"train_step(), fit() and eval() keep only the model's outputs; to read an "
                f"intermediate tensor, run the phases by themselves (forward(), then "
                f"backward()), which keep every value until the next forward") from None

    def _read(self, action):
        """`action(executor)`, a read of device state (retried, not replayed, after a lost
        worker)."""
        return self._compiled.perform(action, record=False)

    def _weight_ref(self, layer_index: int, weight_index: int):
        require_compiled(self, "get_weights/set_weights")
        owner = self.graph.layers[layer_index].weight_owner
        return owner, weight_index, self.graph.layers[owner].weights[weight_index].shape

    def _get_weight(self, layer_index: int, weight_index: int) -> np.ndarray:
        ref = self._weight_ref(layer_index, weight_index)
        return self._read(lambda executor: executor.get_weight(*ref))

    def _set_weight(self, layer_index: int, weight_index: int, array: np.ndarray) -> None:
        if self._compiled is None:
            # before compile (ours): the value compile() creates the weight with
            owner = self.graph.layers[layer_index].weight_owner
            self._initializers[(owner, weight_index)] = ArrayInitializer(array)
            return
        owner, index, _ = self._weight_ref(layer_index, weight_index)
        array = np.array(array)  # kept for a recovery to write again
        self._compiled.perform(lambda executor: executor.set_weight(owner, index, array))

    def _get_weight_grad(self, layer_index: int, weight_index: int) -> np.ndarray:
        ref = self._weight_ref(layer_index, weight_index)
        return self._read(lambda executor: executor.get_weight_grad(*ref))


def _tensor_spec(dims, data_type, what: str) -> TensorSpec:
    if not isinstance(data_type, DataType) or data_type not in NUMPY_DTYPE:
        raise ShapeError(f"{what}: unsupported data type {data_type!r}")
    try:
        return TensorSpec(tuple(int(d) for d in dims), NUMPY_DTYPE[data_type])
    except (TypeError, ValueError) as error:
        raise ShapeError(f"{what}: invalid dims {dims!r}: {error}") from None


def _padding(padding_h, padding_w) -> tuple[tuple[int, int], tuple[int, int]]:
    """((top, bottom), (left, right)) from FlexFlow's symmetric sizes or (ours) from
    (before, after) pairs."""
    def pair(p):
        return (int(p), int(p)) if np.ndim(p) == 0 else (int(p[0]), int(p[1]))
    return pair(padding_h), pair(padding_w)


def _loader_list(x, y, what: str) -> list:
    inputs = list(x) if isinstance(x, (list, tuple)) else [x]
    if y is None or any(loader is None for loader in inputs):
        raise ValueError(f"{what}(): pass x= (a data loader or a list of them) and y= (the "
                         f"label loader)")
    check_same_samples(inputs + [y], f"{what}()")
    return inputs + [y]
