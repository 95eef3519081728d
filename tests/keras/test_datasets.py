"""Data set loaders on small files written here in the real formats: MNIST as mnist.npz and as IDX
files, CIFAR-10 as the python tarball and its extracted folder (pickled batches, including a
batch laid out byte for byte as Python 2's cPickle writes it), Reuters as reuters.npz with object
arrays. Also: checksums, the missing-file message, and that pickled code is refused."""

import gzip
import hashlib
import io
import pickle
import struct
import tarfile
import zipfile
from pathlib import Path

import numpy as np
import pytest

from flexflow.keras.datasets import cifar10, files, mnist, reuters, safe_pickle
from flexflow.keras.datasets.cifar import load_batch

ARCHIVE_DIR = "cifar-10-batches-py"


@pytest.fixture
def data_dir(tmp_path, monkeypatch):
    """An empty data folder searched first; the Keras cache is an empty folder too."""
    folder = tmp_path / "data"
    folder.mkdir()
    monkeypatch.setenv("FLEXFLOW_DATA_DIR", str(folder))
    monkeypatch.setenv("KERAS_HOME", str(tmp_path / "keras_home"))
    monkeypatch.setenv("FLEXFLOW_DATA_VERIFY", "0")  # small files differ from the published ones
    return folder


def mnist_arrays(rng):
    return {"x_train": rng.integers(0, 256, (6, 28, 28), dtype=np.uint8),
            "y_train": rng.integers(0, 10, 6, dtype=np.uint8),
            "x_test": rng.integers(0, 256, (4, 28, 28), dtype=np.uint8),
            "y_test": rng.integers(0, 10, 4, dtype=np.uint8)}


def idx_bytes(array: np.ndarray) -> bytes:
    """The IDX format: 0, 0, 0x08 (unsigned byte), ndim, big-endian dims, then the data."""
    header = bytes([0, 0, 0x08, array.ndim]) + b"".join(struct.pack(">I", d)
                                                        for d in array.shape)
    return header + array.tobytes()


def test_search_order(monkeypatch, tmp_path):
    monkeypatch.setenv("FLEXFLOW_DATA_DIR", str(tmp_path / "a"))
    monkeypatch.setenv("KERAS_HOME", str(tmp_path / "k"))
    assert files.search_dirs() == [tmp_path / "a", tmp_path / "k" / "datasets",
                                   Path("/tmp/.keras/datasets")]


def test_mnist_npz(data_dir):
    arrays = mnist_arrays(np.random.default_rng(0))
    np.savez(data_dir / "mnist.npz", **arrays)
    (x_train, y_train), (x_test, y_test) = mnist.load_data()
    for got, key in zip((x_train, y_train, x_test, y_test), mnist.NPZ_KEYS):
        np.testing.assert_array_equal(got, arrays[key])
        assert got.dtype == np.uint8


@pytest.mark.parametrize("compressed", [True, False])
def test_mnist_idx_files(data_dir, compressed):
    arrays = mnist_arrays(np.random.default_rng(1))
    for name, key in zip(mnist.IDX_FILES, mnist.NPZ_KEYS):
        if compressed:
            (data_dir / (name + ".gz")).write_bytes(gzip.compress(idx_bytes(arrays[key])))
        else:
            (data_dir / name).write_bytes(idx_bytes(arrays[key]))
    (x_train, y_train), (x_test, y_test) = mnist.load_data()
    for got, key in zip((x_train, y_train, x_test, y_test), mnist.NPZ_KEYS):
        np.testing.assert_array_equal(got, arrays[key])


def test_checksums_are_verified(data_dir, monkeypatch):
    np.savez(data_dir / "mnist.npz", **mnist_arrays(np.random.default_rng(0)))
    monkeypatch.setenv("FLEXFLOW_DATA_VERIFY", "1")
    with pytest.raises(files.ChecksumError, match="mnist.npz: md5 [0-9a-f]{32} differs from the "
                                                  "published mnist.npz \\(8a61469f7ea1b51cbae5"
                                                  "1d4f78837e45\\).*FLEXFLOW_DATA_VERIFY=0"):
        mnist.load_data()
    good = hashlib.md5((data_dir / "mnist.npz").read_bytes()).hexdigest()
    monkeypatch.setitem(files.CHECKSUMS, "mnist.npz", good)
    assert mnist.load_data()[0][0].shape == (6, 28, 28)


