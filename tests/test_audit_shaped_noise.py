"""The shaped-noise chart (privengine.figures.audit.shaped_noise) and its sweep script (scripts/audit_shaped_noise.py):
one stored dpsgd-one-run audit per canary space, the measured table on stdout, the chart written."""

from __future__ import annotations

import importlib.util

import pytest

from privengine.figures.audit import shaped_noise
from tests.conftest import ROOT


def _script():
    spec = importlib.util.spec_from_file_location("audit_shaped_noise", ROOT / "scripts" / "audit_shaped_noise.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_one_line_per_canary_space_against_alpha_and_the_shared_claim():
    rows = [{"canary_space": space, "alpha": a, "epsilon_lower": lower, "claimed_epsilon": 3.0}
            for space, lowers in (("outside", (0.9, 0.4, 0.1)), ("inside", (0.8, 0.8, 0.7)))
            for a, lower in zip((4.0, 0.0, 16.0), lowers)]
    fig = shaped_noise(rows)
    lines = {t.name: (list(t.x), list(t.y)) for t in fig.data}
    assert lines == {"audited ε ≥, canaries outside span(U)": ([0.0, 4.0, 16.0], [0.4, 0.9, 0.1]),
                     "audited ε ≥, canaries inside span(U)": ([0.0, 4.0, 16.0], [0.8, 0.8, 0.7])}
    claims = [s.y0 for s in fig.layout.shapes]
    assert claims == [3.0]  # every alpha has isotropic DP-SGD's claim: drawn once


def test_the_sweep_script_stores_one_audit_per_space_and_prints_the_table(tmp_path, capsys, store):
    out = tmp_path / "chart.html"
    code = _script().main(["--alphas", "0,4", "--canaries", "200", "--guesses", "40", "--epochs", "1",
                           "--noise-multiplier", "1", "--accountant", "rdp", "--data", "zero", "--output", str(out)])
    assert code == 0
    table = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| inside")
             or line.startswith("| outside")]
    assert [line.split(" | ")[:2] for line in table] == [["| inside", "0"], ["| inside", "4"], ["| outside", "0"],
                                                        ["| outside", "4"]]
    runs = store.list_runs(mechanism="dpsgd-one-run")
    assert sorted(r.config["canary_space"] for r in runs) == ["inside", "outside"]
    assert all(r.state == "finished" and r.config["alphas"] == [0.0, 4.0] for r in runs)
    assert "canaries inside span(U)" in out.read_text() and "canaries outside span(U)" in out.read_text()


def test_bad_input_names_the_field():
    from privengine.errors import ConfigError

    with pytest.raises(ConfigError, match="`alphas`"):
        _script().main(["--alphas", "-3", "--output", "x.html"])
