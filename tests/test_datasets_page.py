"""The Data page (Streamlit AppTest): a good CSV uploaded, previewed and added; a bad one refused with the message the
CLI gives, its field named by the form's label, nothing stored; delete refused while a stored run uses a data set."""

from __future__ import annotations

import numpy as np
import pandas as pd
from streamlit.testing.v1 import AppTest

from privengine.datasets import load_dataset, manifest, names
from privengine.datasets.describe import stored_message
from tests.conftest import ROOT

APP = str(ROOT / "app.py")


def _page() -> AppTest:
    at = AppTest.from_file(APP, default_timeout=60)
    at.switch_page("pages/data.py")
    return at.run()


def _csv(bad: bool = False) -> bytes:
    rng = np.random.default_rng(1)
    frame = pd.DataFrame({"x1": rng.normal(size=30), "x2": rng.normal(size=30), "y": [0, 1] * 15})
    if bad:
        frame = frame.astype({"x2": object})
        frame.loc[11, "x2"] = "n/a?"
    return frame.to_csv(index=False).encode()


def _upload(at: AppTest, name: str, content: bytes) -> AppTest:
    at.file_uploader(key="data.file").set_value((name, content, "text/csv"))
    return at.run()


def _submit(at: AppTest, **fields) -> AppTest:
    for label, value in fields.items():
        widget = next(w for w in [*at.text_input, *at.number_input] if w.label == label)
        widget.set_value(value)
    at.button[0].click()  # the form's submit button comes first
    return at.run()


def test_a_good_csv_is_previewed_and_added_and_listed(store):
    at = _page()
    assert not at.exception and at.title[0].value == "Data"
    assert any("never from the private rows" in m.value for m in at.markdown)
    assert any("No data set stored yet" in i.value for i in at.info)
    at = _upload(at, "cohort.csv", _csv())
    assert at.dataframe[0].value.columns.tolist() == ["x1", "x2", "y"] and len(at.dataframe[0].value) == 10
    at = _submit(at, **{"Label column": "y", "Classes": "0,1", "Public rows": 5})
    assert not at.exception and not at.error, [e.value for e in at.error]
    assert any("Stored cohort: tabular, 30 rows (5 public), classes 0, 1" in s.value for s in at.success)
    (stored,) = [s.value for s in at.success]  # the text data add prints, with what the address is not for
    assert stored == stored_message(manifest("cohort")) and "not for publishing" in stored
    assert names() == ["cohort"] and load_dataset("cohort").public_rows == 5
    assert at.dataframe[1].value["name"].tolist() == ["cohort"]


def test_a_bad_csv_is_refused_naming_the_column_and_row_and_nothing_is_stored(store):
    at = _upload(_page(), "cohort.csv", _csv(bad=True))
    at = _submit(at, **{"Label column": "y", "Classes": "0,1"})
    assert not at.exception
    assert [e.value for e in at.error] == ["**File** column 'x2', row 12: must be a number (declare a column of names "
                                           "with categorical x2=a,b,...); got 'n/a?' (rows count data rows from 1, "
                                           "the header not counted)"]
    assert names() == []
    at = _submit(at, **{"Label column": "y", "Classes": "0"})
    assert [e.value for e in at.error] == ["**Classes** must hold at least 2 names, none empty; got '0'"]


def test_delete_is_refused_while_a_run_uses_the_data_set(store):
    at = _submit(_upload(_page(), "cohort.csv", _csv()), **{"Label column": "y", "Classes": "0,1"})
    run_id = store.create_run("toy", {"dataset": "cohort"})
    at = _page()
    at.button(key="data.delete").click()
    at.run()
    assert [e.value for e in at.error] == [f"**Name** is used by 1 stored run ({run_id}); delete it first "
                                           "(python -m privengine delete ID)"]
    store.mark_ended(run_id, "finished", summary={})
    store.delete_run(run_id)
    at.button(key="data.delete").click()
    at.run()
    assert names() == [] and not at.error


def test_a_zip_of_class_folders_is_previewed_as_images_per_class(store, tmp_path):
    import io
    import zipfile

    from PIL import Image

    content = io.BytesIO()
    with zipfile.ZipFile(content, "w") as archive:
        for name in ("cat", "dog"):
            for i in range(6):
                image = io.BytesIO()
                Image.new("L", (8, 8), color=40 * i).save(image, format="PNG")
                archive.writestr(f"{name}/{i}.png", image.getvalue())
    at = _page()
    at.file_uploader(key="data.file").set_value(("pets.zip", content.getvalue(), "application/zip"))
    at = _submit(at.run(), **{"Fewest private rows": 4})
    assert not at.exception and not at.error, [e.value for e in at.error]
    assert [c.value for c in at.caption if c.value.startswith("class ")] == ["class **cat**", "class **dog**"]
    assert len(at.get("image")) == 2
    assert load_dataset("pets").x.shape == (12, 3, 8, 8)  # no public image to show they are grey: RGB
