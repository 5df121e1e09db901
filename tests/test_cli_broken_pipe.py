"""``python -m privengine ... | head``: a reader that closes stdout early ends the command quietly (status 141, nothing
on stderr), on the plain path and on the ``--json`` path, which writes its document to a duplicate of stdout."""

import os
import subprocess
import sys

import pytest

from tests.conftest import ROOT, subprocess_env


@pytest.mark.slow
@pytest.mark.parametrize("args", [("list",), ("list", "--json")])
def test_a_closed_stdout_ends_the_command_quietly(args, private_home):
    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader has gone before the first write: every write to the pipe fails (EPIPE)
    try:
        done = subprocess.run([sys.executable, "-m", "privengine", *args], cwd=ROOT, stdout=write_end,
                              stderr=subprocess.PIPE, text=True, timeout=120,
                              env=subprocess_env(PRIVENGINE_HOME=str(private_home)))
    finally:
        os.close(write_end)
    assert (done.returncode, done.stderr) == (141, "")
