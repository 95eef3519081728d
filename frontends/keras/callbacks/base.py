"""Callback hooks and the list fit calls them through.

Hooks get `logs` as in Keras: per batch, the batch's own values ('loss', the metrics, 'size');
per epoch, the epoch's means plus 'val_*' values when validating. A callback stops training after
the current epoch by returning True from `on_epoch_end` (FlexFlow) or by setting
`self.model.stop_training = True` (Keras).
"""

from __future__ import annotations


class Callback:
    # Whether its batch hooks, where it has them, read their logs only (not the model): fit may
    # then call them once the window of iterations that holds the batch has run
    batch_logs_only = False

    def __init__(self):
        self.validation_data = None
        self.model = None
        self.params: dict = {}

    def set_model(self, model) -> None:
        self.model = model

    def set_params(self, params: dict) -> None:
        self.params = params

    def on_epoch_begin(self, epoch, logs=None):
        pass

    def on_epoch_end(self, epoch, logs=None):
        pass

    def on_batch_begin(self, batch, logs=None):
        pass

    def on_batch_end(self, batch, logs=None):
        pass

    # Keras's names for the training batch hooks (on_batch_* are their older names)
    def on_train_batch_begin(self, batch, logs=None):
        self.on_batch_begin(batch, logs)

    def on_train_batch_end(self, batch, logs=None):
        self.on_batch_end(batch, logs)

    def on_test_begin(self, logs=None):
        pass

    def on_test_end(self, logs=None):
        pass

    def on_test_batch_begin(self, batch, logs=None):
        pass

    def on_test_batch_end(self, batch, logs=None):
        pass

    def on_train_begin(self, logs=None):
        pass

    def on_train_end(self, logs=None):
        pass


class CallbackList:
    def __init__(self, callbacks, model, params: dict):
        self.callbacks = list(callbacks)
        self.model = model
        for callback in self.callbacks:
            if not isinstance(callback, Callback):
                raise TypeError(f"callbacks must be flexflow.keras.callbacks.Callback instances, "
                                f"got {callback!r}")
            callback.set_model(model)
            callback.set_params(params)

    def call(self, hook: str, *args) -> list:
        """Every callback's `hook` (a Callback method name) with `args`; their results."""
        return [getattr(callback, hook)(*args) for callback in self.callbacks]

    def on_epoch_end(self, epoch: int, logs: dict) -> bool:
        """Whether a callback asked to stop (every callback still sees the epoch's end)."""
        return any(result is True for result in self.call("on_epoch_end", epoch, logs))

    def batch_hooks_wait(self) -> bool:
        """Whether the batch hooks may wait for the window of iterations that holds the batch:
        no callback has them, or those that do read their logs only."""
        hooks = ("on_batch_begin", "on_batch_end", "on_train_batch_begin", "on_train_batch_end")
        return all(callback.batch_logs_only or all(
            getattr(type(callback), hook) is getattr(Callback, hook) for hook in hooks)
            for callback in self.callbacks)
