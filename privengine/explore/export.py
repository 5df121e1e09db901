"""A sweep's points as CSV, for the CLI's ``--format csv`` and the Explore page's download."""

from __future__ import annotations

import csv
import io

from privengine.store import is_epsilon_metric

from . import runner


def points_csv(res: runner.SweepResult) -> str:
    """One row per point: settings, seeds, privacy and utility mean / sd, whether it is on the frontier, runs.

    An epsilon privacy axis is followed by ``<axis>_basis``: the delta and accountant of the claims it was read
    from (:attr:`runner.PointResult.privacy_basis`), so no epsilon leaves without its assumptions.
    """
    buffer = io.StringIO()
    fields = res.spec.varied
    writer = csv.writer(buffer)
    u = res.utility_axis.name if res.utility_axis else "utility"
    chooser = res.utility_axis.select_by if res.utility_axis else ""  # the number the frontier is chosen by
    basis = is_epsilon_metric(res.privacy_axis.name)
    writer.writerow(["point", *fields, "seeds", res.privacy_axis.name, f"{res.privacy_axis.name}_sd",
                     *([f"{res.privacy_axis.name}_basis"] if basis else []), u, f"{u}_sd",
                     *([chooser] if chooser else []), "on_frontier", "runs", "states"])
    for p in res.points:
        writer.writerow([p.index, *(p.settings.get(f) for f in fields), p.seeds, p.privacy, p.privacy_sd,
                         *([p.privacy_basis] if basis else []), p.utility, p.utility_sd,
                         *([p.selection] if chooser else []), p.index in res.frontier, " ".join(p.runs),
                         " ".join(p.states)])
    return buffer.getvalue()
