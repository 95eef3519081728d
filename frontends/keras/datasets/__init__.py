"""Data set loaders with FlexFlow's (Keras 2) signatures, reading local files.

Files are looked for in `$FLEXFLOW_DATA_DIR`, then `$KERAS_HOME/datasets` (default
`~/.keras/datasets`), then `/tmp/.keras/datasets`; published checksums are verified (set
`FLEXFLOW_DATA_VERIFY=0` to skip); a missing file is downloaded only if the network answers,
otherwise the error says which file to put where. See `files.py`. A file that is malformed,
oversized or hostile raises `DatasetError` naming it.
"""

from . import cifar10, mnist, reuters
from .files import DatasetError

__all__ = ["mnist", "cifar10", "reuters", "DatasetError"]
