"""dask_bid.datasets."""
