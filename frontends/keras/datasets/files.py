"""Where data set files are looked for, how they are checked, and when they are downloaded.

Search order: the folder named by `FLEXFLOW_DATA_DIR`, `$KERAS_HOME/datasets` (default
`~/.keras/datasets`), `/tmp/.keras/datasets` (Keras's cache layout, so files Keras already
downloaded are found).

Files with a published checksum (`CHECKSUMS`) are verified (md5) each time they are read; set
`FLEXFLOW_DATA_VERIFY=0` to accept a file that differs on purpose (a subset, a re-packed copy).
A missing file is downloaded into `$KERAS_HOME/datasets` (or `/tmp/.keras/datasets`) when it
has a known origin and the network answers; otherwise `DatasetNotFound` says which file to put
where.
"""

from __future__ import annotations

import os
from pathlib import Path

from ..utils.data_utils import DownloadError, cache_root, download, hash_file

CHECKSUMS = {  # md5 of the published files
    "mnist.npz": "8a61469f7ea1b51cbae51d4f78837e45",
    "train-images-idx3-ubyte.gz": "f68b3c2dcbeaaa9fbdd348bbdeb94873",
    "train-labels-idx1-ubyte.gz": "d53e105ee54ea40749a09fcbcd1e9432",
    "t10k-images-idx3-ubyte.gz": "9fb629c4189551a2d022fa330f9573f3",
    "t10k-labels-idx1-ubyte.gz": "ec29112dd5afa0611ce80d1b7f02629c",
    "train-images-idx3-ubyte": "6bbc9ace898e44ae57da46a324031adb",
    "train-labels-idx1-ubyte": "a25bea736e30d166cdddb491f175f624",
    "t10k-images-idx3-ubyte": "2646ac647ad5339dbf082846283269ea",
    "t10k-labels-idx1-ubyte": "27ae3e4e09519cfbb04c329615203637",
    "cifar-10-python.tar.gz": "c58f30108f718f92721af3b95e74349a",
    "data_batch_1": "c99cafc152244af753f735de768cd75f",
    "data_batch_2": "d4bba439e000b95fd0a9bffe97cbabec",
    "data_batch_3": "54ebc095f3ab1f0389bbae665268c751",
    "data_batch_4": "634d18415352ddfa80567beed471001a",
    "data_batch_5": "482c414d41f54cd18b22e5b47cb7c3cb",
    "test_batch": "40351d587109b95175f43aff81a1287e",
    "reuters.npz": "87aedbeb0cb229e378797a632c1997b6",
    "reuters_word_index.json": "4d44cc38712099c9e383dc6e5f11a921",
}


def search_dirs() -> list[Path]:
    dirs = []
    if os.environ.get("FLEXFLOW_DATA_DIR"):
        dirs.append(Path(os.environ["FLEXFLOW_DATA_DIR"]))
    keras_home = os.environ.get("KERAS_HOME", str(Path.home() / ".keras"))
    dirs += [Path(keras_home) / "datasets", Path("/tmp/.keras/datasets")]
    return dirs


def find(*names: str) -> Path | None:
    """The first existing file among `names` in the search folders."""
    for folder in search_dirs():
        for name in names:
            if (folder / name).is_file():
                return folder / name
    return None


def find_dir(name: str) -> Path | None:
    """The first folder called `name` in the search folders."""
    for folder in search_dirs():
        if (folder / name).is_dir():
            return folder / name
    return None


class DatasetError(ValueError):
    """A data set file that is malformed, too large for its bounds or hostile (pickled code, a
    zip bomb); the message names the file. The readers raise nothing else for a file's
    content."""


class DatasetNotFound(FileNotFoundError):
    def __init__(self, dataset: str, names: list[str], reason: str = ""):
        folders = ", ".join(str(d) for d in search_dirs())
        note = f" ({reason})" if reason else ""
        super().__init__(f"{dataset}: none of {names} was found in {folders}{note}. Put the "
                         f"file(s) in one of these folders, or set FLEXFLOW_DATA_DIR to the "
                         f"folder that holds them.")


class ChecksumError(ValueError):
    """A data file differs from the published one."""


def verify(path: Path, name: str | None = None) -> Path:
    """`path`, after checking its md5 against the published file `name` (default: its own
    name) when one is known."""
    name = name or path.name
    expected = CHECKSUMS.get(name)
    if expected is None or os.environ.get("FLEXFLOW_DATA_VERIFY", "1") == "0":
        return path
    actual = hash_file(path)
    if actual != expected:
        raise ChecksumError(f"{path}: md5 {actual} differs from the published {name} "
                            f"({expected}); the file is damaged or another version. Replace "
                            f"it, or set FLEXFLOW_DATA_VERIFY=0 to use it anyway.")
    return path


def locate(dataset: str, name: str, origin: str | None, alternatives: list[str] = ()) -> Path:
    """The verified file `name` from the search folders, downloaded from `origin` if missing
    and the network answers. `alternatives` are listed in the error message (other forms the
    caller could have used)."""
    path = find(name)
    if path is not None:
        return verify(path)
    reason = ""
    if origin is not None:
        try:
            return download(origin, cache_root() / "datasets" / name, CHECKSUMS.get(name))
        except DownloadError as error:
            reason = str(error)
    raise DatasetNotFound(dataset, [name, *alternatives], reason)
