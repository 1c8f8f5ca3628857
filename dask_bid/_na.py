"""The markers of a missing value in text files, and the split of a line into its fields,
shared by the dense reader (the command line's conversion, ``interface/cli/reading.py``)
and the triplet reader (``interface/sparse_io.py``). No imports: it costs nothing."""

__all__ = ["NA_TOKENS", "split_fields"]

#: Fields that mark a missing value (besides an empty field and numpy's "nan"), compared
#: without quotes and case: R writes NA, spreadsheets #N/A, databases NULL, pandas <NA>.
NA_TOKENS = frozenset({"na", "n/a", "nan", "-nan", "null", "none", "#n/a", "#na", "<na>"})


def split_fields(line: str, delim: str | None) -> list[str]:
    """The fields of a line: split at ``delim`` (whitespace for None) outside double
    quotes, the quotes kept (a quoted field is a name to the layout's rules). A quoted
    field holding the delimiter ("1,234.5", "IC50, uM") was split in two: a row label and
    a shifted row of numbers, read without a word."""
    if delim is None:
        return line.split()
    if '"' not in line:
        return line.split(delim)
    fields, start, quoted = [], 0, False
    for i, ch in enumerate(line):
        if ch == '"':
            quoted = not quoted  # ("" inside a quoted field toggles twice)
        elif ch == delim and not quoted:
            fields.append(line[start:i])
            start = i + 1
    fields.append(line[start:])
    return fields
