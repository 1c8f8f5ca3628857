"""Loaders for the paper's real-world datasets (CCLE EC50/IC50, CTRP EC50, MovieLens 100K).

The data files live outside the repository (see ``docs/datasets.md`` and the shared data
README); the loaders read them in place and return a :class:`Dataset`.
"""

from ._dataset import STANDARDIZE_OPTIONS, Dataset
from ._loaders import (
    GARBAGE_THRESHOLD,
    available_datasets,
    load_ccle_ec50,
    load_ccle_ic50,
    load_ctrp_ec50,
    load_dataset,
    load_movielens_100k,
)
from ._paper import DATASETS, PAPER_K_VALUES, PAPER_SPECS, PAPER_TABLE1, PaperSpec

__all__ = [
    "DATASETS",
    "Dataset",
    "GARBAGE_THRESHOLD",
    "PAPER_K_VALUES",
    "PAPER_SPECS",
    "PAPER_TABLE1",
    "PaperSpec",
    "STANDARDIZE_OPTIONS",
    "available_datasets",
    "load_ccle_ec50",
    "load_ccle_ic50",
    "load_ctrp_ec50",
    "load_dataset",
    "load_movielens_100k",
]
