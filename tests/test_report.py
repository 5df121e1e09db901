"""Reports: a run, a sweep and a comparison as one self-contained HTML file; the CLI's ``report``; the page button.

Runs are written straight into the store (no training), except where a command line is run to check it
reproduces a config: the toy mechanism takes milliseconds.
"""

from __future__ import annotations

import io
import json
import re
import shlex

import pytest
from streamlit.testing.v1 import AppTest

from privengine import cli
from privengine.claims import PrivacyClaim
from privengine.errors import AmbiguousIdError, ConfigError, RunNotFoundError
from privengine.explore import SweepSpec, runner
from privengine.report import build, resolve, run_command
from tests.conftest import ROOT, run_sweep

HOSTILE = '<script>alert("x")</script>'
CONFIG = {"device": "auto", "seed": 3, "replica": 0, "secure_noise": False, "steps": 7, "delay": 0.0, "fail_at": -1,
          "rate": 0.25, "mode": "b", "scales": [0.5], "verbose": False, "extra": 3}
HEADLINE = PrivacyClaim("toy guarantee", 2.5, 1e-5, "Toy RDP accountant (made up for tests)", "add or remove one row",
                        order=8.0, caveats=("The toy caveat the reader must see.",), headline=True)
SIDE = PrivacyClaim("data-dependent (not publishable)", 0.7, 1e-5, "toy data-dependent analysis", "replace one row")


def _finished_run(store, *, config=CONFIG, claims=(SIDE, HEADLINE), extra_summary=None, metric="loss") -> str:
    run_id = store.create_run("toy", config, source="cli")
    store.mark_running(run_id, device="cpu")
    store.add_metrics(run_id, [(s, metric, 1.0 / (s + 1)) for s in range(5)] + [(s, "acc", s / 5) for s in range(5)])
    store.add_log(run_id, "toy run of 7 steps")
    summary = {"steps_done": 7, "score": 0.61, "privacy": [c.to_dict() for c in claims], **(extra_summary or {})}
    store.mark_ended(run_id, "finished", summary=summary)
    return run_id


def _offline(html: str) -> bool:
    """No script, style sheet or font is fetched from the network."""
    return not re.search(r"<(script|link|img|iframe)\b[^>]*\b(src|href)\s*=\s*[\"']?\s*(https?:)?//", html, re.I) \
        and not re.search(r"@import|url\(\s*[\"']?(https?:)?//", html, re.I)


def test_run_report_holds_config_claims_charts_tables_and_the_command(store):
    run_id = _finished_run(store)
    report = build(store, run_id[:6])  # a unique prefix, as the CLI takes it
    assert (report.kind, report.ids, report.filename) == ("run", (run_id,), f"report-{run_id}.html")
    html = report.html
    assert html.startswith("<!DOCTYPE html>") and f"run {run_id}" in html and "finished" in html
    # every knob by label with its value; the ones set away from their defaults in bold
    assert "<td>steps</td><td>--steps</td><td>7</td><td>5</td>" in html
    assert '<tr class="changed"><td>rate</td><td>--rate</td><td>0.25</td><td>0.1</td></tr>' in html
    assert "<tr><td>delay</td><td>--delay</td><td>0</td><td>0</td></tr>" in html
    # the claims: the headline first and marked, with its accountant, order, neighbouring relation, delta, caveats
    assert html.index("ε = 2.5, δ = 1e-05") < html.index("ε = 0.7, δ = 1e-05")
    assert re.search(r'class="claim headline"><div class="statement">ε = 2.5, δ = 1e-05 <span class="mark">'
                     r'· headline</span>', html)
    for text in ("Toy RDP accountant (made up for tests)", "add or remove one row", "<dd>8</dd>", "<dd>1e-05</dd>",
                 "<li>The toy caveat the reader must see.</li>", "toy data-dependent analysis"):
        assert text in html
    # results, charts (plotly inlined once), the log, and the command that reproduces the run
    assert "<td>steps done</td><td>7</td>" in html
    assert html.count('class="plotly-graph-div"') == 2 and html.count("Plotly.newPlot") == 2  # acc, loss
    assert len(html) > 1_000_000 and html.count("plotly.js v") == 1  # the library, inlined exactly once
    assert "toy run of 7 steps" in html
    command = "python -m privengine run toy --seed 3 --steps 7 --rate 0.25 --mode b --scales 0.5"
    assert f"<code>{command}</code>" in html
    assert _offline(html)


def test_the_command_line_reruns_the_same_config(store):
    command = run_command("toy", CONFIG).command
    out = io.StringIO()
    assert cli.main(shlex.split(command)[3:] + ["--json"], stdout=out, stderr=io.StringIO()) == 0
    assert json.loads(out.getvalue())["config"] == CONFIG


