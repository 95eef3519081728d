""".npz archives of named arrays, the container of weights files, checkpoints and data sets.

An archive is NumPy's `.npz`: a zip holding one `.npy` file per array. Writing goes to a
`.partial` file that then replaces the target, so an interrupted save never leaves a truncated
file where a good one was, and a failed one leaves no `.partial` either. Reading never unpickles
and never trusts a declared size: each member's `.npy` header is read first and must declare
exactly the shape and dtype the caller expects (or, for text, at most a given length) before its
data is allocated; a reader may also bound the bytes all members declare together; a truncated,
corrupt or non-zip file raises the caller's error type naming the file and the member.
"""

from __future__ import annotations

import math
import os
import struct
import zipfile
import zlib
from contextlib import suppress
from pathlib import Path

import numpy as np
from numpy.lib import format as npy_format

# What the zip and .npy readers raise on damaged input (a bad member's compression method is a
# NotImplementedError, an encrypted one a RuntimeError).
DAMAGE = (zipfile.BadZipFile, zipfile.LargeZipFile, OSError, EOFError, ValueError,
          NotImplementedError, RuntimeError, zlib.error, struct.error, UnicodeDecodeError,
          OverflowError)
COMPRESSIONS = (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED)


def write(path, arrays: dict[str, np.ndarray]) -> Path:
    """Write `arrays` (member name -> array) to exactly `path`, atomically and durably.

    The archive is written to `<path>.partial`, flushed to disk (fsync) and renamed over `path`,
    and the folder is then synced (where the system allows it) so that the rename itself
    survives a crash: after a power loss `path` is the old file or the new one, whole. A write
    that fails (a full disk, an I/O error, an interrupt: any exception) removes its `.partial`
    and re-raises, leaving the file at `path` as it was. A `.partial` left by a process that
    died mid-save is removed first (whatever it is: a truncated archive, a link), never read and
    never written through; readers only open `path`."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(path.name + ".partial")
    partial.unlink(missing_ok=True)
    f = open(partial, "xb")  # a file object: np.savez would append .npz to a name
    try:
        with f:
            np.savez(f, **arrays)
            f.flush()
            os.fsync(f.fileno())
        os.replace(partial, path)
    except BaseException:
        with suppress(OSError):  # the write's own error is the one to report
            partial.unlink(missing_ok=True)
        raise
    _sync_folder(path.parent)
    return path


def _sync_folder(folder: Path) -> None:
    """Make a rename in `folder` durable; systems that cannot open or sync folders skip it."""
    try:
        descriptor = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(descriptor)
    except OSError:
        pass
    finally:
        os.close(descriptor)


def is_archive_with(path, member: str) -> bool:
    """Whether `path` is a readable zip holding the array `member` (no error otherwise)."""
    try:
        with zipfile.ZipFile(path) as zf:
            return f"{member}.npy" in zf.namelist()
    except DAMAGE:
        return False


class Archive:
    """An archive opened for reading; `error` is the exception type every problem raises.
    With `max_bytes`, an archive whose members declare more than that many bytes in all
    (uncompressed: a zip bomb's are huge) is refused before any member is read."""

    def __init__(self, path, error: type[Exception], what: str = "archive",
                 max_bytes: int | None = None):
        self.path, self.error = Path(path), error
        if not self.path.is_file():
            raise error(f"{self.path}: no such file")
        try:
            self._zip = zipfile.ZipFile(self.path)
            members = self._zip.infolist()
        except DAMAGE as damage:
            raise error(f"{self.path} is not a {what} (not a readable zip archive: "
                        f"{damage})") from None
        try:
            self._check_members(members, what, max_bytes)
        except Exception:
            self._zip.close()
            raise
        self.names = {m.filename[:-len(".npy")] for m in members}

    def _check_members(self, members: list[zipfile.ZipInfo], what: str,
                       max_bytes: int | None) -> None:
        """Every member a `.npy` array, stored or deflated (the methods NumPy writes; deflate
        is read in bounded steps, the others inflate a whole block at once), and within
        `max_bytes` in all."""
        strays = [m.filename for m in members if not m.filename.endswith(".npy")]
        if strays:
            raise self.error(f"{self.path} is not a {what}: it holds {strays[0]!r}, which is "
                             f"not a .npy array")
        packed = [m.filename for m in members if m.compress_type not in COMPRESSIONS]
        if packed:
            raise self.error(f"{self.path}: entry {packed[0]!r} is compressed by a method other "
                             f"than deflate")
        declared = sum(m.file_size for m in members)
        if max_bytes is not None and declared > max_bytes:
            raise self.error(f"{self.path}: its entries declare {declared} bytes uncompressed, "
                             f"more than the {max_bytes} a {what} may hold")

    def __enter__(self) -> "Archive":
        return self

    def __exit__(self, *exc) -> None:
        self._zip.close()

    def declared(self, name: str) -> tuple[tuple[int, ...], np.dtype]:
        """The shape and dtype the member's header declares (nothing of its data is read)."""
        with self._member(name) as f:
            shape, _, dtype = self._read_header(f, name)
        return shape, dtype

    def header(self, name: str) -> tuple[tuple[int, ...], np.dtype]:
        """The shape and dtype the member declares (nothing of its data is read); declaring
        more data than the member holds is damage."""
        shape, dtype = self.declared(name)
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

    def numeric(self, name: str) -> np.ndarray:
        """The member's array, of whatever shape and plain dtype it declares."""
        self.header(name)
        return self._read(name)

    def pickled(self, name: str) -> bytes:
        """What follows an object array member's header: the pickle of its elements, for the
        caller's own restricted unpickler (never unpickled here)."""
        with self._member(name) as f:
            self._read_header(f, name)
            try:
                return f.read()
            except DAMAGE as damage:
                raise self.error(f"{self.path}: entry {name!r} is damaged or truncated "
                                 f"({damage})") from None

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
