"""A new process that starts the CLI (``python -m privengine ...``) and lists the mechanisms imports none of the
heavy libraries: each command imports what it uses. The ledger's and the PATE events' modules once imported
dp-accounting, torch and Opacus at every start (seconds per command; bench/bench_startup.py times it)."""

import json
import subprocess
import sys

import pytest

from tests.conftest import ROOT

HEAVY = ("torch", "opacus", "dp_accounting", "scipy.stats", "scipy.signal", "sklearn", "plotly", "pandas")


def test_starting_the_cli_and_the_registry_imports_no_heavy_library():
    code = ("import json, sys, privengine.cli, privengine.mechanisms; "
            f"print(json.dumps([m for m in {HEAVY!r} if m in sys.modules]))")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.strip().splitlines()[-1]) == []


@pytest.mark.slow
def test_reading_stored_claims_imports_neither_torch_nor_opacus():
    """The ledger and ``show`` read stored claims: they name Opacus' accountants (privengine.accounting.opacus_names)
    without loading Opacus, whose import brings torch (``show`` took 4.9 s of a new process where it takes 1.5)."""
    code = ("import json, sys, privengine.ledger.ledger, privengine.ledger.upgrade, privengine.figures.membership; "
            "print(json.dumps([m for m in ('torch', 'opacus') if m in sys.modules]))")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.strip().splitlines()[-1]) == []
