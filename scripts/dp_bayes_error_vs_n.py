"""Error of the private posteriors against the truth vs the number of records N, at one epsilon (issue 14).

Runs one dp_bayes sweep per (method, N) at ``--epsilon`` (``--repeats`` releases each, fresh data and noise)
through the job manager (stored in $PRIVENGINE_HOME like any run), prints the medians, and writes the chart
(:func:`privengine.figures.dp_bayes.error_vs_n_figure`) to ``--out`` as HTML. Example (a few minutes on 2 cores):

    python scripts/dp_bayes_error_vs_n.py --n 1000 3000 10000 30000 100000 --out /tmp/error_vs_n.html
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from privengine import mechanisms  # noqa: E402,F401  (registers dp_bayes)
from privengine.figures.dp_bayes import error_vs_n_figure  # noqa: E402
from privengine.jobs import JobManager  # noqa: E402
from privengine.store import RunStore  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, nargs="+", default=[1000, 3000, 10000, 30000, 100000])
    parser.add_argument("--methods", nargs="+", default=["ssp", "dpvi"], choices=["ssp", "dpvi"])
    parser.add_argument("--epsilon", type=float, default=1.0)
    parser.add_argument("--repeats", type=int, default=20, help="releases per (method, N) for ssp")
    parser.add_argument("--dpvi-repeats", type=int, default=5, help="releases per N for dpvi (slower)")
    parser.add_argument("--dpvi-max-n", type=int, default=30000, help="largest N dpvi runs at (its cost grows with N)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default="dp_bayes_error_vs_n.html")
    args = parser.parse_args()
    manager = JobManager(RunStore())
    rows = []
    print("median RMS error of (beta, b) against the truth; coverage_90 over all parameters incl. log sigma")
    print("method          N  median_error  coverage_90  wall_s  run")
    for n in args.n:
        for method in args.methods:
            if method == "dpvi" and n > args.dpvi_max_n:
                continue
            repeats = args.dpvi_repeats if method == "dpvi" else args.repeats
            run_id = manager.submit("dp_bayes", {"method": method, "mode": "sweep", "n_records": n,
                                                 "sweep_epsilons": [args.epsilon], "sweep_repeats": repeats,
                                                 "seed": args.seed, "device": "cpu"})
            started = time.perf_counter()
            run = manager.wait(run_id, timeout=3600)
            if run.state != "finished":
                raise SystemExit(f"run {run_id} {run.state}: {run.traceback}")
            (row,) = run.summary["coverage"]
            rows.append({"method": method, "n_records": n,
                         "median_truth_error_rms": row["median_truth_coef_error_rms"]})
            print(f"{method:<6} {n:>10}  {row['median_truth_coef_error_rms']:>12.4g}  {row['coverage_90']:>11.3f}  "
                  f"{time.perf_counter() - started:>6.1f}  {run_id}")
        rows.append({"method": "non-private posterior", "n_records": n,
                     "median_truth_error_rms": run.summary["reference_truth_coef_error_rms"]})
        print(f"{'non-private':<6} {n:>5}  {run.summary['reference_truth_coef_error_rms']:>12.4g}")
    manager.shutdown()
    error_vs_n_figure(rows, epsilon=args.epsilon).write_html(args.out, include_plotlyjs="cdn")
    print(f"chart: {args.out}")


if __name__ == "__main__":
    main()
