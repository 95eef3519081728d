"""Checkpoints: capture/restore of the training state in memory, and save_checkpoint /
load_checkpoint files. The oracle is the uninterrupted run of the same script: stopping, restoring
into a new model (under any strategy) and going on must give its per-step losses and weights."""

import errno
import io
import json
import os
import stat
import zipfile

import numpy as np
import pytest
from numpy.lib import format as npy_format

from flexflow.checkpoint import capture, restore
from flexflow.core import (ActiMode, AdamOptimizer, CheckpointError, DataType, FFConfig, FFModel,
                           LossType, MetricsType, SGDOptimizer)
from flexflow.scheduler.strategy import ParallelConfig

BATCH, CLASSES, STEPS, STOP = 8, 4, 6, 3
OPTIMIZERS = {"sgd": lambda ff: SGDOptimizer(ff, lr=0.05, momentum=0.9),
              "adam": lambda ff: AdamOptimizer(ff, alpha=0.01)}


def build(optimizer="sgd", argv=(), strategy=None):
    """A small CNN with batch norm (running statistics) and dropout (masks seeded by the step)."""
    ff = FFModel(FFConfig(argv=list(argv), batch_size=BATCH))
    x = ff.create_tensor([BATCH, 2, 4, 4], DataType.DT_FLOAT)
    t = ff.conv2d(x, 4, 3, 3, 1, 1, 1, 1, use_bias=False)  # a bias before batch norm: noise
    t = ff.batch_norm(t)
    t = ff.dropout(t, 0.3)
    t = ff.flat(t)
    t = ff.dense(t, 8, ActiMode.AC_MODE_RELU)
    ff.softmax(ff.dense(t, CLASSES))
    ff.compile(optimizer=OPTIMIZERS[optimizer](ff),
               loss_type=LossType.LOSS_SPARSE_CATEGORICAL_CROSSENTROPY,
               metrics=[MetricsType.METRICS_ACCURACY],
               strategy=None if strategy is None else strategy(ff.graph))
    return ff, x


def data(samples=STEPS * BATCH, seed=0):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((samples, 2, 4, 4)).astype(np.float32),
            rng.integers(0, CLASSES, (samples, 1)).astype(np.int32))


def train(ff, x, steps, first=0):
    """Per-step losses of training on batches first .. first+steps-1."""
    images, labels = data()
    losses = []
    for step in range(first, first + steps):
        x.set_tensor(ff, images[step * BATCH:(step + 1) * BATCH])
        ff.label_tensor.set_tensor(ff, labels[step * BATCH:(step + 1) * BATCH])
        losses.append(ff.train_step())
    return losses


def all_weights(ff):
    return [ff.get_layer_by_id(i).get_parameter_by_id(k).get_weights(ff)
            for i in range(len(ff.graph.layers))
            for k in range(ff.get_layer_by_id(i).get_number_parameters())]


def assert_same_training(run, reference, rtol=0.0):
    np.testing.assert_allclose(run[0], reference[0], rtol=rtol)
    for w, w_ref in zip(run[1], reference[1]):
        np.testing.assert_allclose(w, w_ref, rtol=rtol, atol=1e-7 if rtol else 0)


def uninterrupted(optimizer, argv=(), strategy=None):
    ff, x = build(optimizer, argv, strategy)
    return train(ff, x, STEPS), all_weights(ff)


def split_by_features(graph):
    """Not data parallel: the convolution and the hidden dense layer split by output channels,
    the dropout by height, the rest on one device."""
    configs = {}
    for layer in graph.layers:
        rank = graph.tensors[layer.outputs[0]].spec.ndim
        degrees, devices = (1,) * rank, (layer.index % 2,)
        if layer.type_name in ("Conv2D", "Dense") and layer.index < 5:
            degrees, devices = (1, 2) + (1,) * (rank - 2), (1, 0)
        elif layer.type_name == "Dropout":
            degrees, devices = (1, 1, 2, 1), (0, 1)
        configs[layer.name] = ParallelConfig(degrees, devices)
    return configs


