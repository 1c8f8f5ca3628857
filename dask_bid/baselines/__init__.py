"""dask_bid.baselines."""
