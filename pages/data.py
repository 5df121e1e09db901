"""Data: your own data sets. Upload a table (CSV, Parquet) or a zip of image class folders, see a preview, declare
its public facts and add it, with the checks and messages of ``python -m privengine data add`` (fields named by
their labels here); below, the stored data sets with their schema, content address and public facts, a link to each
mechanism form that trains on them (the data set chosen), and delete (refused while stored runs use one)."""

import tempfile
from pathlib import Path

import pandas as pd
import streamlit as st

from privengine import registry
from privengine.config import BaseConfig
from privengine.datasets import (DEFAULT_MAX_BYTES, DEFAULT_MIN_ROWS, Declaration, add_dataset, delete_unused,
                                 manifest, names, parse_bounds, parse_categorical, parse_list, referencing_runs)
from privengine.datasets.builtin import builtin_names
from privengine.datasets.describe import ADDRESS_NOTE, address, fact_rows, stored_message
from privengine.datasets.images import preview
from privengine.datasets.tabular import head
from privengine.errors import ConfigError
from ui import services
from ui.form import error_text
from ui.links import link_to_mechanism
from ui.shell import through_app

FIELDS = {"file": "File", "name": "Name", "kind": "Kind", "label": "Label column", "classes": "Classes",
          "public_rows": "Public rows", "private_size": "Private size N",
          "categorical": "Categorical columns", "bounds": "Bounds", "max_bytes": "Largest file (bytes)",
          "min_rows": "Fewest private rows"}
PUBLIC_NOTE = ("**Public facts come from you, never from the private rows.** The class list, category lists, feature "
               "bounds and the size used for sampling are published with every result: declare them here, or let them "
               "come from the public rows (the file's first rows) you declare. Nothing is read from the private rows "
               "to fill them in, and each stored fact says where it came from.")


def _train_links(name: str) -> None:
    """A link to each mechanism page whose data set choice takes stored data sets, its form seeded with ``name``
    and the values that fit it (:meth:`~privengine.config.BaseConfig.user_dataset_seed`); where none fit, why."""
    for mech in registry.all_mechanisms():
        config_cls = mech.config_cls
        if not any(spec.knob.user_datasets for spec in config_cls.specs()):
            continue
        try:
            seed = config_cls.user_dataset_seed(name)
        except ConfigError as exc:
            st.caption(f"{mech.title} cannot train on {name}: {error_text(exc, config_cls)}")
        else:
            link_to_mechanism(mech.name, f"Train on {name}: {mech.title}", config=seed)


def _show_error(exc: ConfigError) -> None:
    st.error(error_text(exc, BaseConfig, FIELDS), icon=":material/error:")


def _declaration(values: dict) -> Declaration:
    """The form's values as a Declaration (0 and empty mean "not declared")."""
    lines = {k: [line.strip() for line in values[k].splitlines() if line.strip()] for k in ("categorical", "bounds")}
    return Declaration(values["name"].strip(), label=values["label"].strip() or None,
                       classes=parse_list("classes", values["classes"]) if values["classes"].strip() else None,
                       public_rows=int(values["public_rows"]) or None,
                       private_size=int(values["private_size"]) or None,
                       categorical=parse_categorical(lines["categorical"]), bounds=parse_bounds(lines["bounds"]),
                       max_bytes=int(values["max_bytes"]), min_rows=int(values["min_rows"]))


def _preview(path: Path) -> None:
    """The head of a table, or the first images of each class."""
    try:
        if path.suffix.lower() == ".zip":
            for name, images in preview(path, Declaration("preview")).items():
                st.caption(f"class **{name}**")
                st.image(images, width=96)
        else:
            st.dataframe(head(path), hide_index=True)
    except ConfigError as exc:
        _show_error(exc)