# ---- in memory ----------------------------------------------------------------------------------
@pytest.mark.parametrize("optimizer", sorted(OPTIMIZERS))
def test_restore_into_a_new_model_continues_the_same_training(optimizer):
    reference = uninterrupted(optimizer)
    ff, x = build(optimizer)
    before = train(ff, x, STOP)
    state = capture(ff)
    resumed, x2 = build(optimizer)
    restore(resumed, state)
    after = train(resumed, x2, STEPS - STOP, first=STOP)
    assert_same_training((before + after, all_weights(resumed)), reference)


def test_state_holds_every_weight_the_slots_and_the_counters():
    ff, x = build("adam")
    train(ff, x, 2)
    state = capture(ff)
    layers = ff.graph.layers
    names = {(layers[owner].type_name, layers[owner].weights[k].name)
             for owner, k in state.weights}
    assert ("BatchNorm", "running_mean") in names and ("BatchNorm", "running_var") in names
    trained = {ref for ref in state.weights
               if layers[ref[0]].weights[ref[1]].trainable}
    assert set(state.optimizer) == trained
    assert all(set(slots) == {"m", "v"} for slots in state.optimizer.values())
    assert (state.step, state.updates) == (2, 2)
    assert set(state.strategy) == {layer.name for layer in layers}


def test_restore_replaces_a_trained_models_optimizer_state():
    """A state captured before any update restores a model that has trained since: its
    optimizer slots are cleared, so the run repeats the first one exactly."""
    ff, x = build("sgd")
    initial = capture(ff)
    assert initial.optimizer == {}
    first = train(ff, x, STEPS), all_weights(ff)
    restore(ff, initial)
    again = train(ff, x, STEPS), all_weights(ff)
    assert_same_training(again, first)


def test_two_devices_split_by_features_restored_into_data_parallel():
    argv = ["-ll:gpu", "2", "--in-process"]
    reference = uninterrupted("adam")
    ff, x = build("adam", argv, split_by_features)
    assert ff.strategy != build("adam", argv)[0].strategy
    before = train(ff, x, STOP)
    resumed, x2 = build("adam", argv)
    restore(resumed, capture(ff))
    after = train(resumed, x2, STEPS - STOP, first=STOP)
    assert_same_training((before + after, all_weights(resumed)), reference, rtol=1e-4)


def test_capture_reads_each_device_once_for_the_weights_and_once_for_the_optimizer(
        monkeypatch):
    """The recovery journal captures every few updates: a call per weight and device would
    cost a round trip each on a cluster."""
    ff, x = build("adam", ["-ll:gpu", "2", "--in-process"], split_by_features)
    train(ff, x, 1)
    calls = []
    original = type(ff.compiled.executor)._call

    def counted(executor, device, fn, *args):
        calls.append(device)
        return original(executor, device, fn, *args)
    monkeypatch.setattr(type(ff.compiled.executor), "_call", counted)
    state = capture(ff)
    assert sorted(calls) == [0, 0, 1, 1]
    assert len(state.weights) >= len(state.optimizer) > 2  # (running statistics: no slots)


def test_fit_resumes_at_the_captured_epoch_and_iteration():
    """fit is stopped inside its second epoch; a new model restored from the last state fits on
    with the same `epochs` and trains exactly the batches the first run had left."""
    images, labels = data(samples=3 * BATCH)

    def fit(ff, x, losses, stop_after=None):
        train = ff._train_batches

        def recording(window, each):
            def counted():
                losses.append(ff.get_perf_metrics().last_loss)
                each()
                if len(losses) == stop_after:
                    raise KeyboardInterrupt
            train(window, counted)
        ff._train_batches = recording
        ff.fit(x=ff.create_data_loader(x, images),
               y=ff.create_data_loader(ff.label_tensor, labels), epochs=2)

    reference = []
    fit(*build("sgd"), reference)
    interrupted = []
    ff, x = build("sgd")
    with pytest.raises(KeyboardInterrupt):
        fit(ff, x, interrupted, stop_after=4)
    state = capture(ff)
    assert (state.epoch, state.iteration) == (1, 1)
    resumed, x2 = build("sgd")
    restore(resumed, state)
    fit(resumed, x2, interrupted)
    np.testing.assert_array_equal(interrupted, reference)
    assert len(reference) == 6