def test_missing_file_says_which_file_to_put_where(data_dir, monkeypatch):
    monkeypatch.setattr(files, "search_dirs", lambda: [data_dir])
    monkeypatch.setattr(mnist, "ORIGIN", "http://127.0.0.1:9/mnist.npz")  # nothing listens
    with pytest.raises(files.DatasetNotFound) as error:
        mnist.load_data()
    message = str(error.value)
    assert message.startswith(f"mnist: none of ['mnist.npz', 'train-images-idx3-ubyte[.gz]', "
                              f"'train-labels-idx1-ubyte[.gz]', 't10k-images-idx3-ubyte[.gz]', "
                              f"'t10k-labels-idx1-ubyte[.gz]'] was found in {data_dir} "
                              f"(downloading http://127.0.0.1:9/mnist.npz failed: ")
    assert message.endswith("Put the file(s) in one of these folders, or set FLEXFLOW_DATA_DIR "
                            "to the folder that holds them.")
    monkeypatch.setattr(cifar10, "ORIGIN", "http://127.0.0.1:9/cifar-10-python.tar.gz")
    with pytest.raises(files.DatasetNotFound, match=r"cifar10: none of \['cifar-10-python."
                                                    r"tar.gz', 'cifar-10-batches-py/'\]"):
        cifar10.load_data(10)


