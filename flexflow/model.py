"""FFModel: FlexFlow's model-building and training API.

Op builders append layers to an `ops.graph.Graph` (shapes inferred at once, so a mismatch fails
on the line that caused it, naming the layer). `compile` picks a strategy, builds the iteration's
TaskGraph and an executor; the training calls (`forward`, `backward`, `update`, `fit`, `eval`) run
phases of that graph. Host access to tensors and weights goes through the executor.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from . import checkpoint, nonfinite, profiling, recovery, report
from .config import FFConfig, FlagError
from .dataloader import SingleDataLoader, check_full_array
from .initializers import ArrayInitializer, Initializer, default_initializer
from .losses import CROSS_ENTROPY_LOSSES, SPARSE_LOSSES, loss_function
from .metrics import PerfMetrics
from .op import Op, wrap
from .plots import check_path, search_trace, timeline
from .ops.attention import MultiHeadAttention
from .ops.batch_matmul import BatchMatmul
from .ops.batch_norm import BatchNorm
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
from .scheduler.actions import Context
from .scheduler import cluster as cluster_module
from .scheduler import strategy_file
from .scheduler.distributed import DaskExecutor
from .scheduler.executor import LocalExecutor
from .scheduler.progress import Progress
from .scheduler.planner import Planner, PlanOptions, capacities, runner_for
from .scheduler.search import SearchOptions
from .scheduler.strategy import data_parallel_strategy
from .scheduler.taskgraph import Checks, Objective, build_task_graph
from .tensor import Parameter, Tensor
from .type import (ACTIVATION, AGGREGATION, NUMPY_DTYPE, ActiMode, AggrMode, CompMode, DataType,
                   LossType, MetricsType, PoolType)

TRAIN_STEP = ("forward", "loss", "backward", "update")


class FFModel:
    def __init__(self, ffconfig: FFConfig | None = None):
        self._ffconfig = ffconfig if ffconfig is not None else FFConfig()
        self.graph = Graph()
        self._tensors: dict[int, Tensor] = {}
        self._initializers: dict[tuple[int, int], Initializer] = {}
        self._optimizer = None
        self._loss = None  # the loss kernel (ops/losses.py), made by compile()
        self._label_id: int | None = None
        self._executor: LocalExecutor | None = None
        self._ctx: Context | None = None
        self._feeds: dict[int, np.ndarray] = {}
        self._perf = PerfMetrics()
        self._comp_mode = CompMode.TRAINING
        self._ran_forward = False
        self._objective: Objective | None = None
        self._profiler: profiling.OpProfiler | None = None
        self._cluster_in_use = None  # the Dask cluster trained on, None in-process
        self._journal: recovery.Journal | None = None  # for recovery from lost workers
        self._fit_position = (0, 0)  # (epoch, iterations done in it) of the current/last fit
        self._resume_at: tuple[int, int] | None = None  # where the next fit starts (restore)

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

    def _tensor_name(self, tensor_id: int) -> str:
        tensor = self.graph.tensors[tensor_id]
        if tensor_id == self._label_id:
            return f"label tensor {tensor.spec.shape}"
        if tensor.producer is None:
            return f"input tensor #{self.graph.inputs.index(tensor_id) if tensor_id in self.graph.inputs else tensor_id} {tensor.spec.shape}"
        return f"output of layer '{self.graph.layers[tensor.producer[0]].name}' {tensor.spec.shape}"

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

    def _binary(self, func, x, y, name):
        return self._add(ElementBinary(func), [x, y], name)

    def add(self, x, y, inplace_a=False, name=None):
        return self._binary("add", x, y, name)

    def subtract(self, x, y, inplace_a=False, name=None):
        return self._binary("subtract", x, y, name)

    def multiply(self, x, y, inplace_a=False, name=None):
        return self._binary("multiply", x, y, name)

    def divide(self, x, y, inplace_a=False, name=None):
        return self._binary("divide", x, y, name)

    def max(self, x, y, inplace_a=False, name=None):
        return self._binary("maximum", x, y, name)

    def min(self, x, y, inplace_a=False, name=None):
        return self._binary("minimum", x, y, name)

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

    def scalar_multiply(self, input, scalar, inplace=True, name=None):
        return self._unary("scalar_multiply", input, name, scalar)

    def scalar_add(self, input, scalar, inplace=True, name=None):
        return self._unary("scalar_add", input, name, scalar)

    def scalar_sub(self, input, scalar, inplace=True, name=None):
        return self._unary("scalar_sub", input, name, scalar)

    def scalar_true_divide(self, input, scalar, inplace=True, name=None):
        return self._unary("scalar_true_divide", input, name, scalar)

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

    def _update_rule(self):
        """The optimizer's update kernel with its hyper-parameters as they are now."""
        return None if self._optimizer is None else self._optimizer.rule()

    set_sgd_optimizer = set_adam_optimizer = set_optimizer

    @property
    def label_tensor(self) -> Tensor:
        if self._label_id is None:
            raise RuntimeError("label_tensor exists after compile()")
        return self._tensor(self._label_id)

    def compile(self, optimizer=None, loss_type=None, metrics=None, comp_mode=None, *,
                strategy: dict | None = None) -> None:
        """FlexFlow's compile. `strategy` (ours) maps layer names to ParallelConfigs and takes
        precedence over `--import`; without either, every layer is data parallel."""
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
        self._check_inputs()
        last = self.graph.layers[-1]
        output = self.graph.tensors[last.outputs[0]].spec
        batch = output.shape[0]
        sparse = loss_type in SPARSE_LOSSES
        label_spec = TensorSpec((batch,) + ((1,) if sparse else output.shape[1:]),
                                "int32" if sparse else "float32")
        if self._label_id is None:
            self._label_id = self.graph.add_input(label_spec).id
            self.graph.inputs.remove(self._label_id)
        else:  # compiled again, maybe with another loss
            self.graph.tensors[self._label_id] = GraphTensor(self._label_id, label_spec)
        through_softmax = (isinstance(last.op, Softmax) and last.op.axis in (-1, output.ndim - 1)
                           and loss_type in CROSS_ENTROPY_LOSSES)
        self._loss = loss_function(loss_type, metrics, batch, output.size // batch, through_softmax)
        self._perf = PerfMetrics(metrics)
        self._check_diagnostics()
        self._objective = Objective(last.outputs[0], self._label_id, through_softmax)
        self._deploy(self._cluster(), strategy, first=True)
        self._initialize_weights()
        self._journal = recovery.Journal.for_run(self)
        if self._ffconfig.profile_file:
            report.start(self._cluster_in_use.client, self._ffconfig.profile_file)
        print("Compiled ffmodel!")

    def _deploy(self, cluster, strategy: dict | None, first: bool = False) -> None:
        """Choose the strategy for the devices of `cluster` (or this process), build the
        iteration's TaskGraph and start its executor. `first`: compile's own call, which honours
        --import, writes --export and the pictures; after a lost worker (`first` False) the
        strategy is searched again if the run searched, else data parallel on what remains.
        Workers lost while this runs are left out and the plan made again."""
        while True:
            try:
                return self._deploy_on(cluster, strategy, first)
            except cluster_module.WorkerLost as lost:
                recovery.warn_lost(lost, "planning")
                cluster = recovery.remaining(self, cluster)

    def _deploy_on(self, cluster, strategy: dict | None, first: bool) -> None:
        config = self._ffconfig
        num_devices = len(cluster.workers) if cluster else config.num_devices
        objective = self._objective
        what = "the given strategy" if strategy is not None else "data parallelism"
        if first and strategy is None and config.import_strategy_file:
            strategy = strategy_file.load(config.import_strategy_file, self.graph, num_devices)
            what = f"the strategy of {config.import_strategy_file}"
        runner = runner_for(cluster, num_devices, config.cpu_only)
        planner = Planner(self.graph, objective, num_devices, runner, self._plan_options(first),
                          self._loss, self._update_rule())
        trace = search_trace.SearchTrace() if first and config.search_plot_file else None
        if config.search_budget > 0:
            strategy = self._search(planner, strategy, trace)
            what = "the searched strategy"
        self.strategy = dict(strategy or data_parallel_strategy(self.graph, num_devices))
        taskgraph = build_task_graph(self.graph, self.strategy, num_devices, objective,
                                     self._checks())
        planner.finish(self.strategy, taskgraph, capacities(runner, config.device_memory_mb << 20),
                       what, config.export_strategy_file if first else "")
        self._ctx = Context(self.graph, self._loss, self._update_rule(), self._feeds)
        if self._executor is not None:
            self._executor.close()
            self._executor = None
        if first:
            self._draw_pictures(planner, trace)
        self._profiler = None
        if config.profiling:
            simulator = planner.simulator_for(self.strategy)
            self._profiler = profiling.OpProfiler(self.graph,
                                                  simulator.simulate_taskgraph(taskgraph),
                                                  simulator.machine.describe())
        self._cluster_in_use = cluster
        if cluster:
            self._executor = DaskExecutor(taskgraph, self._ctx, cluster.client, cluster.workers,
                                          config.cpu_only)
        else:
            xp = cluster_module.array_module(config.cpu_only)
            self._executor = LocalExecutor(taskgraph, self._ctx, num_devices, xp)

    @property
    def objective(self) -> Objective | None:
        """(ours) What training optimizes, once compiled: the output and label tensors."""
        return self._objective

    def _plan_options(self, first: bool = True) -> PlanOptions:
        """The search and machine-model flags, for the planner. After a lost worker (`first`
        False) the machine-model file no longer describes the devices: calibrate what remains."""
        config = self._ffconfig
        search = SearchOptions(config.search_budget, config.search_alpha,
                               config.enable_sample_parallel, config.enable_parameter_parallel,
                               config.enable_attribute_parallel, config.seed)
        version, machine_file = ((config.machine_model_version, config.machine_model_file)
                                 if first else (0, ""))
        return PlanOptions(search, version, machine_file, config.device_memory_mb << 20,
                           config.export_strategy_task_graph_file if first else "",
                           config.cpu_only, checks=self._checks())

    def _checks(self) -> Checks:
        """What the task graphs check and measure: the non-finite guard and `--profiling`."""
        return Checks(finite_gradients=not self._ffconfig.allow_nonfinite,
                      kernel_times=self._ffconfig.profiling)

    def _cluster(self):
        """The Dask cluster this run uses, or None to run in this process (DESIGN.md)."""
        config = self._ffconfig
        tls = cluster_module.TLSFiles(config.tls_ca_file, config.tls_cert, config.tls_key)
        if config.scheduler_address or tls:  # (TLS files without a tls:// address are refused)
            return cluster_module.connect(config.scheduler_address,
                                          config.workers_per_node * config.num_nodes or None,
                                          tls=tls)
        wants_cluster = config.num_devices > 1 or config.force_cluster or config.profile_file
        if wants_cluster and not config.in_process:
            return cluster_module.start_local(config.num_devices, config.device_memory_mb)
        return None

    def _check_diagnostics(self) -> None:
        """Refuse profiling and picture flags that cannot be honoured, before any work."""
        config = self._ffconfig
        report.check(config)
        for path, flag in ((config.timeline_file, "--timeline"),
                           (config.search_plot_file, "--search-plot")):
            if path:
                check_path(path, flag)
        if config.search_plot_file and config.search_budget <= 0:
            raise FlagError("--search-plot draws the strategy search's trace: it needs a "
                            "search (--budget N with N > 0)")

    def _search(self, planner: Planner, imported, trace) -> dict:
        """The planner's search, with a progress bar (and the trace for --search-plot)."""
        with Progress("MCMC search", self._ffconfig.search_budget + 1) as progress:
            def observe(current_ms: float, best_ms: float) -> None:
                progress.update(info=f"best {best_ms:.4f} ms")
                if trace is not None:
                    trace.record(current_ms, best_ms)
            stream, planner.stream = planner.stream, progress.around(planner.stream)
            try:
                return planner.search(imported, observe)
            finally:
                planner.stream = stream

    def _draw_pictures(self, planner: Planner, trace) -> None:
        """--search-plot and --timeline, once the strategy is chosen."""
        config = self._ffconfig
        if not (config.search_plot_file or config.timeline_file):
            return
        baseline = data_parallel_strategy(self.graph, planner.num_devices)
        simulator = planner.simulator_for(self.strategy, baseline)
        if config.search_plot_file:
            search_trace.draw(config.search_plot_file, trace,
                              simulator.simulate_full(baseline).cost)
            print(f"Search trace drawn in {config.search_plot_file}")
        if config.timeline_file:
            timeline.draw_strategies(config.timeline_file, simulator, self.strategy)
            print(f"Simulated timelines drawn in {config.timeline_file}")

    def _check_inputs(self) -> None:
        batch = self._ffconfig.batch_size
        for tensor_id in self.graph.inputs:
            if not self.graph.consumers(tensor_id):
                continue
            dims = self.graph.tensors[tensor_id].spec.shape
            if dims[0] != batch:
                raise ShapeError(f"input tensor {dims}: dim 0 must be the batch size {batch} "
                                 f"(set with -b), got {dims[0]}")

    def _initialize_weights(self) -> None:
        seed = self._ffconfig.seed
        arrays = {}
        for layer in self.graph.layers:
            if layer.weight_owner != layer.index:
                continue
            for k, spec in enumerate(layer.weights):
                init = self._initializers.get((layer.index, k)) or default_initializer(
                    spec, seed * 1_000_003 + (layer.index + 100) * 31 + k)
                arrays[(layer.index, k)] = init(spec)
        self._executor.set_weights(arrays)

    def init_layers(self) -> None:
        """Weights are created and initialised by compile(); kept for FlexFlow's call order."""
        self._require_compiled("init_layers")

    # ---- training -------------------------------------------------------------------------------
    def _require_compiled(self, what: str) -> None:
        if self._executor is None:
            raise RuntimeError(f"{what}() needs a compiled model; call compile() first")

    def _run(self, *phases: str, zero_gradients: bool = False) -> list:
        self._require_compiled(phases[0])
        missing = [t for t in self.graph.inputs + [self._label_id]
                   if t not in self._feeds and ("forward" in phases or t == self._label_id)
                   and (t == self._label_id and "loss" in phases or self.graph.consumers(t))]
        if missing:
            raise RuntimeError(f"no data for {', '.join(self._tensor_name(t) for t in missing)}: "
                               f"create a data loader and call next_batch(), or set_tensor()")
        self._ctx.optimizer = self._update_rule()
        pieces = self._on_devices(lambda executor: executor.run(*phases,
                                                                zero_gradients=zero_gradients))
        pieces = self._profiler.take(pieces, self._ctx.training) if self._profiler else pieces
        return nonfinite.check(self, phases, pieces)

    def _on_devices(self, action, record: bool = True):
        """`action(executor)`; on a cluster, through the recovery journal, so that a lost worker
        is recovered from (`record`: the action changes device state and is played again after
        a recovery; reads are just retried)."""
        if self._journal is None:
            return action(self._executor)
        return self._journal.perform(self, action, record)

    def _count_update(self) -> None:
        self._ctx.updates += 1
        self._ctx.step += 1
        if self._journal is not None:
            self._journal.updated()

    def forward(self, seq_length=None, training: bool | None = None) -> None:
        """`training` (ours) overrides the compile mode for this pass: False runs inference
        (dropout off, batch norm on its running statistics) without needing a label."""
        self._require_compiled("forward")
        self._ctx.training = self._comp_mode == CompMode.TRAINING if training is None else training
        self._run("forward")
        self._ran_forward = True

    def backward(self, seq_length=None) -> None:
        """Metrics of the last forward, then gradients (FlexFlow's backward computes both)."""
        self._require_forward("backward")
        self._perf.add(self._run("loss", "backward"))

    def update(self) -> None:
        self._run("update")
        self._count_update()

    def zero_gradients(self) -> None:
        self._require_compiled("zero_gradients")
        self._on_devices(lambda executor: executor.zero_gradients())

    def compute_metrics(self) -> None:
        self._require_forward("compute_metrics")
        self._perf.add(self._run("loss"))

    def _require_forward(self, what: str) -> None:
        if not self._ran_forward:
            raise RuntimeError(f"{what}() needs a forward() first")

    def reset_metrics(self) -> None:
        self._perf.reset()

    def get_perf_metrics(self) -> PerfMetrics:
        return self._perf

    def prefetch(self) -> None:
        """Batches are sliced on the devices as needed; nothing to prefetch."""

    def train_step(self) -> float:
        """forward + zero_gradients + backward + update as one graph; returns the batch loss."""
        self._ctx.training = True
        self._perf.add(self._run(*TRAIN_STEP, zero_gradients=True))
        self._ran_forward = True
        self._count_update()
        return self._perf.last_loss

    def eval_step(self) -> float:
        """Inference forward + metrics of the fed batch (input and label) as one graph, no
        update; returns the batch loss."""
        self._require_compiled("eval_step")
        self._ctx.training = False
        self._perf.add(self._run("forward", "loss"))
        self._ran_forward = True
        return self._perf.last_loss

    def fit(self, x=None, y=None, batch_size=None, epochs=1) -> None:
        """FlexFlow's fit. After a checkpoint is loaded (ours), the first fit resumes at the
        checkpoint's epoch and iteration, `epochs` counting from the start as before."""
        loaders = _loader_list(x, y, "fit")
        iterations = self._iterations(loaders[-1])
        first_epoch, done = self._resume_at or (0, 0)
        self._resume_at = None
        for epoch in range(first_epoch, int(epochs)):
            for loader in loaders:
                loader.reset()
            self.reset_metrics()
            for iteration in range(iterations):
                for loader in loaders:
                    loader.next_batch(self)
                if epoch == first_epoch and iteration < done:
                    continue  # trained before the checkpoint
                self.train_step()
                self._fit_position = (epoch, iteration + 1)
                self._perf.print()
            self._fit_position = (epoch + 1, 0)
        if self._profiler:
            self._profiler.print_pending()

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
        self._require_compiled("save_checkpoint")
        state = checkpoint.capture(self)
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

    def _feed(self, tensor_id: int, array: np.ndarray) -> None:
        self._feeds[tensor_id] = array

    def _read_tensor(self, tensor_id: int, for_write: bool = False) -> np.ndarray:
        spec = self.graph.tensors[tensor_id].spec
        if tensor_id in self._feeds:
            return np.array(self._feeds[tensor_id]) if for_write else self._feeds[tensor_id]
        if self.graph.tensors[tensor_id].producer is None:
            if for_write:  # mapping an unfed input to fill it in, as FlexFlow scripts do
                return np.zeros(spec.shape, spec.dtype)
            raise RuntimeError(f"{self._tensor_name(tensor_id)} has no data yet")
        self._require_forward("get_tensor")
        return self._on_devices(lambda executor: executor.get_value(tensor_id, spec.shape,
                                                                    spec.dtype), record=False)

    def _write_back(self, tensor_id: int, array: np.ndarray) -> None:
        if self.graph.tensors[tensor_id].producer is not None:
            raise RuntimeError(f"{self._tensor_name(tensor_id)} is computed by the model; only "
                               f"inputs, the label and weights can be written")
        self._feed(tensor_id, array)

    def _read_gradient(self, tensor_id: int) -> np.ndarray:
        self._require_forward("get_gradients")
        if self.graph.tensors[tensor_id].producer is None:
            raise RuntimeError(f"{self._tensor_name(tensor_id)} is a model input: no gradient "
                               f"is computed for it (only layer outputs and weights have one)")
        shape = self.graph.tensors[tensor_id].spec.shape
        return self._on_devices(lambda executor: executor.get_grad(tensor_id, shape),
                                record=False)

    def _weight_ref(self, layer_index: int, weight_index: int):
        self._require_compiled("get_weights/set_weights")
        owner = self.graph.layers[layer_index].weight_owner
        return owner, weight_index, self.graph.layers[owner].weights[weight_index].shape

    def _get_weight(self, layer_index: int, weight_index: int) -> np.ndarray:
        ref = self._weight_ref(layer_index, weight_index)
        return self._on_devices(lambda executor: executor.get_weight(*ref), record=False)

    def _set_weight(self, layer_index: int, weight_index: int, array: np.ndarray) -> None:
        if self._executor is None:
            # before compile (ours): the value compile() creates the weight with
            owner = self.graph.layers[layer_index].weight_owner
            self._initializers[(owner, weight_index)] = ArrayInitializer(array)
            return
        owner, index, _ = self._weight_ref(layer_index, weight_index)
        array = np.array(array)  # kept for a recovery to write again
        self._on_devices(lambda executor: executor.set_weight(owner, index, array))

    def _get_weight_grad(self, layer_index: int, weight_index: int) -> np.ndarray:
        ref = self._weight_ref(layer_index, weight_index)
        return self._on_devices(lambda executor: executor.get_weight_grad(*ref), record=False)


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
    return inputs + [y]