def test_capture_and_restore_on_a_cluster_of_worker_processes():
    """The DaskExecutor's stores live in worker processes: a state captured there continues in
    this process, and a state restored there (into a model that trained on) continues too."""
    reference = uninterrupted("adam")
    ff, x = build("adam", ["-ll:gpu", "2"], split_by_features)
    before = train(ff, x, STOP)
    state = capture(ff)
    resumed, x2 = build("adam")
    restore(resumed, state)
    assert_same_training((before + train(resumed, x2, STEPS - STOP, first=STOP),
                          all_weights(resumed)), reference, rtol=1e-4)
    train(ff, x, 2, first=STOP)
    restore(ff, state)
    assert_same_training((before + train(ff, x, STEPS - STOP, first=STOP), all_weights(ff)),
                         reference, rtol=1e-4)


# ---- files --------------------------------------------------------------------------------------
@pytest.mark.parametrize("optimizer", sorted(OPTIMIZERS))
def test_save_stop_load_continue_gives_the_uninterrupted_losses(optimizer, tmp_path):
    reference = uninterrupted(optimizer)
    ff, x = build(optimizer)
    before = train(ff, x, STOP)
    path = ff.save_checkpoint(tmp_path / "run.ckpt")
    assert path == tmp_path / "run.ckpt"
    del ff
    resumed, x2 = build(optimizer)
    resumed.load_checkpoint(path)
    after = train(resumed, x2, STEPS - STOP, first=STOP)
    assert_same_training((before + after, all_weights(resumed)), reference)


def test_file_from_two_devices_split_by_features_loads_into_data_parallel(tmp_path):
    argv = ["-ll:gpu", "2", "--in-process"]
    reference = uninterrupted("sgd")
    ff, x = build("sgd", argv, split_by_features)
    before = train(ff, x, STOP)
    ff.save_checkpoint(tmp_path / "run.ckpt")
    resumed, x2 = build("sgd", argv)
    resumed.load_checkpoint(tmp_path / "run.ckpt")
    assert capture(resumed).strategy == resumed.strategy != ff.strategy
    after = train(resumed, x2, STEPS - STOP, first=STOP)
    assert_same_training((before + after, all_weights(resumed)), reference, rtol=1e-4)


def test_a_scheduled_learning_rate_is_restored(tmp_path):
    def run(ff, x, steps, first=0):
        losses = []
        for step in range(first, first + steps):
            ff.optimizer.set_learning_rate(0.05 / (1 + step))
            losses += train(ff, x, 1, first=step)
        return losses
    reference = run(*build("sgd"), STEPS)
    ff, x = build("sgd")
    before = run(ff, x, STOP)
    ff.save_checkpoint(tmp_path / "run.ckpt")
    resumed, x2 = build("sgd")
    resumed.load_checkpoint(tmp_path / "run.ckpt")
    assert resumed.optimizer.lr == ff.optimizer.lr != build("sgd")[0].optimizer.lr
    np.testing.assert_array_equal(before + run(resumed, x2, STEPS - STOP, first=STOP),
                                  reference)


def test_the_file_is_a_plain_npz_with_json_metadata(tmp_path):
    ff, x = build("adam")
    train(ff, x, 2)
    ff.save_checkpoint(tmp_path / "run.ckpt", epoch=3, iteration=1)
    with np.load(tmp_path / "run.ckpt", allow_pickle=False) as archive:
        meta = json.loads(str(archive["__checkpoint__"]))
        assert (meta["format"], meta["version"]) == ("flexflow.checkpoint", 1)
        assert (meta["step"], meta["updates"], meta["epoch"], meta["iteration"]) == (2, 2, 3, 1)
        assert meta["optimizer"]["type"] == "AdamOptimizer"
        assert meta["optimizer"]["hyperparameters"]["alpha"] == 0.01
        dense = next(e for e in meta["weights"] if e["layer"].startswith("Dense"))
        assert dense["name"] == "kernel" and dense["slots"] == ["m", "v"]
        kernel = archive[f"weights/{dense['layer']}/0"]
        layer = ff.get_layer_by_name(dense["layer"])
        np.testing.assert_array_equal(kernel, layer.get_parameter_by_id(0).get_weights(ff))
        assert archive[f"optimizer/{dense['layer']}/0/m"].shape == kernel.shape
        assert set(meta["strategy"]["layers"]) == set(ff.strategy)


