"""FlexFlow on Dask. Kept nearly empty so `flexflow.ops` and `flexflow.scheduler` import alone.

One process setting must come before PyTorch loads, and every import of ours passes here first:
MKL (PyTorch's CPU BLAS) otherwise keeps each matmul's packing buffers for the life of the
process, memory the model's arrays cannot use and the memory model (scheduler/memory.py) does
not see. A value the user set is kept; where PyTorch was imported first it has no effect.
"""

import os

os.environ.setdefault("MKL_DISABLE_FAST_MM", "1")

__version__ = "0.1.0"
