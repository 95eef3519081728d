"""Fetching data files: hashes, the Keras cache folder, and downloads.

Downloads happen only when a file is asked for and missing, and only if the network answers
within a short timeout; a failed download raises `DownloadError` with the reason, so callers can
say which file to put where instead.
"""

from __future__ import annotations

import hashlib
import os
import tarfile
import urllib.error
import urllib.request
from pathlib import Path

DOWNLOAD_TIMEOUT_S = 10


class DownloadError(OSError):
    """A file could not be downloaded (no network, HTTP error, wrong checksum)."""


def hash_file(path, algorithm: str = "md5", chunk_size: int = 1 << 20) -> str:
    digest = hashlib.new(algorithm)
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(chunk_size), b""):
            digest.update(chunk)
    return digest.hexdigest()


def hash_algorithm(file_hash: str, algorithm: str = "auto") -> str:
    """'sha256' for 64-digit hashes, 'md5' otherwise, unless named explicitly."""
    if algorithm != "auto":
        return algorithm
    return "sha256" if len(file_hash) == 64 else "md5"


def validate_file(path, file_hash: str, algorithm: str = "auto") -> bool:
    return hash_file(path, hash_algorithm(file_hash, algorithm)) == file_hash


def cache_root() -> Path:
    """$KERAS_HOME (default ~/.keras) if writable, else /tmp/.keras, as Keras does."""
    root = Path(os.environ.get("KERAS_HOME", Path.home() / ".keras"))
    try:
        root.mkdir(parents=True, exist_ok=True)
        if os.access(root, os.W_OK):
            return root
    except OSError:
        pass
    return Path("/tmp/.keras")


def download(origin: str, destination, file_hash: str | None = None,
             timeout: float = DOWNLOAD_TIMEOUT_S) -> Path:
    """Fetch `origin` to `destination` (written whole or not at all), checking `file_hash`."""
    destination = Path(destination)
    destination.parent.mkdir(parents=True, exist_ok=True)
    partial = destination.with_name(destination.name + ".partial")
    try:
        with urllib.request.urlopen(origin, timeout=timeout) as response, \
                open(partial, "wb") as out:
            for chunk in iter(lambda: response.read(1 << 20), b""):
                out.write(chunk)
    except (urllib.error.URLError, OSError) as error:
        partial.unlink(missing_ok=True)
        raise DownloadError(f"downloading {origin} failed: {getattr(error, 'reason', error)}") \
            from None
    if file_hash is not None and not validate_file(partial, file_hash):
        partial.unlink()
        raise DownloadError(f"the file downloaded from {origin} does not have the expected "
                            f"hash {file_hash}")
    os.replace(partial, destination)
    return destination


def get_file(fname, origin, untar=False, md5_hash=None, file_hash=None,
             cache_subdir="datasets", hash_algorithm="auto", extract=False,
             archive_format="auto", cache_dir=None) -> str:
    """Keras's get_file: the path of `fname` in the cache (`cache_dir` or `cache_root()`) /
    `cache_subdir`, downloaded from `origin` when missing or when its hash does not match.
    `untar`/`extract` unpack a tar archive next to it (members may not leave that folder)."""
    if archive_format not in ("auto", "tar"):
        raise ValueError(f"get_file: archive_format {archive_format!r} is not supported")
    file_hash = file_hash or md5_hash
    folder = Path(cache_dir or cache_root()) / cache_subdir
    path = folder / (fname + ".tar.gz" if untar else fname)
    if not path.is_file() or (file_hash and not validate_file(path, file_hash, hash_algorithm)):
        download(origin, path, file_hash)
    if untar or extract:
        with tarfile.open(path) as archive:
            archive.extractall(folder, filter="data")
        if untar:
            return str(folder / fname)
    return str(path)
