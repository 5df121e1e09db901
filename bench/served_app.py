"""The dashboard served for a benchmark or a browser test: ``streamlit run app.py`` on a free local port."""

from __future__ import annotations

import contextlib
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Iterator, Mapping

ROOT = Path(__file__).resolve().parents[1]


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listened on a moment ago."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def served_app(home: Path, env: Mapping[str, str], *streamlit_args: str,
               start_timeout_s: float = 60) -> Iterator[tuple[str, int]]:
    """Serve app.py with environment ``env`` (its PRIVENGINE_HOME is the caller's) and extra ``streamlit_args``;
    yields (URL, server pid) once its health check answers (which starts no session: the first page opened is the
    server's first request). Its output goes to ``home / "streamlit.log"``, quoted if it does not start in
    ``start_timeout_s``; the server is terminated on exit."""
    port = free_port()
    log_path = home / "streamlit.log"
    with open(log_path, "w") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "streamlit", "run", "app.py", "--server.port", str(port),
             "--server.address", "127.0.0.1", "--server.headless", "true", *streamlit_args],
            cwd=ROOT, env=dict(env), stdout=log, stderr=subprocess.STDOUT)
        url = f"http://127.0.0.1:{port}"
        try:
            deadline = time.monotonic() + start_timeout_s
            while True:
                try:
                    with urllib.request.urlopen(url + "/_stcore/health", timeout=2) as r:
                        if r.status == 200:
                            break
                except OSError:
                    if proc.poll() is not None or time.monotonic() > deadline:
                        raise RuntimeError(f"streamlit did not start: {log_path.read_text()}")
                    time.sleep(0.3)
            yield url, proc.pid
        finally:
            proc.terminate()
            proc.wait(timeout=15)