def test_user_text_is_escaped(store):
    hostile = PrivacyClaim(HOSTILE, 1.0, 1e-5, f"acc {HOSTILE}", "n & m", caveats=(HOSTILE,), headline=True)
    run_id = _finished_run(store, claims=(hostile,), extra_summary={"note": HOSTILE}, metric=f"<img src=x {HOSTILE}")
    store.add_log(run_id, HOSTILE)
    html = build(store, run_id).html
    assert HOSTILE not in html and "<img src=x" not in html
    assert "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;" in html and "n &amp; m" in html


def test_sweep_report_has_the_frontier_points_claim_and_sweep_command(store):
    sweep_id = run_sweep(store, SweepSpec("toy", base={"steps": 2}, axes={"rate": [0.1, 0.5]}, seeds=2), timeout=30,
                         max_concurrent=1)
    report = build(store, sweep_id)
    html = report.html
    assert (report.kind, report.ids) == ("sweep", (sweep_id,))
    assert "Privacy-utility frontier" in html and html.count('class="plotly-graph-div"') == 1
    assert "<td>varied: 0.1, 0.5</td>" in html  # the varied knob, in the configuration table
    assert "basic composition" in html and "selecting among" in html  # the sweep's composed claim
    for run in store.sweep_runs(sweep_id):
        assert f"<td>{run.id}</td>" in html
    assert "<code>python -m privengine sweep toy --vary rate=0.1,0.5 --seeds 2 --steps 2</code>" in html
    assert _offline(html)


def test_comparison_report_puts_runs_side_by_side(store):
    first = _finished_run(store)
    second = _finished_run(store, config={**CONFIG, "steps": 9})
    report = build(store, f"{first},{second}")
    assert (report.kind, report.ids) == ("comparison", (first, second))
    html = report.html
    assert "Runs side by side" in html and "Curves overlaid" in html
    assert "<th>steps</th>" in html and "<td>9</td>" in html  # the knob that differs, by label
    assert f"run {first}" in html and f"run {second}" in html  # then each run's own report
    assert report.filename == f"report-{first}-{second}.html" and _offline(html)
    with pytest.raises(ConfigError, match="two or more different run ids"):
        resolve(store, f"{first},{first}")


def _chart_layouts(html: str) -> list[dict]:
    """The layout of every chart of a report, as plotly.js gets it (``Plotly.newPlot(id, data, layout, config)``)."""
    decoder, layouts = json.JSONDecoder(), []
    for call in re.finditer(r"Plotly\.newPlot\(\s*", html):
        at = call.end()
        for _ in range(3):  # the div's id, the traces, then the layout
            value, at = decoder.raw_decode(html, at)
            at = re.compile(r"\s*,\s*").match(html, at).end()
        layouts.append(value)
    return layouts


def test_every_report_chart_is_finished_as_the_page_finishes_it(store):
    """The sweep's frontier and a comparison's overlays were drawn unfinished (no toolbar strip, titles whole, log
    axes left to plotly); every chart of a report now has the page's title (a head over a 12 px detail wrapped
    across the report's width), the toolbar's strip above it and log axes ticked in full, and the frontier names
    the accountants of its runs' headline claims, as on the page."""
    from privengine.figures.common import TITLE_WIDTH, TOOLBAR_STRIP
    from privengine.report.html import REPORT_DETAIL_WIDTH
    from tests.test_figures_readability import _dpsgd, _run

    density = {"x": [0.0, 1.0], "reference": [1.0, 1.0], "vi": [1.0, 1.0], "private": [1.0, 1.0], "y_max": 2.0,
               "private_log_sd_ratio": -0.2}
    bayes = [_run(store, "dp_bayes", {"delta": 1e-5}, [(s, "utility", 1.0 + s) for s in range(5)],
                  {"densities": {"beta1": density}}) for _ in range(2)]
    pages = [build(store, ",".join(bayes)).html, build(store, f"{_dpsgd(store)},{_dpsgd(store)}").html]
    sweep_id = run_sweep(store, SweepSpec("toy", base={"steps": 2}, axes={"rate": [0.1, 0.5]}), timeout=30,
                         max_concurrent=1)
    pages.append(build(store, sweep_id).html)
    layouts = [layout for html in pages for layout in _chart_layouts(html)]
    assert len(layouts) >= 10
    split = [layout["title"] for layout in layouts if "subtitle" in layout["title"]]
    assert any(t["text"] == "beta1: posterior densities" for t in split)  # a comparison overlay, split
    assert _chart_layouts(pages[2])[0]["title"]["text"].startswith("Privacy-utility frontier (ε:")
    for layout in layouts:
        title = layout["title"]
        assert (title["pad"]["t"], title["automargin"], title["yref"]) == (TOOLBAR_STRIP, True, "container")
        assert "<br>" not in title["text"] and len(title["text"]) <= TITLE_WIDTH, title["text"]
        detail = title.get("subtitle", {}).get("text", "")
        assert all(len(line) <= REPORT_DETAIL_WIDTH for line in detail.split("<br>")), detail
        assert "<br>" not in detail or len(detail) > REPORT_DETAIL_WIDTH  # one line across the page where it fits
        for name, axis in layout.items():
            if re.fullmatch(r"[xy]axis\d*", name) and axis.get("type") == "log":
                assert "log" in axis["title"]["text"] and ("tickvals" in axis or "dtick" in axis), (title, name)
    assert sum(axis.get("type") == "log" for layout in layouts for axis in layout.values()
               if isinstance(axis, dict)) >= 2  # the DP-SGD overlays' loss and risk


