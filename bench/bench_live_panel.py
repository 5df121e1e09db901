"""Benchmark: what watching a run in the dashboard costs (issue 36). A quick demo is launched from its link
(``/<mechanism>?preset=quick-demo&launch=1``) in headless Chromium against a served app, and timed from the link to
its "finished" state line; the server's CPU time over that span is read from /proc (training, the live panel's
reruns each second, Streamlit's own work).

Two servers, each started for its case, the cases alternating ``--repeats`` times:

  baseline   Streamlit's default, a full garbage collection after every script run (``--runner.postScriptGC true``)
  project    the project's .streamlit/config.toml (``postScriptGC = false``)

and prints, per case, the median wall and server CPU, and the ratios project / baseline. Linux only (/proc); needs
Chromium (``CHROMIUM``, default /usr/bin/chromium) and Playwright, as the browser tests do.

``--watching``: what watching the run costs instead, on one server with the project's config (after one untimed
demo), two cases alternating:

  away       the link is opened, then the browser goes to Home at once, and the run is waited for in the store
  watched    the run's page stays open, its live panel redrawing each second, until "finished"

printing wall, server CPU and Chromium's CPU (every Chromium process, with the renderers it reaped), and the ratios
watched / away. On two cores the browser's redraws compete with the training for the CPU.

Run: python bench/bench_live_panel.py [--mechanism dp_bayes] [--repeats 3] [--watching]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import sys
import tempfile
import time
import urllib.parse
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
    """The app served (:func:`bench.served_app.served_app`) with a fresh PRIVENGINE_HOME; yields (url, pid,
    home)."""
    with tempfile.TemporaryDirectory(prefix="bench-live-") as home:
        env = dict(os.environ, PRIVENGINE_HOME=home, PYTHONPATH=str(ROOT))
        with served_app(Path(home), env, *extra_args, start_timeout_s=90) as (url, pid):
            yield url, pid, Path(home)


def chromium_cpu_s() -> float:
    """CPU seconds every live Chromium process has used so far, with its waited-for children (the renderers a
    closed page leaves are reaped by a live Chromium process, so their time stays counted)."""
    total = 0.0
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if b"chrom" in Path(f"/proc/{pid}/cmdline").read_bytes():
                total += process_cpu_s(int(pid))
        except OSError:  # the process ended meanwhile
            continue
    return total


def demo_from_link(browser, url: str, server_pid: int, mechanism: str, *,
                   away_store: Path | None = None) -> tuple[float, float, float]:
    """Launch ``mechanism``'s quick demo from its link and watch its page to "finished", or with ``away_store`` (the
    served app's runs database) leave it for Home at once and wait for the run there: (wall s, server CPU s,
    Chromium CPU s)."""
    from privengine.store import RunStore

    page = browser.new_page(viewport={"width": 1280, "height": 720})
    page.goto(url)
    page.wait_for_selector("[data-testid='stApp']")
    time.sleep(2)  # the first session's script run is not the demo's cost
    cpu0, chromium0, t0 = process_cpu_s(server_pid), chromium_cpu_s(), time.perf_counter()
    page.goto(f"{url}/{mechanism}?preset=quick-demo&launch=1")
    page.wait_for_url("**run=*", timeout=60_000)
    if away_store is None:
        page.get_by_text("finished").first.wait_for(timeout=600_000)
    else:
        run_id = urllib.parse.parse_qs(urllib.parse.urlparse(page.url).query)["run"][0]
        page.goto(url)
        store = RunStore(away_store)
        while store.get_run(run_id).active:
            time.sleep(0.2)
        store.close()
    result = (time.perf_counter() - t0, process_cpu_s(server_pid) - cpu0, chromium_cpu_s() - chromium0)
    page.close()
    return result


def compare_watching(browser, mechanism: str, repeats: int) -> None:
    """The ``--watching`` cases (module docstring), alternating on one server, and their medians and ratios."""
    results: dict[str, list[tuple[float, ...]]] = {"away": [], "watched": []}
    with fresh_app(CASES["project"]) as (url, pid, home):
        demo_from_link(browser, url, pid, mechanism)  # untimed: the server's first run loads what every run reuses
        for _ in range(repeats):
            for case in results:
                away = None if case == "watched" else home / "runs.sqlite"
                results[case].append(demo_from_link(browser, url, pid, mechanism, away_store=away))
    medians = {case: [statistics.median(column) for column in zip(*r)] for case, r in results.items()}
    for case, (wall, server, chromium) in medians.items():
        print(f"{case:8s} {mechanism} quick demo from its link: wall {wall:5.1f} s, server CPU {server:5.1f} s, "
              f"Chromium CPU {chromium:5.1f} s (median of {repeats})")
    (aw, asv, ac), (ww, wsv, wc) = medians["away"], medians["watched"]
    print(f"ratio watched / away: wall {ww / aw:.2f}, server CPU {wsv / asv:.2f}, Chromium CPU {wc / ac:.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mechanism", default="dp_bayes", help="a mechanism with a quick-demo preset")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--watching", action="store_true", help="watched against away (module docstring)")
    args = parser.parse_args()
    from playwright import sync_api

    results: dict[str, list[tuple[float, float]]] = {case: [] for case in CASES}
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=os.environ.get("CHROMIUM", "/usr/bin/chromium"),
                                    args=["--headless", "--no-sandbox", "--disable-gpu"])
        if args.watching:
            compare_watching(browser, args.mechanism, args.repeats)
            browser.close()
            return
        for _ in range(args.repeats):
            for case, extra in CASES.items():
                with fresh_app(extra) as (url, pid, _):
                    results[case].append(demo_from_link(browser, url, pid, args.mechanism)[:2])
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
