"""The dashboard on a GPU (issue 39, item 3): the DP-SGD page, driven by Streamlit's AppTest (no browser), launches
the Fashion-MNIST preset on CUDA; while the run trains its page draws the live charts with points in them, and
the run states the device it ran on.

It needs a CUDA device and the real Fashion-MNIST files (the data root): elsewhere it skips, saying which is
missing. ``bench/device_check.sh`` runs it on the GPU machine (step ``dashboard_cuda``).
"""

from __future__ import annotations

import json
import time

import pytest

from privengine.data_catalogue import dataset_present
from tests.conftest import ROOT

torch = pytest.importorskip("torch")
AppTest = pytest.importorskip("streamlit.testing.v1").AppTest

PAGE = str(ROOT / "pages" / "dpsgd.py")
PRESET = "fmnist-scatter-eps3"
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (the GPU machine's check)"),
    pytest.mark.skipif(not dataset_present("fashion_mnist"), reason="needs the real Fashion-MNIST files in the "
                                                                   "data root (PRIVENGINE_DATA)"),
    pytest.mark.filterwarnings("ignore:Full backward hook is firing"),
]


def _page(**query) -> AppTest:
    at = AppTest.from_file(PAGE, default_timeout=120)
    for key, value in query.items():
        at.query_params[key] = value
    return at.run()


def _points(at: AppTest) -> int:
    """How many data points the page's plotly charts draw, over all their traces."""
    total = 0
    for chart in at.get("plotly_chart"):
        for trace in json.loads(chart.proto.spec).get("data", []):
            total += len(trace.get("x") or trace.get("y") or [])
    return total


def _status(at: AppTest, run_id: str) -> str:
    """The page's own status line of the run (``Run **ID** ...``)."""
    return next((m.value for m in at.markdown if f"Run **{run_id}**" in m.value), "")


def test_the_preset_launched_from_its_page_trains_on_cuda_with_live_charts(store):
    """Launch ``?preset=fmnist-scatter-eps3`` with its epochs tripled (120: the σ is calibrated to ε 3 for them),
    so that the run trains for several page renders (the preset alone trains for about 2 s on an H200); render the
    run's page until one render both says "running" and draws points; then the run finishes on a CUDA device
    and its page says so."""
    at = _page(preset=PRESET, config=json.dumps({"epochs": 120.0}))
    assert not at.exception, [e.message for e in at.exception]
    at.button(key="launch.dpsgd").click().run()
    assert not at.exception, [e.message for e in at.exception]
    run_id = at.query_params["run"]
    run_id = run_id[0] if isinstance(run_id, list) else run_id
    live_renders, deadline = [], time.monotonic() + 300
    while store.get_run(run_id).active and time.monotonic() < deadline:
        view = _page(run=run_id)
        assert not view.exception, [e.message for e in view.exception]
        status = _status(view, run_id)
        if "running" in status and _points(view) > 0:
            live_renders.append((status, _points(view)))
        time.sleep(0.2)
    record = store.get_run(run_id)
    assert record.state == "finished", record.traceback
    assert record.device.startswith("CUDA GPU"), record.device
    assert live_renders, "no render of the run's page showed points while the run was running"
    done = _page(run=run_id)
    assert not done.exception, [e.message for e in done.exception]
    assert f"on {record.device}" in _status(done, run_id)
    assert _points(done) >= max(points for _, points in live_renders)  # the curves only grow