# ---- malformed files ----------------------------------------------------------------------------
@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    """A valid checkpoint of the Adam model (its bytes) and the name of its first dense layer."""
    path = tmp_path_factory.mktemp("ckpt") / "valid.ckpt"
    ff, x = build("adam")
    train(ff, x, 1)
    ff.save_checkpoint(path)
    return path.read_bytes(), next(layer.name for layer in ff.graph.layers
                                   if layer.type_name == "Dense")


def members(data: bytes) -> dict:
    with np.load(io.BytesIO(data), allow_pickle=False) as archive:
        return {name: archive[name] for name in archive.files}


def rewrite(data: bytes, edit) -> bytes:
    """The checkpoint with `edit(metadata dict, arrays dict)` applied."""
    arrays = members(data)
    meta = json.loads(str(arrays.pop("__checkpoint__")))
    edit(meta, arrays)
    out = io.BytesIO()
    np.savez(out, __checkpoint__=np.array(json.dumps(meta)), **arrays)
    return out.getvalue()


def with_member(data: bytes, name: str, header: dict, body: bytes = b"") -> bytes:
    """The checkpoint with member `name` replaced by a .npy of this header and body."""
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(data)) as source, zipfile.ZipFile(out, "w") as target:
        for info in source.infolist():
            if info.filename != f"{name}.npy":
                target.writestr(info, source.read(info))
        npy = io.BytesIO()
        npy_format.write_array_header_1_0(npy, header)
        target.writestr(f"{name}.npy", npy.getvalue() + body)
    return out.getvalue()


def drop_weight(meta, arrays, layer):
    meta["weights"] = [e for e in meta["weights"] if e["layer"] != layer]
    for name in [n for n in arrays if f"/{layer}/" in n]:
        del arrays[name]


def entry(meta, layer, index=0):
    return next(e for e in meta["weights"] if e["layer"] == layer and e["index"] == index)


