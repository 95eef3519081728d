"""FlexFlow on Dask. Kept nearly empty so `flexflow.ops` and `flexflow.scheduler` import alone."""

__version__ = "0.1.0"