def _add_form(path: Path) -> None:
    is_table = path.suffix.lower() != ".zip"
    with st.form("data.add"):
        c1, c2 = st.columns(2)
        values = {"name": c1.text_input(FIELDS["name"], value=path.stem.replace(" ", "-")[:64],
                                        help="Letters, digits, _ . -; how runs and the CLI name it.")}
        values["label"] = c2.text_input(FIELDS["label"], disabled=not is_table,
                                        help="A table's label column (images: their class folders).")
        values["classes"] = c1.text_input(FIELDS["classes"], disabled=not is_table, placeholder="0,1",
                                          help="The public class list, comma-separated (e.g. 0,1); empty: the labels "
                                               "of the public rows.")
        values["private_size"] = c2.number_input(FIELDS["private_size"], min_value=0, value=0, step=1,
                                                 help="The private part's size declared public, used for sampling and "
                                                      "accounting; 0: not declared.")
        values["public_rows"] = c1.number_input(FIELDS["public_rows"], min_value=0, value=0, step=1,
                                                help="The first N rows (images) are public; 0: none.")
        values["categorical"] = c1.text_area(FIELDS["categorical"], disabled=not is_table,
                                             placeholder="city=oslo,paris,rome",
                                             help="One COLUMN=a,b,c per line: the column's public category list.")
        values["bounds"] = c2.text_area(FIELDS["bounds"], disabled=not is_table, placeholder="age=0:120\n*=-5:5",
                                        help="One COLUMN=LOW:HIGH per line (*=LOW:HIGH: every other numeric column); "
                                             "empty: the public rows' range, else none.")
        values["max_bytes"] = c1.number_input(
            FIELDS["max_bytes"], min_value=1, value=DEFAULT_MAX_BYTES, step=1,
            help=f"A larger file is refused before anything is stored (default {DEFAULT_MAX_BYTES} = "
                 f"{DEFAULT_MAX_BYTES // 2 ** 20} MiB). This page's upload takes at most "
                 f"{st.get_option('server.maxUploadSize')} MB; add a larger file with python -m privengine data add.")
        values["min_rows"] = c2.number_input(FIELDS["min_rows"], min_value=2, value=DEFAULT_MIN_ROWS, step=1,
                                             help="A file with fewer private rows (images) than this is refused.")
        submitted = st.form_submit_button("Add data set", icon=":material/add:")
    if submitted:
        try:
            document = add_dataset(_declaration(values), path, reserved=builtin_names())
        except ConfigError as exc:
            _show_error(exc)
        else:
            st.success(stored_message(document), icon=":material/check:")
            _train_links(document["name"])


def _stored(store) -> None:
    stored = [manifest(name) for name in names()]
    if not stored:
        st.info("No data set stored yet. Upload one above, or `python -m privengine data add NAME PATH --label "
                "COLUMN`.", icon=":material/info:")
        return
    st.dataframe(pd.DataFrame([{"name": d["name"], "kind": d["kind"], "rows": d["rows"],
                                "public rows": d["public"]["public_rows"]["value"],
                                "classes": ", ".join(d["public"]["classes"]["value"]),
                                "address": address(d), "file": d["file"]} for d in stored]),
                 hide_index=True)
    for document in stored:
        with st.expander(f"{document['name']}: schema and public facts"):
            st.caption(f"address {address(document)} ({ADDRESS_NOTE}); columns: "
                       + ", ".join(f"{c['name']} ({c['role']})" for c in document["schema"]["columns"]))
            st.dataframe(pd.DataFrame(fact_rows(document)), hide_index=True)
            runs = referencing_runs(store, document["name"])
            st.caption(f"used by {len(runs)} stored runs" if runs else "used by no stored run")
            _train_links(document["name"])
    c1, c2 = st.columns([3, 1], vertical_alignment="bottom")
    doomed = c1.selectbox("Data set to delete", [d["name"] for d in stored], key="data.delete.name")
    if c2.button("Delete", icon=":material/delete:", key="data.delete"):
        try:
            delete_unused(store, doomed)
        except ConfigError as exc:
            _show_error(exc)
        else:
            st.toast(f"Deleted data set {doomed}")
            st.rerun()


through_app()
st.title("Data")
st.markdown(PUBLIC_NOTE)
upload = st.file_uploader("Add a table (CSV, Parquet) or a zip of image class folders", type=["csv", "parquet", "zip"],
                          key="data.file")
if upload is not None:
    with tempfile.TemporaryDirectory() as folder:
        uploaded = Path(folder) / Path(upload.name).name
        uploaded.write_bytes(upload.getvalue())
        st.subheader("Preview")
        _preview(uploaded)
        _add_form(uploaded)
st.subheader("Stored data sets")
_stored(services.store())
