"""The markers of a missing value in text files, shared by the dense reader (the command
line's conversion, ``interface/cli/reading.py``) and the triplet reader
(``interface/sparse_io.py``). Constants only: importing this costs nothing."""

__all__ = ["NA_TOKENS"]

#: Fields that mark a missing value (besides an empty field and numpy's "nan"), compared
#: without quotes and case: R writes NA, spreadsheets #N/A, databases NULL, pandas <NA>.
NA_TOKENS = frozenset({"na", "n/a", "nan", "-nan", "null", "none", "#n/a", "#na", "<na>"})