# ---- CIFAR-10 --------------------------------------------------------------------------------
def cifar_batches(rng, per_batch=4):
    """{file name: (images (n, 3072) uint8, labels)} for the five training batches and the
    test batch."""
    names = [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"]
    return {name: (rng.integers(0, 256, (per_batch, 3072), dtype=np.uint8),
                   [int(v) for v in rng.integers(0, 10, per_batch)]) for name in names}


def python3_pickle(images, labels, protocol):
    return pickle.dumps({b"batch_label": b"a batch", b"labels": labels, b"data": images,
                         b"filenames": [b"x.png"] * len(labels)}, protocol=protocol)


def python2_pickle(images, labels) -> bytes:
    """A batch as Python 2's cPickle (protocol 2) writes it: str (BINSTRING) keys and data,
    the array through numpy.core.multiarray._reconstruct."""
    def string(b: bytes) -> bytes:
        return (b"U" + bytes([len(b)]) if len(b) < 256 else b"T" + struct.pack("<I", len(b))) + b

    def integer(v: int) -> bytes:
        return b"J" + struct.pack("<i", v)

    dtype = (b"cnumpy\ndtype\n" + string(b"u1") + b"\x89\x88\x87R(" + integer(3) + string(b"|")
             + b"NNN" + integer(-1) + integer(-1) + integer(0) + b"tb")
    array = (b"cnumpy.core.multiarray\n_reconstruct\ncnumpy\nndarray\n" + integer(0) + b"\x85"
             + string(b"b") + b"\x87R(" + integer(1) + integer(images.shape[0])
             + integer(images.shape[1]) + b"\x86" + dtype + b"\x89" + string(images.tobytes())
             + b"tb")
    label_list = b"](" + b"".join(integer(v) for v in labels) + b"e"
    return (b"\x80\x02}(" + string(b"batch_label") + string(b"a batch") + string(b"labels")
            + label_list + string(b"data") + array + b"u.")


@pytest.mark.parametrize("writer", ["python2", "python3 protocol 2", "python3 protocol 5"])
def test_cifar_batch_formats(writer):
    rng = np.random.default_rng(2)
    images, labels = rng.integers(0, 256, (3, 3072), dtype=np.uint8), [1, 7, 3]
    data = (python2_pickle(images, labels) if writer == "python2"
            else python3_pickle(images, labels, int(writer[-1])))
    if writer == "python2":  # the crafted bytes are what pickle itself reads as the batch
        reference = pickle.loads(data, encoding="bytes")
        np.testing.assert_array_equal(reference[b"data"], images)
    got_images, got_labels = load_batch(data)
    np.testing.assert_array_equal(got_images, images.reshape(3, 3, 32, 32))
    assert got_labels == labels


def write_cifar_tarball(path, batches):
    with tarfile.open(path, "w:gz") as tar:
        for name, (images, labels) in batches.items():
            blob = python3_pickle(images, labels, protocol=2)
            info = tarfile.TarInfo(f"{ARCHIVE_DIR}/{name}")
            info.size = len(blob)
            tar.addfile(info, io.BytesIO(blob))


@pytest.mark.parametrize("layout", ["tarball", "folder"])
def test_cifar10_load_data(data_dir, layout):
    batches = cifar_batches(np.random.default_rng(3))
    if layout == "tarball":
        write_cifar_tarball(data_dir / "cifar-10-python.tar.gz", batches)
    else:
        (data_dir / ARCHIVE_DIR).mkdir()
        for name, (images, labels) in batches.items():
            (data_dir / ARCHIVE_DIR / name).write_bytes(python2_pickle(images, labels))
    (x_train, y_train), (x_test, y_test) = cifar10.load_data(10)  # 2.5 batches of 4
    train_images = np.concatenate([batches[f"data_batch_{i}"][0] for i in (1, 2, 3)])[:10]
    train_labels = sum((batches[f"data_batch_{i}"][1] for i in (1, 2, 3)), [])[:10]
    np.testing.assert_array_equal(x_train, train_images.reshape(10, 3, 32, 32))
    np.testing.assert_array_equal(y_train[:, 0], train_labels)
    np.testing.assert_array_equal(x_test, batches["test_batch"][0].reshape(4, 3, 32, 32))
    np.testing.assert_array_equal(y_test[:, 0], batches["test_batch"][1])
    assert (x_train.dtype, y_train.dtype, y_train.shape) == (np.uint8, np.uint8, (10, 1))
    assert (x_test.dtype, y_test.dtype, y_test.shape) == (np.uint8, np.int64, (4, 1))
    with pytest.raises(ValueError, match="num_samples=21, but the training batches hold 20"):
        cifar10.load_data(21)


class Payload:
    """Pickles as a call that creates a file: what a malicious data file could do."""

    def __init__(self, path):
        self.path = path

    def __reduce__(self):
        return (Path.touch, (self.path,))


def test_pickled_code_is_refused(tmp_path):
    target = tmp_path / "created"
    data = pickle.dumps({b"data": Payload(target), b"labels": []}, protocol=2)
    with pytest.raises(pickle.UnpicklingError, match="refusing to load "):
        load_batch(data)
    assert not target.exists()
    with pytest.raises(pickle.UnpicklingError, match="refusing to load builtins.eval"):
        safe_pickle.load(pickle.dumps((eval, ("1 + 1",))))


# ---- Reuters ---------------------------------------------------------------------------------
def write_reuters(path, sequences, labels):
    x = np.empty(len(sequences), dtype=object)
    for i, s in enumerate(sequences):
        x[i] = list(s)
    np.savez(path, x=x, y=np.array(labels, np.int64))


def test_reuters_npz_with_object_arrays(data_dir):
    rng = np.random.default_rng(4)
    sequences = [list(rng.integers(1, 30, rng.integers(2, 9))) for _ in range(20)]
    sequences = [[int(w) for w in s] for s in sequences]
    labels = [int(v) for v in rng.integers(0, 46, 20)]
    write_reuters(data_dir / "reuters.npz", sequences, labels)
    with pytest.raises(ValueError, match="Object arrays cannot be loaded"):  # needs pickle
        np.load(data_dir / "reuters.npz", allow_pickle=False)["x"]

    (x_train, y_train), (x_test, y_test) = reuters.load_data()
    assert (len(x_train), len(x_test)) == (16, 4)
    assert x_train.dtype == object and y_train.dtype == np.int64
    originals = {(tuple(s), label) for s, label in zip(sequences, labels)}
    max_id = max(max(s) for s in sequences) + 3
    loaded = set()
    for x, label in zip(list(x_train) + list(x_test), list(y_train) + list(y_test)):
        assert x[0] == 1  # start_char
        # ids shifted by index_from=3; the largest id is >= num_words (= max id): OOV 2
        loaded.add((tuple(2 if w == 2 else w - 3 for w in x[1:]), int(label)))
    expected = {(tuple(2 if w + 3 >= max_id else w for w in s), label)
                for s, label in originals}
    assert loaded == expected
    (again, _), _ = reuters.load_data()
    assert [list(s) for s in again] == [list(s) for s in x_train]  # seeded shuffle

    (x_small, _), _ = reuters.load_data(num_words=10, skip_top=5, test_split=0.5)
    assert all(w == 2 or 5 <= w < 10 for s in x_small for w in s[1:])
    (x_short, _), (x_short_test, _) = reuters.load_data(maxlen=6, start_char=None,
                                                        oov_char=None, index_from=0)
    assert all(len(s) < 6 for s in list(x_short) + list(x_short_test))


# ---- malformed and oversized files -------------------------------------------------------------
MALFORMED_PICKLES = {
    "truncated": pickle.dumps({b"data": [1, 2, 3]}, protocol=2)[:-5],
    "stand-in called wrongly": b"\x80\x02cnumpy\ndtype\n)R.",  # numpy.dtype() without spec
    "nested past the stack": b"\x80\x02" + b"(" * 100_000 + b"]" + b"l" * 100_000 + b".",
    "unhashable key": b"\x80\x02}(]K\x01u.",  # {[]: 1}
    "not an opcode": b"\x80\x02\xff.",
}


@pytest.mark.parametrize("case", list(MALFORMED_PICKLES))
def test_malformed_pickles_raise_the_dataset_error_naming_the_file(case, tmp_path):
    path = tmp_path / "data_batch_1"
    path.write_bytes(MALFORMED_PICKLES[case])
    with pytest.raises(files.DatasetError, match=f"^{path}: "):
        load_batch(path)


def test_a_tarball_batch_larger_than_a_batch_can_be_is_refused(data_dir, monkeypatch):
    batches = cifar_batches(np.random.default_rng(3))
    write_cifar_tarball(data_dir / "cifar-10-python.tar.gz", batches)
    monkeypatch.setattr(cifar10, "MAX_BATCH_BYTES", 1000)  # the batches here hold 12 kB
    with pytest.raises(files.DatasetError, match="data_batch_1 declares .* more than the 1000"):
        cifar10.load_data(10)


def test_archive_members_compressed_other_than_deflate_are_refused(data_dir):
    with zipfile.ZipFile(data_dir / "mnist.npz", "w", zipfile.ZIP_BZIP2) as archive:
        for key, array in mnist_arrays(np.random.default_rng(0)).items():
            buffer = io.BytesIO()
            np.save(buffer, array)
            archive.writestr(f"{key}.npy", buffer.getvalue())
    with pytest.raises(files.DatasetError, match="mnist.npz: entry .* other than deflate"):
        mnist.load_data()


def test_damaged_compressed_files_raise_the_dataset_error(data_dir):
    batches = cifar_batches(np.random.default_rng(3))
    write_cifar_tarball(data_dir / "cifar-10-python.tar.gz", batches)
    tarball = (data_dir / "cifar-10-python.tar.gz").read_bytes()
    (data_dir / "cifar-10-python.tar.gz").write_bytes(tarball[:len(tarball) // 2])
    with pytest.raises(files.DatasetError, match="cifar-10-python.tar.gz: not a readable"):
        cifar10.load_data(10)
    arrays = mnist_arrays(np.random.default_rng(0))
    for name, key in zip(mnist.IDX_FILES, mnist.NPZ_KEYS):
        (data_dir / f"{name}.gz").write_bytes(gzip.compress(idx_bytes(arrays[key]))[:40])
    with pytest.raises(files.DatasetError, match="idx.-ubyte.gz: unreadable"):
        mnist.load_data()
