"""The model download button: the run's kept models with their card, as ``python -m privengine export ID --format
model`` writes them, zipped (:func:`privengine.report.model_export.model_zip`)."""

from __future__ import annotations

import functools

import streamlit as st

from privengine.report.model_export import model_zip
from privengine.store import RunRecord

from . import services


def model_button(run: RunRecord, *, key: str) -> None:
    """Download the models run ``run`` kept (nothing shown while it is active or when it kept none); the zip is
    built when the button is clicked, not on every rerun."""
    store = services.store()
    if run.active or not store.kept_models(run.id):
        return
    st.download_button("Model (zip)", functools.partial(model_zip, store, run.id), file_name=f"model-{run.id}.zip",
                       mime="application/zip", key=key, icon=":material/download:",
                       help="The trained model(s) as safetensors with their architecture, and the model card (JSON "
                            "and Markdown): recipe, data, metrics, every privacy claim and its caveats. Load it with "
                            "python -m privengine predict --model DIR --data FILE.")
