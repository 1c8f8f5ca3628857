"""Names of the Zarr attributes that more than one layer reads or writes.

A module of constants only, so that the command line can name them without importing the
engine (``dask-bid --help`` answers in a fraction of a second).
"""

__all__ = ["COLUMN_NAMES_ATTR", "COLUMN_NAMES_MAX", "ROW_NAMES_ATTR", "MISSING_ATTR",
           "CONVERTED_FROM_ATTR"]

#: Attribute of an input store holding the names of its columns (a list of N strings),
#: written by the command line's conversion of a text file with a header; a fit of the
#: store keeps them in its result (``attrs["dask_bid"]["feature_names"]``).
COLUMN_NAMES_ATTR = "dask_bid_column_names"
#: Names are kept for matrices of up to this many columns (they live in JSON metadata);
#: row names for up to this many rows.
COLUMN_NAMES_MAX = 100_000
#: Attribute of an input store holding the names of its rows (a list of M strings),
#: written by the command line's conversion of a text file with row labels; a fit of
#: the store keeps them in its result (``attrs["dask_bid"]["sample_names"]``).
ROW_NAMES_ATTR = "dask_bid_row_names"
#: Attribute of a store converted from a .npy or text file: ``{"fill": "zero", "keep" or
#: None, "n_filled": int, "n_kept": int}`` (NaN replaced by 0 with --fill-missing zero; NaN
#: kept as the missing-entry marker with --missing mask). A fit of a store that kept NaN
#: needs ``missing="mask"``; it is refused at once without it.
MISSING_ATTR = "dask_bid_missing"
#: Attribute of a store converted from a file: the file's stamp (absolute path, size,
#: modification and change times; _files.file_stamp). A fit of the store records it in its
#: result (``attrs["dask_bid"]["input"]["converted_from"]``), so that ``info`` says which
#: file the result was fitted on, and when the store now holds another conversion.
CONVERTED_FROM_ATTR = "dask_bid_converted_from"
