"""dask_bid.engine."""
