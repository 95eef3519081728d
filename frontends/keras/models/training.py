"""The loops behind fit, evaluate and predict, driving FFModel one batch at a time:
`set_tensor` on the inputs and the label, then `train_step()` (training), `eval_step()`
(evaluation, inference mode) or `forward(training=False)` (prediction).

Logs follow Keras: 'loss' and each metric by its name (accuracy as a fraction), means over the
epoch's samples, 'val_' before validation values. Besides the progress line, each epoch (and each
evaluate) prints FlexFlow's `[Metrics] ...` line to stderr, and fit ends with FlexFlow's
`epochs ..., ELAPSED TIME = ...` line.
"""

from __future__ import annotations

import sys

import numpy as np

from flexflow.core import MetricsType
from flexflow.metrics import METRIC_ORDER
from flexflow.scheduler.feeds import DataSet, Rows

from ..callbacks import CallbackList, History, ProgbarLogger
from ..utils.progbar import Progbar
from .data import Arrays, check_arrays, check_batch_size

_SUM_KEYS = dict(METRIC_ORDER)  # MetricsType -> the key of its sum in PerfMetrics


def fit(model, x, y, batch_size, epochs, verbose, callbacks, validation_split, validation_data,
        shuffle, initial_epoch, validation_batch_size, validation_freq) -> History:
    """Train for epochs initial_epoch .. epochs-1 on whole batches, in a new seeded (--seed)
    order each epoch when `shuffle`; validate after every `validation_freq`-th epoch."""
    batch = model.ffconfig.batch_size
    check_batch_size(batch_size, batch, "fit")
    check_batch_size(validation_batch_size, batch, "fit (validation_batch_size)")
    train = check_arrays(model, x, y, "fit")
    train, val = _with_validation(model, train, validation_split, validation_data)
    if int(validation_freq) < 1:
        raise ValueError(f"fit(): validation_freq must be a positive int, got {validation_freq}")
    train, val = _kept(train), _kept(val)
    try:
        return _fit_epochs(model, train, val, epochs, verbose, callbacks, shuffle, initial_epoch,
                           int(validation_freq))
    finally:  # the workers drop their copies of the arrays
        model.ffmodel.compiled.release([a for arrays in (train, val) if arrays is not None
                                        for a in arrays.xs + [arrays.y]])


def _fit_epochs(model, train: Arrays, val: Arrays | None, epochs, verbose, callbacks, shuffle,
                initial_epoch, validation_freq: int) -> History:
    batch = model.ffconfig.batch_size
    keys = model.metrics_names + ([f"val_{k}" for k in model.metrics_names]
                                  if val is not None else [])
    steps = len(train) // batch
    history = History()
    extra = [ProgbarLogger(verbose)] if verbose else []
    callback_list = CallbackList([history] + extra + list(callbacks or []), model, dict(
        epochs=int(epochs), steps=steps, samples=steps * batch, batch_size=batch,
        verbose=verbose, do_validation=val is not None, metrics=keys))
    ffmodel, config = model.ffmodel, model.ffconfig
    rng = np.random.default_rng(config.seed)
    for _ in range(int(initial_epoch) if shuffle else 0):
        rng.permutation(len(train))  # the earlier epochs' orders: a resumed run shuffles alike
    model.stop_training = False
    callback_list.call("on_train_begin", {})
    start, iterations, epochs_run, logs = config.get_current_time(), 0, 0, {}
    for epoch in range(int(initial_epoch), int(epochs)):
        callback_list.call("on_epoch_begin", epoch, {})
        ffmodel.reset_metrics()
        order = rng.permutation(len(train)) if shuffle else None
        iterations += _train_epoch(model, train.batches(batch, order), callback_list)
        metrics_line = ffmodel.get_perf_metrics().line()
        logs = _logs(model, ffmodel.get_perf_metrics().sums)
        if val is not None and (epoch + 1) % validation_freq == 0:
            logs.update({f"val_{k}": v for k, v in
                         _evaluate_arrays(model, val, callbacks=callback_list).items()})
        epochs_run += 1
        requested = callback_list.on_epoch_end(epoch, logs)
        if verbose:
            print(metrics_line, file=sys.stderr, flush=True)
        if requested:
            print(f"Accuracy reaches, now early stop, epoch: {epoch}")
        if requested or model.stop_training:
            break
    elapsed = max((config.get_current_time() - start) * 1e-6, 1e-9)
    if verbose:
        samples = iterations * batch
        print("epochs %d, ELAPSED TIME = %.4fs, interations %d, samples %d, THROUGHPUT = %.2f "
              "samples/s" % (epochs_run, elapsed, iterations, samples, samples / elapsed))
    callback_list.call("on_train_end", logs)
    model.history = history
    return history


