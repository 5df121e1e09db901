"""User data sets from tables: parsed, validated, stored content-addressed and atomically with their public facts;
bad files refused with one message naming the column, row or field, nothing stored; deleting refused while runs use
one. (Images: test_datasets_images.py; the parser's properties: test_datasets_properties.py; the page:
test_datasets_page.py.)"""

from __future__ import annotations

import json
import threading

import numpy as np
import pandas as pd
import pytest

from privengine.datasets import (Declaration, add_dataset, datasets_home, delete_unused, load_dataset, manifest,
                                 names, referencing_runs, source_key, storage)
from privengine.errors import ConfigError
from tests.conftest import run_cli

CLASSES = ("no", "yes")


def _frame(rows: int = 40, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    frame = pd.DataFrame({"age": rng.integers(18, 90, rows).astype(float), "income": rng.normal(50, 10, rows),
                          "city": rng.choice(["paris", "oslo", "rome"], rows)})
    frame["target"] = np.where(np.arange(rows) % 2 == 0, "no", "yes")
    return frame


def _declare(name: str = "people", **changes) -> Declaration:
    values = dict(label="target", classes=CLASSES, categorical={"city": ("oslo", "paris", "rome")})
    return Declaration(name, **{**values, **changes})


def _stored_nothing() -> bool:
    home = datasets_home()
    return not names() and not any((home / "objects").glob("*")) if home.exists() else True


@pytest.fixture
def csv_path(tmp_path):
    path = tmp_path / "people.csv"
    _frame().to_csv(path, index=False)
    return path


def test_a_csv_and_a_parquet_of_one_table_store_the_same_content(tmp_path, csv_path):
    frame = _frame()
    frame.to_parquet(tmp_path / "people.parquet")
    from_csv = add_dataset(_declare("from-csv"), csv_path)
    from_parquet = add_dataset(_declare("from-parquet"), tmp_path / "people.parquet")
    assert from_csv["fingerprint"] == from_parquet["fingerprint"]
    assert len(list((datasets_home() / "objects").iterdir())) == 1  # content-addressed: one object, two names
    data = load_dataset("from-csv")
    np.testing.assert_array_equal(data.x, frame[["age", "income"]].to_numpy())
    assert [data.classes[c] for c in data.y] == frame["target"].tolist()
    assert [("oslo", "paris", "rome")[c] for c in data.categories[:, 0]] == frame["city"].tolist()
    assert data.manifest["schema"]["numeric"] == ["age", "income"] and data.kind == "tabular"


def test_one_changed_cell_changes_the_fingerprint(tmp_path, csv_path):
    frame = _frame()
    frame.loc[5, "income"] += 1e-9
    frame.to_csv(tmp_path / "changed.csv", index=False)
    assert add_dataset(_declare("a"), csv_path)["fingerprint"] != add_dataset(_declare("b"),
                                                                              tmp_path / "changed.csv")["fingerprint"]


def test_public_facts_come_from_the_declaration_or_the_public_rows_never_the_private_ones(tmp_path):
    frame = _frame()
    frame.to_csv(tmp_path / "a.csv", index=False)
    extreme = frame.copy()
    extreme.loc[30, "income"] = 1e9  # a private row (public rows: the first 10)
    extreme.loc[31, "target"] = "yes"
    extreme.to_csv(tmp_path / "b.csv", index=False)
    declared = dict(classes=None, public_rows=10, bounds={"age": (0.0, 120.0)})
    a = add_dataset(_declare("a", **declared), tmp_path / "a.csv")
    b = add_dataset(_declare("b", **declared), tmp_path / "b.csv")
    assert a["public"] == b["public"] and a["fingerprint"] != b["fingerprint"]
    facts = a["public"]
    assert facts["bounds"]["age"] == {"value": [0.0, 120.0], "source": "declared (bounds)"}
    assert facts["bounds"]["income"]["value"] == [frame["income"][:10].min(), frame["income"][:10].max()]
    assert "the first 10 rows" in facts["bounds"]["income"]["source"]
    assert facts["classes"]["value"] == sorted(set(frame["target"][:10]))
    assert facts["private_size"] == {"value": None, "source": facts["private_size"]["source"]}
    data = load_dataset("a")
    assert len(data.public()["x"]) == 10 and len(data.private()["y"]) == len(frame) - 10
    assert data.public_rows == 10 and data.private_size is None


def test_undeclared_bounds_without_public_rows_are_none_and_say_so(csv_path):
    facts = add_dataset(_declare(private_size=40), csv_path)["public"]
    assert facts["bounds"]["income"]["value"] is None and "not declared" in facts["bounds"]["income"]["source"]
    assert facts["private_size"] == {"value": 40, "source": "declared (private_size)"}
    assert facts["public_rows"]["value"] == 0


def _with(frame: pd.DataFrame, row: int, column: str, value) -> pd.DataFrame:
    changed = frame.astype({column: object})
    changed.loc[row, column] = value
    return changed


BAD_TABLES = {  # name: (frame change, declaration change, words the one message must hold)
    "no label": (None, {"label": None}, ["`label` is required", "age, income, city, target"]),
    "unknown label": (None, {"label": "outcome"}, ["`label` must be a column", "got 'outcome'"]),
    "text in a number column": (lambda f: _with(f, 6, "income", "lots"), {},
                                ["column 'income', row 7", "must be a number", "'lots'"]),
    "NaN": (lambda f: _with(f, 3, "age", np.nan), {}, ["column 'age', row 4", "empty cell or NaN"]),
    "inf": (lambda f: _with(f, 12, "income", np.inf), {}, ["column 'income', row 13", "finite", "inf"]),
    "empty label": (lambda f: _with(f, 2, "target", None), {}, ["column 'target', row 3", "must not be empty"]),
    "one class": (lambda f: f.assign(target="yes"), {}, ["column 'target' holds one class only", "at least 2"]),
    "undeclared class": (lambda f: _with(f, 9, "target", "maybe"), {}, ["column 'target', row 10", "'maybe'",
                                                                       "no, yes"]),
    "undeclared category": (lambda f: _with(f, 0, "city", "lima"), {}, ["column 'city', row 1", "'lima'"]),
    "too few rows": (lambda f: f.iloc[:5], {}, ["`file` must hold at least min_rows = 10 rows", "holds 5"]),
    "public part too large": (None, {"public_rows": 35}, ["`public_rows`", "at most 30", "got 35"]),
    "classes from private rows": (None, {"classes": None}, ["`classes` must be declared", "private rows"]),
    "file too large": (None, {"max_bytes": 100}, ["`max_bytes` is 100 bytes", "people.csv has"]),
    "unknown categorical column": (None, {"categorical": {"town": ("a",)}}, ["`categorical` must name columns",
                                                                            "'town'"]),
    "bad name": (None, {"name": "../up"}, ["`name` must be 1 to 64 letters", "'../up'"]),
}


@pytest.mark.parametrize("case", sorted(BAD_TABLES))
def test_a_bad_table_is_refused_naming_what_and_where_and_nothing_is_stored(tmp_path, case):
    change, declared, words = BAD_TABLES[case]
    frame = _frame() if change is None else change(_frame())
    path = tmp_path / "people.csv"
    frame.to_csv(path, index=False)
    declaration = _declare(**{k: v for k, v in declared.items() if k != "name"})
    if "name" in declared:
        declaration = Declaration(declared["name"], label="target", classes=CLASSES)
    with pytest.raises(ConfigError) as refused:
        add_dataset(declaration, path)
    message = str(refused.value)
    assert all(word in message for word in words), message
    assert "\n" not in message and _stored_nothing()


def test_a_taken_name_is_refused_before_the_file_is_read(csv_path, tmp_path):
    add_dataset(_declare(), csv_path)
    with pytest.raises(ConfigError, match="`name` is taken: a data set 'people'"):
        add_dataset(_declare(), tmp_path / "does-not-exist.csv")
    with pytest.raises(ConfigError, match="`name` must not be a built-in"):
        add_dataset(_declare("mnist"), csv_path, reserved={"mnist"})


def test_a_failure_while_storing_leaves_nothing_half_written(csv_path, monkeypatch):
    saved = []

    def save_then_fail(path, array, allow_pickle):
        if saved:
            raise OSError(28, "No space left on device")
        saved.append(path)
        np.lib.format.write_array(open(path, "wb"), array)

    monkeypatch.setattr(storage.np, "save", save_then_fail)
    with pytest.raises(OSError, match="No space left"):
        add_dataset(_declare(), csv_path)
    assert saved and not saved[0].exists()
    assert _stored_nothing() and not list((datasets_home() / "objects").iterdir())


def test_a_name_taken_by_a_concurrent_add_removes_the_object_it_wrote(csv_path, monkeypatch):
    real_link = storage.os.link

    def taken_meanwhile(source, target):
        (datasets_home() / "names" / "people.json").write_text(json.dumps({"fingerprint": "other"}))
        real_link(source, target)

    monkeypatch.setattr(storage.os, "link", taken_meanwhile)
    with pytest.raises(ConfigError, match="is taken"):
        add_dataset(_declare(), csv_path)
    assert not list((datasets_home() / "objects").iterdir())
    assert [p.name for p in (datasets_home() / "names").iterdir()] == ["people.json"]  # the other add's alone


def test_delete_is_refused_while_a_stored_run_uses_the_data_set(store, csv_path):
    add_dataset(_declare(), csv_path)
    add_dataset(_declare("copy"), csv_path)
    by_config = store.create_run("toy", {"dataset": "people", "steps": 1})
    by_source = store.create_run("toy", {"steps": 1}, data_source=source_key("people"))
    store.create_run("toy", {"dataset": "other"})
    assert sorted(referencing_runs(store, "people")) == sorted([by_config, by_source])
    with pytest.raises(ConfigError, match="`name` is used by 2 stored runs"):
        delete_unused(store, "people")
    assert manifest("people")["name"] == "people"
    for run_id in (by_config, by_source):
        store.mark_ended(run_id, "finished", summary={})
        store.delete_run(run_id)
    fingerprint = manifest("people")["fingerprint"]
    delete_unused(store, "people")
    assert names() == ["copy"] and (datasets_home() / "objects" / fingerprint).is_dir()  # "copy" still uses it
    delete_unused(store, "copy")
    assert _stored_nothing()
    with pytest.raises(ConfigError, match="`name` must be a stored data set"):
        load_dataset("copy")


def test_a_delete_racing_an_add_of_the_same_content_keeps_the_object_the_new_name_uses(csv_path, monkeypatch):
    add_dataset(_declare("people"), csv_path)
    linking, release = threading.Event(), threading.Event()
    link = storage._link_manifest

    def held_link(*args):  # the add has found the object stored and is about to link its name
        linking.set()
        release.wait(30)
        link(*args)

    monkeypatch.setattr(storage, "_link_manifest", held_link)
    adding = threading.Thread(target=add_dataset, args=(_declare("copy"), csv_path))
    adding.start()
    assert linking.wait(30)
    deleting = threading.Thread(target=storage.delete, args=("people",))
    deleting.start()
    deleting.join(0.5)  # without the lock it would now have removed the object, which no name used yet
    release.set()
    adding.join(30)
    deleting.join(30)
    assert names() == ["copy"] and load_dataset("copy").x.shape[0] == 40


def test_cli_add_list_show_delete_with_json(store, csv_path):
    added = run_cli("data", "add", "people", str(csv_path), "--label", "target", "--classes", "no,yes",
                    "--categorical", "city=oslo,paris,rome", "--public-rows", "8", "--bounds", "*=0:200", "--json")
    assert added.returncode == 0, added.stderr
    document = json.loads(added.stdout)
    assert document["rows"] == 40 and document["public"]["bounds"]["age"]["value"] == [0.0, 200.0]
    assert json.loads(run_cli("data", "list", "--json").stdout)[0]["name"] == "people"
    assert "people: tabular, 40 rows (8 public), classes no, yes" in run_cli("data", "list").stdout
    run_id = store.create_run("toy", {"dataset": "people"})
    shown = run_cli("data", "show", "people", "--json")
    assert json.loads(shown.stdout)["used_by"] == [run_id]
    text = run_cli("data", "show", "people").stdout
    assert "bounds of income: 0.0, 200.0  [declared (bounds)]" in text and f"used by: {run_id}" in text
    address = manifest("people")["fingerprint"]  # the whole content digest is never shown, its first 16 hex are
    for output in (added.stdout, run_cli("data", "list", "--json").stdout, run_cli("data", "list").stdout,
                   shown.stdout, text):
        assert address not in output and address[:16] in output
    assert json.loads(shown.stdout)["address"] == address[:16] and "fingerprint" not in json.loads(shown.stdout)
    refused = run_cli("data", "delete", "people")
    assert refused.returncode == 2 and refused.stdout == ""
    assert refused.stderr.strip().splitlines() == [f"privengine: error: `name` is used by 1 stored run ({run_id}); "
                                                   "delete it first (python -m privengine delete ID)"]
    store.mark_ended(run_id, "finished", summary={})
    store.delete_run(run_id)
    assert json.loads(run_cli("data", "delete", "people", "--json").stdout)["deleted"] == "people"
    assert "no data sets stored yet" in run_cli("data", "list").stdout


def test_cli_add_says_what_the_address_is_not_for_as_the_data_page_does(csv_path):
    from privengine.datasets.describe import stored_message

    added = run_cli("data", "add", "people", str(csv_path), "--label", "target", "--classes", "no,yes",
                    "--categorical", "city=oslo,paris,rome", "--public-rows", "8", "--bounds", "*=0:200")
    assert added.returncode == 0, added.stderr
    first = added.stdout.splitlines()[0]
    assert first == stored_message(manifest("people")) and "not for publishing" in first


def test_cli_refuses_a_bad_file_in_one_line_with_status_2(tmp_path):
    path = tmp_path / "bad.csv"
    _with(_frame(), 4, "age", "old").to_csv(path, index=False)
    done = run_cli("data", "add", "people", str(path), "--label", "target", "--classes", "no,yes",
                   "--categorical", "city=oslo,paris,rome")
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.strip().splitlines() == [
        "privengine: error: `file` column 'age', row 5: must be a number (declare a column of names with categorical "
        "age=a,b,...); got 'old' (rows count data rows from 1, the header not counted)"]
    for flags, words in ((["--bounds", "age=3"], "`bounds` must be COLUMN=LOW:HIGH"),
                         (["--categorical", "city"], "`categorical` must be COLUMN=a,b,c"),
                         (["--public-fraction", "0.1"], "unrecognized arguments: --public-fraction"),
                         (["--public-rows", "many"], "argument --public-rows: invalid int value: 'many'")):
        done = run_cli("data", "add", "people", str(path), "--label", "target", *flags)
        assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1 and words in done.stderr
    assert _stored_nothing()


def test_a_name_that_is_a_path_never_reaches_the_file_system(store, csv_path):
    (datasets_home() / "secret.json").parent.mkdir(parents=True, exist_ok=True)
    (datasets_home() / "secret.json").write_text("{}")
    for action in ("show", "delete"):
        done = run_cli("data", action, "../secret")
        assert done.returncode == 2 and "`name` must be a stored data set (none yet); got '../secret'" in done.stderr
    assert (datasets_home() / "secret.json").exists()
