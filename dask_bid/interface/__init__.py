"""dask_bid.interface."""
