"""`flexflow.core`: FlexFlow's low-level API (its C++ API in Python), importable as
`from flexflow.core import *`, the way FlexFlow scripts do."""

import numpy as np

from ..checkpoint import CheckpointError
from ..config import DLRMConfig, FFConfig, FlagError, NetConfig
from ..dataloader import DataLoader2D, DataLoader4D, SingleDataLoader
from ..initializers import (GlorotUniformInitializer, Initializer, NormInitializer,
                            UniformInitializer, ZeroInitializer)
from ..metrics import PerfMetrics
from ..model import FFModel
from ..nonfinite import NonFiniteError
from ..op import WRAPPERS, Batch_Norm, Op
from ..ops.spec import ShapeError
from ..optimizers import AdamOptimizer, SGDOptimizer
from ..tensor import Parameter, Tensor
from ..type import (ActiMode, AggrMode, CompMode, DataType, LossType, MetricsType, OpType,
                    ParameterSyncType, PoolType, enum_to_int, enum_to_str, int_to_enum,
                    str_to_enum)

globals().update({cls.__name__: cls for cls in WRAPPERS.values()})


def flexflow_python_binding() -> str:
    return "dask"


def get_legion_runtime():
    """There is no Legion runtime; kept so scripts that import it load."""
    return None


get_legion_context = get_legion_runtime

__all__ = [name for name in dir() if not name.startswith("_")]
