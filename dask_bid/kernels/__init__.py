"""dask_bid.kernels."""

from .truncnorm import gtn_cdf, gtn_draw, gtn_logpdf, sample_gtn

__all__ = [
    "gtn_draw",
    "sample_gtn",
    "gtn_cdf",
    "gtn_logpdf",
]