def _train_epoch(model, batches, callbacks: CallbackList) -> int:
    """Train on each of `batches` (Arrays) in turn, in windows of iterations when the batch
    hooks may wait for them (`CallbackList.batch_hooks_wait`); returns how many."""
    ffmodel = model.ffmodel
    wait = callbacks.batch_hooks_wait()
    window, steps = [], []

    def each():
        step = steps.pop(0)
        if wait:
            callbacks.call("on_train_batch_begin", step, {})
        logs = _logs(model, ffmodel.get_perf_metrics().last_batch)
        callbacks.call("on_train_batch_end", step,
                       {"batch": step, "size": model.ffconfig.batch_size, **logs})
    done = 0
    for step, arrays in enumerate(batches):
        if not wait:
            callbacks.call("on_train_batch_begin", step, {})
        _feed(model, arrays)
        window.append(ffmodel._fed())
        steps.append(step)
        done += 1
        if len(window) >= (ffmodel.compiled.window_length() if wait else 1):
            ffmodel._train_batches(window, each)
            window = []
    if window:
        ffmodel._train_batches(window, each)
    return done


def _with_validation(model, train: Arrays, split, data) -> tuple[Arrays, Arrays | None]:
    """(training arrays, validation arrays or None): validation_data if given, else the last
    `split` fraction of the samples."""
    batch = model.ffconfig.batch_size
    if data is not None:
        if not isinstance(data, (tuple, list)) or len(data) != 2:
            raise ValueError("fit(): validation_data must be a tuple (x_val, y_val)")
        return train, check_arrays(model, data[0], data[1], "fit (validation_data)")
    if not split:
        return train, None
    if not 0.0 < float(split) < 1.0:
        raise ValueError(f"fit(): validation_split must be in (0, 1), got {split}")
    head, tail = train.split(float(split))
    if len(head) < batch or len(tail) < batch:
        raise ValueError(f"fit(): validation_split={split} leaves {len(head)} training and "
                         f"{len(tail)} validation samples; each needs at least one batch of "
                         f"{batch}")
    return head, tail


def evaluate(model, x, y, batch_size, verbose, callbacks=None) -> dict:
    """Logs over the whole batches of (x, y), calling the callbacks' test hooks."""
    batch = model.ffconfig.batch_size
    check_batch_size(batch_size, batch, "evaluate")
    arrays = check_arrays(model, x, y, "evaluate")
    steps = len(arrays) // batch
    bar = Progbar(steps, batch) if verbose else None
    hooks = CallbackList(list(callbacks or []), model, dict(steps=steps, batch_size=batch,
                                                            verbose=verbose))
    logs = _evaluate_arrays(model, arrays, bar, hooks)
    if verbose:
        bar.finish(logs)
        print(model.ffmodel.get_perf_metrics().line(), file=sys.stderr, flush=True)
    return logs


