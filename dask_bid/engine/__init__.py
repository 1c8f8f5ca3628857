"""dask_bid.engine: the chain driver and its backends (in memory, and on Dask with Zarr).

Public entry points: :func:`fit_dask` (what ``bayesian_id`` calls for out-of-core input),
:func:`to_zarr` (write a matrix with a chunking suited to the engine), :func:`read_result`
(load a finished fit's output group), :func:`cluster_executor`.
"""

from .chain import ChainConfig, ClientState, run_chain
from .checkpoint import Checkpointer, StoreSpec
from .cluster import DistributedExecutor, SyncExecutor, cluster_executor
from .dask_backend import DaskBackend, Layout, TileSource, plan_layout
from .fit import ENGINE_DEFAULTS, fit_dask
from .inputs import MatrixSource, as_matrix_source
from .memory import MemoryBackend
from .zarr_io import default_chunks, read_result, to_zarr

__all__ = [
    "ChainConfig",
    "ClientState",
    "run_chain",
    "MemoryBackend",
    "DaskBackend",
    "Layout",
    "plan_layout",
    "TileSource",
    "Checkpointer",
    "StoreSpec",
    "cluster_executor",
    "SyncExecutor",
    "DistributedExecutor",
    "fit_dask",
    "ENGINE_DEFAULTS",
    "MatrixSource",
    "as_matrix_source",
    "to_zarr",
    "read_result",
    "default_chunks",
]
