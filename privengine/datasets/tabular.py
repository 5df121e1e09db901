"""Tabular data sets: a CSV or Parquet file (pandas, pyarrow) parsed into normalised arrays, or refused.

Layout of the result (:class:`~.content.Parsed`), n rows in the file's order (the first ``public_rows`` public):
``x`` ``(n, d)`` float64, the d numeric columns in the file's order; ``categories`` ``(n, k)`` int64, each declared
categorical column's values as codes into its declared list; ``y`` ``(n,)`` int64, the label as codes into the class
list. Every other column must be numeric. Refused, each with one :class:`ConfigError` naming the column and row
(rows count data rows from 1, the header not counted): a missing or unknown label column, a non-numeric value in a
numeric column, an empty cell, NaN or inf, a value outside a declared category or class list, one class only, fewer
rows than ``min_rows``.

Public facts: the class list (declared, else the labels of the public rows), each categorical column's list
(declared), each numeric column's bounds (declared, else the public rows' min and max, else none), the public
part's size and the declared private size; never a statistic of the private rows.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd

from ..errors import ConfigError
from .content import Parsed, check_rows, fact, private_size, public_part
from .declaration import EVERY_COLUMN, Declaration

SUFFIXES = {".csv": "csv", ".parquet": "parquet", ".pq": "parquet"}
ROWS_NOTE = "rows count data rows from 1, the header not counted"


# Each decimal read as its nearest double, as Parquet stores it: pandas 3.1's default; before 3.1 the default parser
# ("high") can land one ulp off (pandas 3.0.6 on the GPU machine: 7 894 of 40 001 random doubles), and the content's
# fingerprint with it, so there Python's own parser is asked for (pandas 3.1 deprecates the argument).
_PANDAS = tuple(int(part) for part in re.match(r"(\d+)\.(\d+)", pd.__version__).groups())  # "3.1.0rc1": (3, 1)
_EXACT_FLOATS = {"float_precision": "round_trip"} if _PANDAS < (3, 1) else {}


def read_table(path: Path, declaration: Declaration) -> pd.DataFrame:
    """The file as a frame: the label and categorical columns as text, the others as pandas reads them."""
    reader = SUFFIXES.get(path.suffix.lower())
    if reader is None:
        raise ConfigError("file", f"must be a .csv or .parquet file for a table (a folder or .zip of images: kind "
                                  f"images); got {path.name!r}")
    text_columns = {declaration.label, *declaration.categorical} - {None}
    try:
        if reader == "csv":
            header = pd.read_csv(path, nrows=0).columns
            frame = pd.read_csv(path, dtype={c: str for c in text_columns if c in header}, **_EXACT_FLOATS)
        else:
            frame = pd.read_parquet(path)
            for column in text_columns & set(frame.columns):
                frame[column] = frame[column].astype(object).where(frame[column].isna(), frame[column].astype(str))
    except (ValueError, OSError, UnicodeDecodeError, pd.errors.ParserError) as exc:  # EmptyDataError, ArrowInvalid
        first_line = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ConfigError("file", f"must be a readable {reader} file; {path.name}: {first_line}") from None
    return frame


def head(path: Path, rows: int = 10) -> pd.DataFrame:
    """The file's first ``rows`` rows as text, as written (a preview; nothing checked but that it reads)."""
    frame = read_table(path, Declaration("preview")).head(rows)
    return frame.astype(str).where(frame.notna(), "")


def parse_frame(frame: pd.DataFrame, declaration: Declaration) -> Parsed:
    """Validate ``frame`` against ``declaration`` and normalise it (see the module's doc); ConfigError otherwise."""
    columns = [str(c) for c in frame.columns]
    frame = frame.set_axis(columns, axis=1)
    label = declaration.label
    if not label:
        raise ConfigError("label", f"is required for a table: one of its columns ({_listed(columns)})")
    if label not in columns:
        raise ConfigError("label", f"must be a column of the file ({_listed(columns)}); got {label!r}")
    for name, declared in (("categorical", declaration.categorical), ("bounds", declaration.bounds)):
        unknown = [c for c in declared if c not in columns and c != EVERY_COLUMN]
        if unknown:
            raise ConfigError(name, f"must name columns of the file ({_listed(columns)}); got {unknown[0]!r}")
    numeric = [c for c in columns if c != label and c not in declaration.categorical]
    if not numeric and not declaration.categorical:
        raise ConfigError("file", "must hold at least one feature column besides the label")
    rows = len(frame)
    check_rows(declaration, rows)
    x = np.empty((rows, len(numeric)), dtype=np.float64)
    for j, column in enumerate(numeric):
        x[:, j] = _numbers(frame[column], column)
    categories = np.empty((rows, len(declaration.categorical)), dtype=np.int64)
    for j, (column, allowed) in enumerate(declaration.categorical.items()):
        categories[:, j] = _codes(frame[column], column, allowed, "its declared categories (categorical)")
    labels = frame[label]
    _no_empty(labels, label)
    present = pd.unique(labels)
    if len(present) < 2:
        raise ConfigError("label", f"column {label!r} holds one class only ({present[0]!r}); a label needs at least "
                                   "2 classes")
    public = public_part(declaration, rows)
    classes = _classes(declaration, labels, public["value"])
    y = _codes(labels, label, classes["value"], "the class list (classes)")
    schema = {"kind": "tabular", "label": label, "numeric": numeric,
              "categorical": {c: list(v) for c, v in declaration.categorical.items()},
              "classes": classes["value"], "rows": rows,
              "columns": [{"name": c, "role": "label" if c == label else
                           "categorical" if c in declaration.categorical else "numeric"} for c in columns]}
    facts = {"private_size": private_size(declaration), "public_rows": public, "classes": classes,
             "categories": {c: fact(list(v), "declared (categorical)") for c, v in declaration.categorical.items()},
             "bounds": {c: _bounds(declaration, c, x[:public["value"], j], public["value"])
                        for j, c in enumerate(numeric)}}
    return Parsed({"x": x, "categories": categories, "y": y}, schema, facts)


