"""A fresh dashboard process draws its Home, Runs and Ledger pages without importing torch or Opacus (issue 36):
they draw no tensor, and those imports cost a new Streamlit server 3-4 s of CPU before its first page (the Home
page once reached them through ui.form -> privengine.data, ui.runs_table -> ui.membership_panel ->
privengine.audit.membership_stored and its device caption; the Ledger page through the PATE source's data seed).

The pages are drawn by Streamlit's AppTest in one child process, in this order; a finder placed first on
``sys.meta_path`` notes the project's frames (file:line) that imported torch or Opacus first, so a failure names the
page and the chain of imports."""

import json
import subprocess
import sys

import pytest

from privengine.claims import PrivacyClaim
from tests.conftest import ROOT

PAGES = ("pages/home.py", "pages/runs.py", "pages/ledger.py")
CHILD = f"""
import json, os, sys, traceback
HEAVY, ROOT, first = ("torch", "opacus"), {str(ROOT)!r}, {{}}


class FirstImport:
    def find_spec(self, name, path=None, target=None):  # finds nothing: notes who imports a heavy module first
        if name in HEAVY and name not in first:
            first[name] = [f"{{os.path.relpath(f.filename, ROOT)}}:{{f.lineno}}" for f in traceback.extract_stack()
                           if f.filename.startswith(ROOT) and "site-packages" not in f.filename]
        return None


sys.meta_path.insert(0, FirstImport())
from streamlit.testing.v1 import AppTest

drawn = {{}}
for page in {PAGES!r}:
    at = AppTest.from_file(os.path.join(ROOT, "app.py"), default_timeout=120)
    if page != "pages/home.py":
        at.switch_page(page)
    at.run()
    drawn[page] = {{"exceptions": [e.message for e in at.exception], "first_imports": dict(first)}}
print(json.dumps(drawn))
"""


@pytest.mark.slow
def test_the_home_runs_and_ledger_pages_import_neither_torch_nor_opacus(store):
    """With a finished DP-SGD run (a headline claim) and a membership attack of it in the store, so the runs tables
    link both and the ledger has a source to show."""
    claim = PrivacyClaim("DP-SGD", 1.5, 1e-5, "Opacus PRV accountant", "add/remove one", headline=True)
    run = store.create_run("dpsgd", {})
    store.mark_ended(run, "finished", summary={"privacy": [claim.to_dict()]})
    attack = store.create_run("dpsgd-membership", {"run": run})
    store.mark_ended(attack, "finished", summary={})
    done = subprocess.run([sys.executable, "-c", CHILD], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    drawn = json.loads(done.stdout.strip().splitlines()[-1])
    for page in PAGES:
        assert drawn[page]["exceptions"] == [], page
        chains = {module: " -> ".join(frames) for module, frames in drawn[page]["first_imports"].items()}
        assert not chains, f"drawing {page} imported {', '.join(chains)}; first by: {chains}"
