"""Where data set files are looked for.

In order: the folder named by `FLEXFLOW_DATA_DIR`, `$KERAS_HOME/datasets`, `~/.keras/datasets`,
`/tmp/.keras/datasets` (Keras's cache layout, so files Keras already downloaded are found).
"""

from __future__ import annotations

import os
from pathlib import Path


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


class DatasetNotFound(FileNotFoundError):
    def __init__(self, dataset: str, names: list[str]):
        folders = ", ".join(str(d) for d in search_dirs())
        super().__init__(f"{dataset}: none of {names} was found in {folders}. Put the file(s) in "
                         f"one of these folders, or set FLEXFLOW_DATA_DIR to the folder that "
                         f"holds them.")
