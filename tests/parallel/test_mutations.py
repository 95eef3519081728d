"""The training check can fail: each mutation below breaks the optimizer's step on purpose, and
the single-device run the strategy tests compare against must then fail its check. A check that
passed a run that did not train would let every strategy test pass on a framework that trains
nothing, since all its runs would agree."""

from typing import Callable, NamedTuple

import pytest

from flexflow.ops import optimizers
from flexflow.scheduler import actions

from .test_strategy_invariance import reference, trained_reference


def skipped(_original):
    return lambda self, store, ctx, out: None


def ascending(update):
    def broken(self, xp, weight, grad, state, step, skip=None):
        return update(self, xp, weight, -grad, state, step, skip)
    return broken


class Mutation(NamedTuple):
    owner: object       # what holds the code
    attribute: str
    breaking: Callable  # original -> broken
    model: str          # the model whose run must fail the check
    failure: str        # what the check's assertion says


MUTATIONS = {
    # embedding_bag's loss on fresh batches happens to fall without training: the weights show it
    "optimizer update skipped": Mutation(actions.Update, "run", skipped, "embedding_bag",
                                         "did not move"),
    "gradient ascended": Mutation(optimizers.SGD, "update", ascending, "mlp",
                                  "the loss did not fall"),
}


@pytest.mark.parametrize("name", list(MUTATIONS))
def test_a_run_that_does_not_train_fails_the_check(monkeypatch, name):
    mutation = MUTATIONS[name]
    reference(mutation.model)  # the check passes on the real code
    monkeypatch.setattr(mutation.owner, mutation.attribute,
                        mutation.breaking(getattr(mutation.owner, mutation.attribute)))
    with pytest.raises(AssertionError, match=mutation.failure):
        trained_reference(mutation.model)
