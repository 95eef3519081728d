""".npz archives of named arrays, the container of weights files and checkpoints.

An archive is NumPy's `.npz`: a zip holding one `.npy` file per array. Writing goes to a
`.partial` file that then replaces the target, so an interrupted save never leaves a truncated
file where a good one was. Reading never unpickles and never trusts a declared size: each
member's `.npy` header is read first and must declare exactly the shape and dtype the caller
expects (or, for text, at most a given length) before its data is allocated; a truncated,
corrupt or non-zip file raises the caller's error type naming the file and the member.
"""

from __future__ import annotations

import math
import os
import struct
import zipfile
import zlib
from pathlib import Path

import numpy as np
from numpy.lib import format as npy_format

# What the zip and .npy readers raise on damaged input (a bad member's compression method is a
# NotImplementedError, an encrypted one a RuntimeError).
DAMAGE = (zipfile.BadZipFile, zipfile.LargeZipFile, OSError, EOFError, ValueError,
          NotImplementedError, RuntimeError, zlib.error, struct.error, UnicodeDecodeError,
          OverflowError)


def write(path, arrays: dict[str, np.ndarray]) -> Path:
    """Write `arrays` (member name -> array) to exactly `path`, atomically."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(path.name + ".partial")
    with open(partial, "wb") as f:  # a file object: np.savez would append .npz to a name
        np.savez(f, **arrays)
    os.replace(partial, path)
    return path


def is_archive_with(path, member: str) -> bool:
    """Whether `path` is a readable zip holding the array `member` (no error otherwise)."""
    try:
        with zipfile.ZipFile(path) as zf:
            return f"{member}.npy" in zf.namelist()
    except DAMAGE:
        return False


class Archive:
    """An archive opened for reading; `error` is the exception type every problem raises."""

    def __init__(self, path, error: type[Exception], what: str = "archive"):
        self.path, self.error = Path(path), error
        if not self.path.is_file():
            raise error(f"{self.path}: no such file")
        try:
            self._zip = zipfile.ZipFile(self.path)
            names = self._zip.namelist()
        except DAMAGE as damage:
            raise error(f"{self.path} is not a {what} (not a readable zip archive: "
                        f"{damage})") from None
        strays = [n for n in names if not n.endswith(".npy")]
        if strays:
            self._zip.close()
            raise error(f"{self.path} is not a {what}: it holds {strays[0]!r}, which is not a "
                        f".npy array")
        self.names = {n[:-len(".npy")] for n in names}

    def __enter__(self) -> "Archive":
        return self

    def __exit__(self, *exc) -> None:
        self._zip.close()

    def header(self, name: str) -> tuple[tuple[int, ...], np.dtype]:
        """The shape and dtype the member declares (nothing of its data is read); declaring
        more data than the member holds is damage."""
        with self._member(name) as f:
            shape, _, dtype = self._read_header(f, name)
        stored = self._zip.getinfo(f"{name}.npy").file_size
        if math.prod(shape) * dtype.itemsize > stored:
            raise self.error(f"{self.path}: entry {name!r} declares {dtype} of shape {shape}, "
                             f"more than the {stored} bytes it holds")
        return shape, dtype

    def array(self, name: str, shape: tuple[int, ...], dtype, what: str) -> np.ndarray:
        """The member's array, which must have exactly `shape` and `dtype`; `what` names it in
        errors (e.g. "weight 0 of layer 'Dense_100'")."""
        declared, dtype_declared = self.header(name)
        if declared != tuple(shape) or dtype_declared != np.dtype(dtype):
            raise self.error(f"{self.path}: {what} (entry {name!r}) is {dtype_declared} of shape "
                             f"{declared}, expected {np.dtype(dtype)} of shape {tuple(shape)}")
        return self._read(name)

    def text(self, name: str, max_chars: int) -> np.ndarray:
        """A unicode array member (0-d or 1-d) of at most `max_chars` characters in all."""
        shape, dtype = self.header(name)
        if dtype.kind != "U" or len(shape) > 1 or min(shape, default=0) < 0:
            raise self.error(f"{self.path}: entry {name!r} should be text, it is {dtype} of "
                             f"shape {shape}")
        chars = (shape[0] if shape else 1) * (dtype.itemsize // 4)
        if chars > max_chars:
            raise self.error(f"{self.path}: entry {name!r} declares {chars} characters, more "
                             f"than the {max_chars} allowed")
        return self._read(name)

    def _member(self, name: str):
        if name not in self.names:
            raise self.error(f"{self.path}: no entry {name!r}")
        try:
            return self._zip.open(f"{name}.npy")
        except DAMAGE as damage:
            raise self.error(f"{self.path}: entry {name!r} is damaged ({damage})") from None

    def _read_header(self, f, name: str):
        try:
            version = npy_format.read_magic(f)
            if version == (1, 0):
                return npy_format.read_array_header_1_0(f)
            if version == (2, 0):
                return npy_format.read_array_header_2_0(f)
        except DAMAGE as damage:
            raise self.error(f"{self.path}: entry {name!r} is not a valid .npy array "
                             f"({damage})") from None
        raise self.error(f"{self.path}: entry {name!r} has .npy format version {version}, "
                         f"expected 1.0 or 2.0")

    def _read(self, name: str) -> np.ndarray:
        with self._member(name) as f:
            try:
                return npy_format.read_array(f, allow_pickle=False)
            except DAMAGE as damage:
                raise self.error(f"{self.path}: entry {name!r} is damaged or truncated "
                                 f"({damage})") from None