def _evaluate_arrays(model, arrays: Arrays, bar: Progbar | None = None,
                     callbacks: CallbackList | None = None) -> dict:
    """Logs over the whole batches of `arrays` in inference mode, with Keras's test hooks."""
    ffmodel, size = model.ffmodel, model.ffconfig.batch_size
    hooks = callbacks or CallbackList([], model, {})
    ffmodel.reset_metrics()
    hooks.call("on_test_begin", {})
    for step, batch in enumerate(arrays.batches(size)):
        hooks.call("on_test_batch_begin", step, {})
        _feed(model, batch)
        ffmodel.eval_step()
        batch_logs = _logs(model, ffmodel.get_perf_metrics().last_batch)
        hooks.call("on_test_batch_end", step, {"batch": step, "size": size, **batch_logs})
        if bar is not None:
            bar.update(step + 1, _logs(model, ffmodel.get_perf_metrics().sums))
    logs = _logs(model, ffmodel.get_perf_metrics().sums)
    hooks.call("on_test_end", logs)
    return logs


def predict(model, x, batch_size, exact_batch: bool = False) -> np.ndarray:
    """One output row per sample of x; the last batch is padded and its padding dropped."""
    batch = model.ffconfig.batch_size
    check_batch_size(batch_size, batch, "predict")
    arrays = check_arrays(model, x, None, "predict", need_labels=False)
    if exact_batch and len(arrays) != batch:
        raise ValueError(f"predict_on_batch: x must hold exactly one batch of {batch} samples "
                         f"(-b), got {len(arrays)}")
    ffmodel = model.ffmodel
    out = np.empty((len(arrays),) + model.output.shape_without_batch, np.float32)
    position = 0
    for padded, real in arrays.padded_batches(batch):
        _feed(model, padded)
        ffmodel.forward(training=False)
        out[position:position + real] = model._ff_output.get_tensor(ffmodel)[:real]
        position += real
    return out


def on_batch(model, x, y, train: bool):
    """train_on_batch / test_on_batch: one step on exactly one batch; loss (and metrics)."""
    what = "train_on_batch" if train else "test_on_batch"
    arrays = check_arrays(model, x, y, what)
    batch = model.ffconfig.batch_size
    if len(arrays) != batch:
        raise ValueError(f"{what}: x and y must hold exactly one batch of {batch} samples (-b), "
                         f"got {len(arrays)}")
    ffmodel = model.ffmodel
    ffmodel.reset_metrics()
    _feed(model, arrays)
    if train:
        ffmodel.train_step()
    else:
        ffmodel.eval_step()
    logs = _logs(model, ffmodel.get_perf_metrics().sums)
    values = [logs[name] for name in model.metrics_names]
    return values[0] if len(values) == 1 else values


def _kept(arrays: Arrays | None) -> Arrays | None:
    """The same samples as data sets the devices' side keeps for the length of the fit: each
    batch is then fed as rows of them (a shuffled order's share travels as row numbers)."""
    if arrays is None:
        return None
    return Arrays([DataSet(x) for x in arrays.xs], None if arrays.y is None else DataSet(arrays.y))


def _feed(model, arrays: Arrays) -> None:
    ffmodel = model.ffmodel
    tensors = model._ff_inputs + ([ffmodel.label_tensor] if arrays.y is not None else [])
    for tensor, batch in zip(tensors, arrays.xs + [arrays.y]):
        if isinstance(batch, Rows):  # of arrays check_arrays checked whole
            ffmodel._feed(tensor._id, batch)
        else:
            tensor.set_tensor(ffmodel, batch)


def _logs(model, sums: dict) -> dict:
    """Keras logs from FlexFlow's metric sums (PerfMetrics.sums or .last_batch)."""
    samples = sums.get("samples", 0)
    if not samples:
        return {}
    logs = {"loss": sums["loss"] / samples}
    for metric in model._metrics:
        key = "correct" if metric.type == MetricsType.METRICS_ACCURACY else _SUM_KEYS[metric.type]
        logs[metric.name] = sums[key] / samples
    return logs
