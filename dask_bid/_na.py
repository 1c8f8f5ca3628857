"""The markers of a missing value in text files, and the split of a line into its fields,
shared by the dense reader (the command line's conversion, ``interface/cli/reading.py``)
and the triplet reader (``interface/sparse_io.py``). No imports: it costs nothing."""

__all__ = ["NA_TOKENS", "WHITESPACE", "split_fields"]

#: A separator given as runs of whitespace (``--sep space``, ``sep="whitespace"``), told
#: apart from None, which leaves the separator to the file's suffix
WHITESPACE = "whitespace"

#: Fields that mark a missing value (besides an empty field and numpy's "nan"), compared
#: without quotes and case: R writes NA, spreadsheets #N/A, databases NULL, pandas <NA>.
NA_TOKENS = frozenset({"na", "n/a", "nan", "-nan", "null", "none", "#n/a", "#na", "<na>"})


def split_fields(line: str, delim: str | None) -> list[str]:
    """The fields of a line: split at ``delim`` (runs of whitespace for None) outside
    double quotes, the quotes kept (a quoted field is a name to the layout's rules). A
    quote opens a quoted field only at the field's start, and closes it before the
    delimiter, as csv reads them: a quote inside a field (a label ``Drive 3.5"``) is a
    character. A quoted field holding the delimiter ("1,234.5", "IC50, uM") was split in
    two: a row label and a shifted row of numbers, read without a word."""
    if '"' not in line:
        return line.split(delim) if delim is not None else line.split()
    fields, cur, quoted, at_start = [], [], False, True
    i, n = 0, len(line)
    while i < n:
        ch = line[i]
        if quoted:
            cur.append(ch)
            if ch == '"':
                if i + 1 < n and line[i + 1] == '"':  # "" inside: a quote character
                    cur.append('"')
                    i += 1
                else:
                    quoted = False
        elif ch == delim or (delim is None and ch.isspace()):
            if delim is not None or cur:
                fields.append("".join(cur))
            cur, at_start = [], True
        else:
            if ch == '"' and at_start:
                quoted = True
            if not ch.isspace():
                at_start = False
            cur.append(ch)
        i += 1
    if delim is not None or cur:
        fields.append("".join(cur))
    return fields
