"""Properties of the table parser (hypothesis): any valid table round-trips exactly through CSV and Parquet, to the
same content fingerprint; any table with one NaN, infinity or text cell injected into a numeric column is refused
naming that column and row."""

from __future__ import annotations

import string
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from privengine.datasets import Declaration, parse
from privengine.errors import ConfigError

CLASSES = ("a", "b", "c")
SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@st.composite
def tables(draw) -> pd.DataFrame:
    """A valid table: 10-30 rows, 1-4 finite float columns, a label of at least two of CLASSES."""
    rows = draw(st.integers(10, 30))
    columns = draw(st.integers(1, 4))
    values = draw(st.lists(st.lists(st.floats(allow_nan=False, allow_infinity=False), min_size=columns,
                                    max_size=columns), min_size=rows, max_size=rows))
    labels = draw(st.lists(st.sampled_from(CLASSES), min_size=rows, max_size=rows).filter(lambda v: len(set(v)) > 1))
    frame = pd.DataFrame(values, columns=[f"f{j}" for j in range(columns)], dtype=np.float64)
    frame["label"] = labels
    return frame


def _parse(frame: pd.DataFrame, suffix: str):
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / f"table{suffix}"
        frame.to_csv(path, index=False) if suffix == ".csv" else frame.to_parquet(path)
        return parse(path, Declaration("t", label="label", classes=CLASSES))


@SETTINGS
@given(tables())
def test_any_valid_table_round_trips_exactly_through_csv_and_parquet(frame):
    from_csv, from_parquet = _parse(frame, ".csv"), _parse(frame, ".parquet")
    features = frame.drop(columns="label").to_numpy()
    for parsed in (from_csv, from_parquet):
        np.testing.assert_array_equal(parsed.arrays["x"], features)
        assert [CLASSES[code] for code in parsed.arrays["y"]] == frame["label"].tolist()
    assert from_csv.fingerprint() == from_parquet.fingerprint()


# no digits: such a text is a number only if it spells an infinity or a NaN
NOT_A_NUMBER = st.text(string.ascii_letters + "-_ #", min_size=1, max_size=8).filter(
    lambda text: text.strip() and text.strip().lstrip("+-").lower() not in ("inf", "infinity", "nan"))


@SETTINGS
@given(tables(), st.data())
@pytest.mark.parametrize("suffix", [".csv", ".parquet"])
def test_a_bad_cell_in_a_numeric_column_is_refused_naming_its_column_and_row(suffix, frame, data):
    row = data.draw(st.integers(0, len(frame) - 1), label="row")
    column = data.draw(st.sampled_from([c for c in frame.columns if c != "label"]), label="column")
    bad = data.draw(st.one_of(st.just(np.nan), st.just(np.inf), st.just(-np.inf), NOT_A_NUMBER), label="cell")
    frame = frame.astype({column: str if isinstance(bad, str) else float})  # Parquet: a column of one type
    frame.loc[row, column] = bad
    with pytest.raises(ConfigError) as refused:
        _parse(frame, suffix)
    assert f"`file` column {column!r}, row {row + 1}: must be a" in str(refused.value)