def test_report_charts_carry_their_own_template_whatever_plotly_default_is(store, monkeypatch):
    """Issue 40, item 4: built in the dashboard's process, where Streamlit's template is plotly's default (placeholder
    colours #000001..., no automargin), a report drew every series near-black and cut its tick labels. Each chart
    now carries plotly's light template with a named colorway, every axis has automargin, and the page holds the
    dark template its charts are redrawn in on a dark page (the browser test measures the drawn boxes)."""
    import plotly.io as pio
    import streamlit.elements.plotly_chart  # noqa: F401  (registers Streamlit's template)

    from privengine.figures.theme import COLORWAY

    monkeypatch.setattr(pio.templates, "default", "streamlit")
    html = build(store, _finished_run(store)).html
    layouts = _chart_layouts(html)
    assert len(layouts) == 2
    for layout in layouts:
        assert layout["template"]["layout"]["colorway"] == list(COLORWAY)
        axes = [name for name in layout if re.fullmatch(r"[xy]axis\d*", name)]
        assert axes and all(layout[name]["automargin"] is True for name in axes)
    assert html.count("const PRIVENGINE_DARK_TEMPLATE = ") == 1 and html.count("privengineDarkChart('chart-") == 2


def test_unknown_and_ambiguous_ids(store):
    with pytest.raises(RunNotFoundError, match="no run or sweep with id 'nosuch'"):
        resolve(store, "nosuch")
    ids = [store.create_run("toy", {}) for _ in range(17)]  # 17 ids, 16 hex digits: two share a first one
    shared = next(i[0] for i in ids if sum(j[0] == i[0] for j in ids) > 1)
    with pytest.raises(AmbiguousIdError, match=f"id '{shared}' is ambiguous"):
        resolve(store, shared)


def test_cli_writes_the_file_and_fails_cleanly(store, tmp_path, monkeypatch):
    run_id = _finished_run(store)
    out, err = io.StringIO(), io.StringIO()
    target = tmp_path / "out" / "r.html"
    target.parent.mkdir()
    assert cli.main(["report", run_id, "--output", str(target)], stdout=out, stderr=err) == 0
    assert out.getvalue().strip() == str(target) and "ε = 2.5" in target.read_text(encoding="utf-8")
    assert [p.name for p in target.parent.iterdir()] == ["r.html"]  # no temporary file left behind

    monkeypatch.chdir(tmp_path)
    out = io.StringIO()
    assert cli.main(["report", run_id, "--format", "html"], stdout=out, stderr=err) == 0
    assert (tmp_path / f"report-{run_id}.html").is_file() and out.getvalue().strip() == f"report-{run_id}.html"

    err = io.StringIO()
    assert cli.main(["report", "deadbeef"], stdout=io.StringIO(), stderr=err) == 2
    assert err.getvalue() == "privengine: error: no run or sweep with id 'deadbeef' in the store\n"
    assert not (tmp_path / "report-deadbeef.html").exists()


def test_cli_refuses_an_unknown_format(capsys):
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["report", "abc", "--format", "pdf"])
    assert exit_info.value.code == 2
    assert "invalid choice: 'pdf'" in capsys.readouterr().err


def _toy_page(root_path: str):
    import sys

    sys.path.insert(0, root_path)
    from tests import toy_mechanism  # noqa: F401
    from ui.mechanism_page import render_mechanism_page

    render_mechanism_page("toy")


def test_the_run_view_offers_the_report(store):
    run_id = _finished_run(store)
    at = AppTest.from_function(_toy_page, kwargs={"root_path": str(ROOT)}, default_timeout=60)
    at.query_params["run"] = run_id
    at.run()
    assert not at.exception, [e.message for e in at.exception]
    assert [b.proto.label for b in at.get("download_button")] == ["Report (HTML)"]
