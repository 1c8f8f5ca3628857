"""Numbers reported by the paper (Lu 2022), for the reproduction runner to compare against.

Sources: the paper's Table 1 and Table 3 as transcribed in ``MODEL_NOTES.md`` section 6 and
the shapes / observed fractions in the shared data README.
"""

from __future__ import annotations

from typing import NamedTuple

__all__ = ["DATASETS", "PaperSpec", "PAPER_SPECS", "PAPER_K_VALUES", "PAPER_TABLE1"]

#: Names accepted by :func:`dask_bid.datasets.load_dataset`, in the paper's order.
DATASETS = ("ccle_ec50", "ccle_ic50", "ctrp_ec50", "movielens_100k")


class PaperSpec(NamedTuple):
    """What the paper reports about one dataset.

    Attributes
    ----------
    shape : tuple of int
        ``(M, N)`` after the row/column filters, before the columns are copied.
    copied_shape : tuple of int
        ``(M, 2 N)``: the shape used in the experiments (Table 3), after "copying every
        column twice".
    observed_fraction : float
        Observed entries over all entries, as printed (rounded to 3 decimals).
    k_values : tuple of int
        The ranks K of Table 1.
    """

    shape: tuple[int, int]
    copied_shape: tuple[int, int]
    observed_fraction: float
    k_values: tuple[int, ...]


#: Per-dataset paper shapes, observed fractions and ranks.
PAPER_SPECS: dict[str, PaperSpec] = {
    "ccle_ec50": PaperSpec((502, 24), (502, 48), 0.632, (5, 10, 15, 20)),
    "ccle_ic50": PaperSpec((504, 24), (504, 48), 0.965, (5, 10, 15, 20)),
    "ctrp_ec50": PaperSpec((887, 545), (887, 1090), 0.801, (20, 100, 150)),
    "movielens_100k": PaperSpec((943, 1473), (943, 2946), 0.072, (20, 100, 150)),
}

#: ``PAPER_K_VALUES[name]``: the ranks K of the paper's Table 1 for that dataset.
PAPER_K_VALUES: dict[str, tuple[int, ...]] = {n: s.k_values for n, s in PAPER_SPECS.items()}

#: ``PAPER_TABLE1[(name, K)] = (gbt_mse, rid_mse)``: the paper's Table 1, the MSE
#: ||A - C W||^2 / (M N) of its GBT sampler and of its randomized ID on the copied matrix.
PAPER_TABLE1: dict[tuple[str, int], tuple[float, float]] = {
    ("ccle_ec50", 5): (0.35, 0.50),
    ("ccle_ec50", 10): (0.22, 0.36),
    ("ccle_ec50", 15): (0.13, 0.22),
    ("ccle_ec50", 20): (0.07, 0.08),
    ("ccle_ic50", 5): (0.30, 0.45),
    ("ccle_ic50", 10): (0.23, 0.30),
    ("ccle_ic50", 15): (0.16, 0.17),
    ("ccle_ic50", 20): (0.13, 0.09),
    ("ctrp_ec50", 20): (0.58, 1.11),
    ("ctrp_ec50", 100): (0.48, 1.91),
    ("ctrp_ec50", 150): (0.47, 1.79),
    ("movielens_100k", 20): (0.06, 0.12),
    ("movielens_100k", 100): (0.05, 0.24),
    ("movielens_100k", 150): (0.05, 0.26),
}
