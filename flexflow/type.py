"""FlexFlow's enums, with the member names and values of release r22.07."""

from __future__ import annotations

from enum import Enum


# The small enums, each a table of FlexFlow's member names and values.
ActiMode = Enum("ActiMode", {
    "AC_MODE_NONE": 10, "AC_MODE_RELU": 11, "AC_MODE_SIGMOID": 12, "AC_MODE_TANH": 13,
    "AC_MODE_GELU": 14}, module=__name__)
AggrMode = Enum("AggrMode", {
    "AGGR_MODE_NONE": 20, "AGGR_MODE_SUM": 21, "AGGR_MODE_AVG": 22}, module=__name__)
PoolType = Enum("PoolType", {"POOL_MAX": 30, "POOL_AVG": 31}, module=__name__)
DataType = Enum("DataType", {
    "DT_BOOLEAN": 40, "DT_INT32": 41, "DT_INT64": 42, "DT_FLOAT": 43, "DT_DOUBLE": 44,
    "DT_NONE": 49}, module=__name__)
LossType = Enum("LossType", {
    "LOSS_CATEGORICAL_CROSSENTROPY": 50, "LOSS_SPARSE_CATEGORICAL_CROSSENTROPY": 51,
    "LOSS_MEAN_SQUARED_ERROR_AVG_REDUCE": 52, "LOSS_MEAN_SQUARED_ERROR_SUM_REDUCE": 53,
    "LOSS_IDENTITY": 54}, module=__name__)
CompMode = Enum("CompMode", {"TRAINING": 70, "INFERENCE": 71}, module=__name__)
ParameterSyncType = Enum("ParameterSyncType", {"NONE": 80, "PS": 81, "NCCL": 82}, module=__name__)
MetricsType = Enum("MetricsType", {
    "METRICS_ACCURACY": 1001, "METRICS_CATEGORICAL_CROSSENTROPY": 1002,
    "METRICS_SPARSE_CATEGORICAL_CROSSENTROPY": 1004, "METRICS_MEAN_SQUARED_ERROR": 1008,
    "METRICS_ROOT_MEAN_SQUARED_ERROR": 1016, "METRICS_MEAN_ABSOLUTE_ERROR": 1032}, module=__name__)


class OpType(Enum):
    CONV2D = 2011
    EMBEDDING = 2012
    POOL2D = 2013
    LINEAR = 2014
    SOFTMAX = 2015
    CONCAT = 2016
    FLAT = 2017
    MSELOSS = 2020
    BATCH_NORM = 2021
    RELU = 2022
    SIGMOID = 2023
    TANH = 2024
    ELU = 2025
    DROPOUT = 2026
    BATCH_MATMUL = 2027
    SPLIT = 2028
    RESHAPE = 2029
    TRANSPOSE = 2030
    REVERSE = 2031
    EXP = 2040
    ADD = 2041
    SUBTRACT = 2042
    MULTIPLY = 2043
    DIVIDE = 2044
    POW = 2045
    MEAN = 2046
    RSQRT = 2047
    INPUT = 2050
    OUTPUT = 2051
    MULTIHEAD_ATTENTION = 2060
    GETITEM = 2070
    GETATTR = 2080
    EXPAND = 2081
    LAYER_NORM = 2082
    FLOOR_DIVIDE = 2083
    IDENTITY = 2084
    GELU = 2085
    PERMUTE = 2086
    SCALAR_MULTIPLY = 2087
    SCALAR_FLOORDIV = 2088
    SCALAR_ADD = 2089
    SCALAR_SUB = 2090
    SCALAR_TRUEDIV = 2091
    INIT_PARAM = 2092
    FLOAT = 2100
    CONTIGUOUS = 2101
    TO = 2102
    UNSQUEEZE = 2103
    TYPE_AS = 2104
    VIEW = 2105
    ATTRIBUTE = 2200


def enum_to_int(enum, member) -> int:
    if not isinstance(member, enum):
        raise ValueError(f"{member!r} is not a member of {enum.__name__}")
    return member.value


def int_to_enum(enum, value: int):
    try:
        return enum(value)
    except ValueError:
        raise ValueError(f"{value} is not a value of {enum.__name__}") from None


def enum_to_str(enum, member) -> str:
    return enum_to_int(enum, member) and member.name


def str_to_enum(enum, name: str):
    try:
        return enum[name]
    except KeyError:
        raise ValueError(f"{name!r} is not a member of {enum.__name__}") from None


NUMPY_DTYPE = {DataType.DT_FLOAT: "float32", DataType.DT_DOUBLE: "float64",
               DataType.DT_INT32: "int32", DataType.DT_INT64: "int64",
               DataType.DT_BOOLEAN: "bool"}
DATA_TYPE = {name: member for member, name in NUMPY_DTYPE.items()}
ACTIVATION = {ActiMode.AC_MODE_NONE: "none", ActiMode.AC_MODE_RELU: "relu",
              ActiMode.AC_MODE_SIGMOID: "sigmoid", ActiMode.AC_MODE_TANH: "tanh",
              ActiMode.AC_MODE_GELU: "gelu"}
AGGREGATION = {AggrMode.AGGR_MODE_NONE: "none", AggrMode.AGGR_MODE_SUM: "sum",
               AggrMode.AGGR_MODE_AVG: "avg"}
