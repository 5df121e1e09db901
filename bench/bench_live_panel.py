"""Benchmark: what watching a run in the dashboard costs (issue 36). A quick demo is launched from its link
(``/<mechanism>?preset=quick-demo&launch=1``) in headless Chromium against a served app, and timed from the link to
its "finished" state line; the server's CPU time over that span is read from /proc (training, the live panel's
reruns each second, Streamlit's own work).

Two servers, each started for its case, the cases alternating ``--repeats`` times:

  baseline   Streamlit's default, a full garbage collection after every script run (``--runner.postScriptGC true``)
  project    the project's .streamlit/config.toml (``postScriptGC = false``)

and prints, per case, the median wall and server CPU, and the ratios project / baseline. Linux only (/proc); needs
Chromium (``CHROMIUM``, default /usr/bin/chromium) and Playwright, as the browser tests do.

Run: python bench/bench_live_panel.py [--mechanism dp_bayes] [--repeats 3]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.served_app import served_app  # noqa: E402

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
CASES = {"baseline": ["--runner.postScriptGC", "true"], "project": []}


def process_cpu_s(pid: int) -> float:
    """CPU seconds (user + system) process ``pid`` has used so far, its waited-for children included."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return sum(int(f) for f in fields[11:15]) / CLOCK_TICKS


@contextlib.contextmanager
def fresh_app(extra_args: list[str]):
    """The app served (:func:`bench.served_app.served_app`) with a fresh PRIVENGINE_HOME; yields (url, pid)."""
    with tempfile.TemporaryDirectory(prefix="bench-live-") as home:
        env = dict(os.environ, PRIVENGINE_HOME=home, PYTHONPATH=str(ROOT))
        with served_app(Path(home), env, *extra_args, start_timeout_s=90) as served:
            yield served


def one_demo(browser, url: str, server_pid: int, mechanism: str) -> tuple[float, float]:
    """Launch ``mechanism``'s quick demo from its link and wait for it to finish: (wall s, server CPU s)."""
    page = browser.new_page(viewport={"width": 1280, "height": 720})
    page.goto(url)
    page.wait_for_selector("[data-testid='stApp']")
    time.sleep(2)  # the first session's script run is not the demo's cost
    cpu0, t0 = process_cpu_s(server_pid), time.perf_counter()
    page.goto(f"{url}/{mechanism}?preset=quick-demo&launch=1")
    page.wait_for_url("**run=*", timeout=60_000)
    page.get_by_text("finished").first.wait_for(timeout=600_000)
    wall, cpu = time.perf_counter() - t0, process_cpu_s(server_pid) - cpu0
    page.close()
    return wall, cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mechanism", default="dp_bayes", help="a mechanism with a quick-demo preset")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    from playwright import sync_api

    results: dict[str, list[tuple[float, float]]] = {case: [] for case in CASES}
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=os.environ.get("CHROMIUM", "/usr/bin/chromium"),
                                    args=["--headless", "--no-sandbox", "--disable-gpu"])
        for _ in range(args.repeats):
            for case, extra in CASES.items():
                with fresh_app(extra) as (url, pid):
                    results[case].append(one_demo(browser, url, pid, args.mechanism))
        browser.close()
    medians = {case: (statistics.median(w for w, _ in r), statistics.median(c for _, c in r))
               for case, r in results.items()}
    for case, (wall, cpu) in medians.items():
        print(f"{case:9s} {args.mechanism} quick demo from its link: wall {wall:5.1f} s, server CPU {cpu:5.1f} s "
              f"(median of {args.repeats})")
    (bw, bc), (pw, pc) = medians["baseline"], medians["project"]
    print(f"ratio project / baseline: wall {pw / bw:.2f}, server CPU {pc / bc:.2f}")


if __name__ == "__main__":
    main()
