"""dask_bid.kernels."""
