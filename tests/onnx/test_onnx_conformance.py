"""ONNX's own node conformance tests (`onnx.backend.test.BackendTest`) run against the importer
and an FFModel forward pass through `flexflow.onnx.backend.FlexFlowBackend`, for the operators
the importer supports, with an explicit include list (`conformance_cases.PASSING`). Every other
case of those operators is listed with the reason it is not run, and must fail with an
ONNXImportError.
"""

import importlib
import warnings
from unittest import mock

import onnx
import pytest
from onnx import numpy_helper
from onnx.backend.test import BackendTest
from onnx.backend.test import runner as onnx_runner

from flexflow.onnx.backend import FlexFlowBackend
from flexflow.onnx.errors import ONNXImportError

from .conformance_cases import PASSING, RANDOM, UNSUPPORTED

# The modules of onnx.backend.test.case.node that generate the cases of the supported operators.
OPERATOR_MODULES = (
    "add sub mul div pow sqrt reciprocal exp relu leakyrelu elu sigmoid tanh gelu erf softmax "
    "logsoftmax conv maxpool averagepool globalaveragepool globalmaxpool batch_normalization "
    "layernormalization dropout flatten reshape transpose concat split squeeze unsqueeze "
    "identity cast constant shape gather slice reducemean reducesum pad clip gemm matmul "
    "isnan isinf not_ and_ or_ xor neg instance_normalization groupnormalization lstm").split()


def _node_cases():
    """The cases of OPERATOR_MODULES only: the onnx package generates a module's cases (running
    its reference implementation) when the module is imported, and generating all of them
    takes half a minute."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the generators' own numpy warnings
        for module in OPERATOR_MODULES:
            importlib.import_module(f"onnx.backend.test.case.node.{module}")
    from onnx.backend.test.case.node import _NodeTestCases
    return list(_NodeTestCases)


CASES = _node_cases()


def _these_node_cases(data_dir=None, kind=None):
    return CASES if kind == "node" else []


with mock.patch.object(onnx_runner, "load_model_tests", _these_node_cases):
    backend_test = BackendTest(FlexFlowBackend, __name__)
for _name in PASSING:
    backend_test.include(f"^{_name}_cpu$")
globals().update(backend_test.test_cases)

NOT_RUN = {name for names in UNSUPPORTED.values() for name in names}


def test_every_case_passes_or_has_a_reason():
    names = {case.name for case in CASES}
    assert len(PASSING) == len(set(PASSING))
    assert not set(PASSING) & NOT_RUN
    assert names == set(PASSING) | NOT_RUN, (names ^ (set(PASSING) | NOT_RUN))


def _array(value):
    return numpy_helper.to_array(value) if isinstance(value, onnx.TensorProto) else value


@pytest.mark.parametrize("case", [c for c in CASES if c.name in NOT_RUN - set(UNSUPPORTED[RANDOM])],
                         ids=lambda case: case.name)
def test_cases_not_run_fail_with_a_clear_error(case):
    with pytest.raises(ONNXImportError):
        rep = FlexFlowBackend.prepare(case.model)
        for inputs, _ in case.data_sets:
            rep.run([_array(x) for x in inputs])