MALFORMED = {
    "missing layer": (lambda d, dense: rewrite(d, lambda m, a: drop_weight(m, a, dense)),
                      "has no weight 0 of layer '{dense}'"),
    "extra layer": (lambda d, dense: rewrite(d, lambda m, a: (
        m["weights"].append(dict(entry(m, dense), layer="Ghost_999", slots=[])),
        a.update({"weights/Ghost_999/0": a[f"weights/{dense}/0"]}))),
        "weight 0 of layer 'Ghost_999', which the model does not have"),
    "shape in metadata": (lambda d, dense: rewrite(d, lambda m, a: entry(m, dense).update(
        shape=[3, 3])), "weight 0 of layer '{dense}' (kernel) has shape [3, 3]"),
    "shape of the array": (lambda d, dense: rewrite(d, lambda m, a: a.update(
        {f"weights/{dense}/0": a[f"weights/{dense}/0"][:, :1]})),
        "weight 0 (kernel) of layer '{dense}' (entry 'weights/{dense}/0') is float32 of shape"),
    "dtype in metadata": (lambda d, dense: rewrite(d, lambda m, a: entry(m, dense).update(
        dtype="float64")), "has dtype 'float64', the model's is 'float32'"),
    "dtype of the array": (lambda d, dense: rewrite(d, lambda m, a: a.update(
        {f"optimizer/{dense}/0/m": a[f"optimizer/{dense}/0/m"].astype(np.float64)})),
        "optimizer slot 'm' of weight 0 (kernel) of layer '{dense}'"),
    "format version": (lambda d, dense: rewrite(d, lambda m, a: m.update(version=2)),
                       "checkpoint format version 2"),
    "negative counter": (lambda d, dense: rewrite(d, lambda m, a: m.update(updates=-1)),
                         '"updates" must be a non-negative integer'),
    "hyper-parameter of 400 digits": (lambda d, dense: rewrite(d, lambda m, a: m["optimizer"][
        "hyperparameters"].update(alpha=10 ** 400)), "optimizer hyper-parameter 'alpha' is"),
    "negative learning rate": (lambda d, dense: rewrite(d, lambda m, a: m["optimizer"][
        "hyperparameters"].update(alpha=-0.01)), "learning rate must be a finite number >= 0"),
    "slots": (lambda d, dense: rewrite(d, lambda m, a: entry(m, dense).update(slots=["v"])),
              "has optimizer slots ['v'], the optimizer keeps ['m', 'v']"),
    "member not described": (lambda d, dense: rewrite(d, lambda m, a: a.update(
        stray=np.zeros(2))), "entry 'stray' is not described"),
    "member missing": (lambda d, dense: rewrite(d, lambda m, a: a.pop(
        f"optimizer/{dense}/0/v")), "no entry 'optimizer/{dense}/0/v'"),
    "no metadata": (lambda d, dense: with_member(d, "__checkpoint__", {
        "descr": "<f4", "fortran_order": False, "shape": (0,)}), "should be text"),
    "metadata not json": (lambda d, dense: with_member(d, "__checkpoint__", {
        "descr": "<U5", "fortran_order": False, "shape": ()}, "{oops".encode("utf-32-le")),
        "is not valid JSON"),
    "oversized metadata": (lambda d, dense: with_member(d, "__checkpoint__", {
        "descr": "<U1000", "fortran_order": False, "shape": (10 ** 7,)}),
        "entry '__checkpoint__' declares"),
    "oversized array": (lambda d, dense: with_member(d, f"weights/{dense}/0", {
        "descr": "<f4", "fortran_order": False, "shape": (1 << 40,)}),
        "float32 of shape (1099511627776,)"),
    "object array": (lambda d, dense: with_member(d, f"weights/{dense}/0", {
        "descr": "|O", "fortran_order": False, "shape": (2,)}), "is object of shape (2,)"),
    "truncated": (lambda d, dense: d[:len(d) // 2], "not a readable zip"),
    "corrupt data": (lambda d, dense: d[:200] + bytes([d[200] ^ 0xFF]) + d[201:],
                     "is damaged"),
    "not a zip": (lambda d, dense: b"step 3\n", "not a readable zip"),
}


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_malformed_checkpoints_are_refused_naming_the_problem(case, saved, tmp_path):
    data, dense = saved
    make, message = MALFORMED[case]
    path = tmp_path / "bad.ckpt"
    path.write_bytes(make(data, dense))
    ff, _ = build("adam")
    before = all_weights(ff)
    with pytest.raises(CheckpointError) as error:
        ff.load_checkpoint(path)
    assert str(path) in str(error.value) and message.format(dense=dense) in str(error.value)
    for w, w_before in zip(all_weights(ff), before):
        np.testing.assert_array_equal(w, w_before)


def test_missing_file_and_other_optimizer_are_refused(saved, tmp_path):
    ff, _ = build("sgd")
    with pytest.raises(CheckpointError, match="no such file"):
        ff.load_checkpoint(tmp_path / "absent.ckpt")
    (tmp_path / "adam.ckpt").write_bytes(saved[0])
    with pytest.raises(CheckpointError, match="saved with AdamOptimizer, the model trains with "
                                              "SGDOptimizer"):
        ff.load_checkpoint(tmp_path / "adam.ckpt")
    assert issubclass(CheckpointError, ValueError)


def test_save_syncs_the_file_before_the_rename_and_the_folder_after(tmp_path, monkeypatch):
    events = []
    fsync, replace = os.fsync, os.replace

    def recorded_fsync(descriptor):
        events.append("fsync folder" if stat.S_ISDIR(os.fstat(descriptor).st_mode)
                      else "fsync file")
        fsync(descriptor)

    def recorded_replace(source, target):
        events.append("rename")
        replace(source, target)
    monkeypatch.setattr(os, "fsync", recorded_fsync)
    monkeypatch.setattr(os, "replace", recorded_replace)
    ff, _ = build("sgd")
    ff.save_checkpoint(tmp_path / "run.ckpt")
    assert events == ["fsync file", "rename", "fsync folder"]


@pytest.mark.parametrize("stale", ["truncated archive", "link to another file"])
def test_a_stale_partial_file_is_replaced_by_the_next_save(stale, tmp_path):
    """What an interrupted save left at `<path>.partial` is neither read nor written through."""
    path, partial = tmp_path / "run.ckpt", tmp_path / "run.ckpt.partial"
    other = tmp_path / "other.txt"
    other.write_text("not to be touched")
    if stale == "truncated archive":
        partial.write_bytes(b"PK\x03\x04 cut short")
    else:
        partial.symlink_to(other)
    ff, x = build("sgd")
    train(ff, x, 1)
    ff.save_checkpoint(path)
    assert not partial.exists() and not partial.is_symlink() and not path.is_symlink()
    assert other.read_text() == "not to be touched"
    again, _ = build("sgd")
    again.load_checkpoint(path)
    for w, saved_w in zip(all_weights(again), all_weights(ff)):
        np.testing.assert_array_equal(w, saved_w)


FAILURES = {"disk full": OSError(errno.ENOSPC, "No space left on device"),
            "I/O error at the sync": OSError(errno.EIO, "Input/output error"),
            "interrupted": KeyboardInterrupt()}


@pytest.mark.parametrize("failure", sorted(FAILURES))
def test_a_failed_save_leaves_the_old_checkpoint_and_no_partial_file(failure, tmp_path,
                                                                      monkeypatch):
    """The write fails part way (the disk fills, the sync fails, ^C): the error reaches the
    caller, `<path>.partial` is gone, and the checkpoint already at `path` is as it was."""
    path, partial = tmp_path / "run.ckpt", tmp_path / "run.ckpt.partial"
    ff, x = build("sgd")
    ff.save_checkpoint(path)
    old = path.read_bytes()
    train(ff, x, 1)  # a state that differs from the saved one
    error = FAILURES[failure]

    def fail(*args, **keywords):
        raise error

    def savez_part_way(f, **arrays):
        f.write(old[:len(old) // 2])
        fail()
    if failure == "I/O error at the sync":
        monkeypatch.setattr(os, "fsync", fail)
    else:
        monkeypatch.setattr(np, "savez", savez_part_way)
    with pytest.raises(type(error)) as raised:
        ff.save_checkpoint(path)
    assert raised.value is error
    assert not partial.exists()
    assert path.read_bytes() == old
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run.ckpt"]


def mutate(sequence: list, rng, tokens) -> list:
    """1 to 3 random replacements, insertions or deletions of items of `tokens`."""
    sequence = list(sequence)
    for _ in range(rng.integers(1, 4)):
        at, kind = int(rng.integers(len(sequence))), rng.integers(3)
        token = tokens[rng.integers(len(tokens))]
        if kind == 0:
            sequence[at] = token
        elif kind == 1:
            sequence.insert(at, token)
        else:
            del sequence[at:at + int(rng.integers(1, 16))]
    return sequence


JSON_TOKENS = list('{}[]",:0123456789-.e ') + ["null", "true", "1e400", "[]", "{}", "NaN"]


def test_mutated_files_load_or_raise_checkpoint_error(saved, tmp_path):
    """Mutated bytes of the file, and mutated text of its metadata: each loads cleanly or
    raises a CheckpointError (never another exception)."""
    data = saved[0]
    arrays = members(data)
    metadata = str(arrays.pop("__checkpoint__"))
    rng = np.random.default_rng(0)
    ff, _ = build("adam")
    outcomes = set()
    for trial in range(300):
        if trial % 2:
            mutated = bytes(mutate(data, rng, range(256)))
        else:
            out = io.BytesIO()
            text = "".join(mutate(metadata, rng, JSON_TOKENS))
            np.savez(out, __checkpoint__=np.array(text), **arrays)
            mutated = out.getvalue()
        path = tmp_path / f"m{trial}.ckpt"
        path.write_bytes(mutated)
        try:
            ff.load_checkpoint(path)
            outcomes.add("loaded")
        except CheckpointError:
            outcomes.add("refused")
    assert outcomes == {"loaded", "refused"}