def _listed(columns: list[str], most: int = 12) -> str:
    return ", ".join(columns[:most]) + (f", ... ({len(columns)} columns)" if len(columns) > most else "")


def _numbers(series: pd.Series, column: str) -> np.ndarray:
    """``series`` as finite float64, or ConfigError naming the column and the first bad row."""
    if pd.api.types.is_numeric_dtype(series) and not pd.api.types.is_bool_dtype(series):
        values = series.to_numpy(dtype=np.float64, na_value=np.nan)
    else:
        converted = pd.to_numeric(series, errors="coerce")
        bad = np.flatnonzero(converted.isna().to_numpy() & series.notna().to_numpy())
        if bad.size:
            raise ConfigError("file", f"column {column!r}, row {bad[0] + 1}: must be a number (declare a column of "
                                      f"names with categorical {column}=a,b,...); got {series.iloc[bad[0]]!r} "
                                      f"({ROWS_NOTE})")
        values = converted.to_numpy(dtype=np.float64, na_value=np.nan)
    bad = np.flatnonzero(~np.isfinite(values))
    if bad.size:
        what = "an empty cell or NaN" if np.isnan(values[bad[0]]) else str(values[bad[0]])
        raise ConfigError("file", f"column {column!r}, row {bad[0] + 1}: must be a finite number; got {what} "
                                  f"({ROWS_NOTE})")
    return values


def _no_empty(series: pd.Series, column: str) -> None:
    missing = np.flatnonzero(series.isna().to_numpy())
    if missing.size:
        raise ConfigError("file", f"column {column!r}, row {missing[0] + 1}: must not be empty ({ROWS_NOTE})")


def _codes(series: pd.Series, column: str, allowed, where: str) -> np.ndarray:
    """Codes of ``series``'s values into ``allowed`` (its order), or ConfigError naming the first row outside it."""
    _no_empty(series, column)
    codes = pd.Index(list(allowed)).get_indexer(series).astype(np.int64)
    bad = np.flatnonzero(codes < 0)
    if bad.size:
        raise ConfigError("file", f"column {column!r}, row {bad[0] + 1}: must be one of {where}: "
                                  f"{', '.join(allowed)}; got {series.iloc[bad[0]]!r} ({ROWS_NOTE})")
    return codes


def _classes(declaration: Declaration, labels: pd.Series, public_rows: int) -> dict:
    """The class list: declared, else the sorted labels of the public rows; never the private rows'."""
    if declaration.classes is not None:
        return fact(list(declaration.classes), "declared (classes)")
    if public_rows == 0:
        raise ConfigError("classes", "must be declared (e.g. classes 0,1) when no row is public: the class list is "
                                     "public and may not be read from the private rows")
    found = sorted(pd.unique(labels.iloc[:public_rows]).tolist())
    if len(found) < 2:
        raise ConfigError("classes", f"must be declared: the public rows hold one class only ({found[0]!r})")
    return fact(found, f"the labels of the public part (the first {public_rows} rows)")


def _bounds(declaration: Declaration, column: str, public_values: np.ndarray, public_rows: int) -> dict:
    """A numeric column's public range: declared, else the public rows' min and max, else none."""
    declared = declaration.bounds.get(column, declaration.bounds.get(EVERY_COLUMN))
    if declared is not None:
        return fact(list(declared), "declared (bounds)")
    if public_rows:
        return fact([float(public_values.min()), float(public_values.max())],
                    f"the public part (the first {public_rows} rows): its min and max")
    return fact(None, "not declared (bounds); no public rows")
