"""Baseline interpolative decompositions: randomized (Liberty et al. 2007) and pivoted QR."""

from ._rid import RandomizedID, pivoted_qr_id, randomized_id, select_columns

__all__ = ["RandomizedID", "randomized_id", "pivoted_qr_id", "select_columns"]
