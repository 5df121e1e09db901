"""The shaped-noise chart: the DP-SGD one-run audit with canaries inside vs outside span(U), against alpha.

One stored ``dpsgd-one-run`` audit run per canary space (each trains one model per alpha, with its own canaries
and noise), through the job manager like ``python -m privengine audit dpsgd-one-run --canary-space SPACE
--alphas A,B,...``; then the measured table (markdown, on stdout) and the chart
(:func:`privengine.figures.audit.shaped_noise`, an HTML file). Every extra ``--field value`` is passed to the
audit's config, e.g. ``--data train`` or ``--variant elliptical``.

    python scripts/audit_shaped_noise.py --alphas 0,1,4,16 --output shaped_noise.html --batch-size 100

Each row's bound holds at the stated confidence on its own (one model, one set of canaries); the claim is the
same for every row (isotropic DP-SGD's accountant at the model's sigma, q and steps).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from privengine import registry  # noqa: E402
from privengine.audit import result_of  # noqa: E402
from privengine.cli_fields import add_field_flags, field_values  # noqa: E402
from privengine.figures.audit import shaped_noise  # noqa: E402
from privengine.jobs import JobManager  # noqa: E402
from privengine.store import RunStore  # noqa: E402

AUDIT = "dpsgd-one-run"
COLUMNS = ("canary_space", "alpha", "claimed_epsilon", "epsilon_lower", "correct", "guesses", "score_separation",
           "seconds")


def parse(argv: list[str] | None) -> tuple[argparse.Namespace, dict]:
    entry = registry.get(AUDIT)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--spaces", default="inside,outside", help="canary spaces, comma-separated")
    parser.add_argument("--output", default="shaped_noise.html", help="where to write the chart (HTML)")
    add_field_flags(parser.add_argument_group("audit fields"), entry.config_cls)
    args = parser.parse_args(argv)
    return args, field_values(args, entry.config_cls)


def main(argv: list[str] | None = None) -> int:
    args, values = parse(argv)
    store = RunStore()
    manager = JobManager(store)
    rows, t0 = [], time.perf_counter()
    for space in args.spaces.split(","):
        config = registry.get(AUDIT).config_cls.from_dict(values | {"canary_space": space})
        run = manager.wait(manager.submit(AUDIT, config, source="cli"))
        result = result_of(run.summary)
        if run.state != "finished" or result is None:
            print(f"audit run {run.id} ({space}) {run.state}: {run.error}", file=sys.stderr)
            return 1
        print(f"run {run.id}: canaries {space}, {result.counts['canaries']} canaries, "
              f"sigma = {result.details['noise_multiplier']:.4g}, q = {result.details['sample_rate']:.4g}, "
              f"{result.details['steps']} steps", file=sys.stderr)
        rows += [{k: row[k] for k in COLUMNS} for row in result.details["settings"]]
    manager.shutdown()
    print("| " + " | ".join(COLUMNS) + " |\n|" + "---|" * len(COLUMNS))
    for row in rows:
        print("| " + " | ".join(f"{row[k]:.3g}" if isinstance(row[k], float) else str(row[k]) for k in COLUMNS) + " |")
    print(f"\nwall time: {time.perf_counter() - t0:.0f} s", file=sys.stderr)
    shaped_noise(rows).write_html(args.output, include_plotlyjs="cdn")
    print(f"chart: {args.output}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
