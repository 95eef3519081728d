"""The update rules (ops/optimizers.py) against PyTorch's optimizers and FlexFlow's formulas."""

import math

import numpy as np
import pytest
import torch

from flexflow.ops.optimizers import SGD, Adam

from .op_check import randn

STEPS = 4


def run_rule(rule, weight, grads):
    """The weight after one update per gradient; the gradients must come through unchanged."""
    weight = weight.copy()
    state = rule.init_state(np, weight)
    for step, grad in enumerate(grads):
        before = grad.copy()
        rule.update(np, weight, grad, state, step)
        np.testing.assert_array_equal(grad, before, err_msg="the update changed the gradient")
    return weight


def torch_run(make_optimizer, weight, grads):
    param = torch.nn.Parameter(torch.tensor(weight))
    optimizer = make_optimizer([param])
    for grad in grads:
        param.grad = torch.tensor(grad)
        optimizer.step()
    return param.detach().numpy()


@pytest.mark.parametrize("momentum, nesterov, weight_decay", [
    (0.0, False, 0.0), (0.9, False, 0.0), (0.9, True, 0.0), (0.5, False, 0.01), (0.0, False, 0.1)])
def test_sgd_matches_torch(momentum, nesterov, weight_decay):
    weight = randn(6, 5, seed=1)
    grads = [randn(6, 5, seed=2 + k) for k in range(STEPS)]
    rule = SGD(lr=0.1, momentum=momentum, nesterov=nesterov, weight_decay=weight_decay)
    expected = torch_run(lambda p: torch.optim.SGD(p, lr=0.1, momentum=momentum,
                                                   nesterov=nesterov, weight_decay=weight_decay),
                         weight, grads)
    np.testing.assert_allclose(run_rule(rule, weight, grads), expected, rtol=1e-5, atol=1e-6)


def flexflow_adam(rule: Adam, weight, grads):
    """Reference 2.7, written out in float64."""
    w = weight.astype(np.float64)
    m, v = np.zeros_like(w), np.zeros_like(w)
    for t, grad in enumerate(grads, start=1):
        alpha_t = rule.alpha * math.sqrt(1 - rule.beta2 ** t) / (1 - rule.beta1 ** t)
        g = grad + rule.weight_decay * w
        m = rule.beta1 * m + (1 - rule.beta1) * g
        v = rule.beta2 * v + (1 - rule.beta2) * g * g
        w = w - alpha_t * m / (np.sqrt(v) + rule.epsilon)
    return w


@pytest.mark.parametrize("weight_decay, epsilon", [(0.0, 1e-8), (0.01, 1e-8), (0.0, 0.1)])
def test_adam_follows_flexflow_s_rule(weight_decay, epsilon):
    # a large epsilon tells FlexFlow's placement of it (added to sqrt(v)) from PyTorch's
    weight = randn(6, 5, seed=1)
    grads = [randn(6, 5, seed=2 + k, scale=0.1) for k in range(STEPS)]
    rule = Adam(alpha=0.01, weight_decay=weight_decay, epsilon=epsilon)
    np.testing.assert_allclose(run_rule(rule, weight, grads), flexflow_adam(rule, weight, grads),
                               rtol=1e-5, atol=1e-6)


def test_adam_without_epsilon_matches_torch():
    weight = randn(6, 5, seed=1)
    grads = [randn(6, 5, seed=2 + k) for k in range(STEPS)]
    expected = torch_run(lambda p: torch.optim.Adam(p, lr=0.01, betas=(0.8, 0.99), eps=0.0),
                         weight, grads)
    rule = Adam(alpha=0.01, beta1=0.8, beta2=0.99, epsilon=0.0)
    np.testing.assert_allclose(run_rule(rule, weight, grads), expected, rtol=1e-5, atol=1e-6)


def test_state_slots_are_those_checkpoints_save():
    weight = randn(3, seed=1)
    assert SGD(momentum=0.0).init_state(np, weight) == {}
    assert set(SGD(momentum=0.9).init_state(np, weight)) == {"v"}
    assert set(Adam().init_state(np, weight)) == {"m", "v"}
