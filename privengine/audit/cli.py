"""The CLI's ``audit`` command: ``python -m privengine audit AUDIT [--field value ...] [--json]``.

One sub-command per registered audit (e.g. ``pate-gnmax``), its flags generated from the
audit's config knobs. The audit runs as a job, like ``run``: it is stored (``runs``, ``show``,
``export`` and the dashboard see it), its progress goes to stderr, and Ctrl-C stops it. It
prints the claimed epsilon beside the audited lower bound (``--json``: one object, the run's
summary :meth:`~privengine.audit.interface.AuditResult.to_dict` with its ``run_id``). Exit
status 0 when the audit ran, whatever it found; 1 when it failed or was stopped; bad input
raises :class:`~privengine.errors.ConfigError`, which the main CLI turns into one line naming
the field and exit status 2.

``audit membership --run RUN_ID [--attack lira|rmia|loss] [--reference-models N] [--seed S] [--offline] [--json]``
is the membership-inference attack on a stored DP-SGD or PATE run's recipe (:mod:`.membership_dpsgd`,
:mod:`.membership_pate`), run and stored as the mechanism's membership audit job (``dpsgd-membership``,
``pate-membership``; the dashboard draws it on the run's page): it retrains the target (DP-SGD: the model; PATE: the
teachers and the student), its reference models and its non-private twin and prints the ROC figures beside the DP
bound of the target's claim (``--json``: one object; see :func:`membership_json`, with the stored job's id as
``audit_run``). ``audit membership --target-run RUN_ID`` attacks the model a DP-SGD run kept instead
(:mod:`.membership_stored`; the ``stored_model`` knob of ``dpsgd-membership``); its refusals name ``--target-run``.
"""

from __future__ import annotations

import argparse
import json
import math
from typing import Callable, TextIO

from .. import registry
from ..cli_fields import add_field_flags, field_values
from ..errors import ConfigError, RunNotFoundError
from ..store import RunStore
from .interface import AuditResult, result_of

COMMANDS = ("audit",)
MEMBERSHIP = "membership"
EXIT_OK, EXIT_FAILED, EXIT_INTERRUPTED = 0, 1, 130


def add_parsers(sub) -> None:
    """Add ``audit`` and one sub-command per registered audit to the CLI's subparsers."""
    audit = sub.add_parser("audit", help="audit a mechanism empirically: a lower bound on epsilon beside the claim")
    audits = audit.add_subparsers(dest="audit", required=True, metavar="AUDIT")
    for entry in registry.all_audits():
        p = audits.add_parser(entry.name, help=entry.title, description=entry.description)
        p.add_argument("--json", action="store_true", help="print the result as one JSON object")
        add_field_flags(p.add_argument_group("audit fields"), entry.config_cls)
    p = audits.add_parser(MEMBERSHIP, help="membership inference (LiRA, RMIA, loss) on a DP-SGD or PATE run's recipe, "
                                           "drawn under the DP bound of its claim",
                          description="Retrain the run's recipe (DP-SGD: its isotropic setting; PATE: teachers and "
                                      "student) on a random half of its private split with reference models on "
                                      "other halves, attack it, and print AUC and TPR at FPR 0.001 / 0.01 beside "
                                      "the (eps, delta) bound of the target's claim and the same attack on a "
                                      "non-private twin (PATE: its non-private baseline); a level under 1 / "
                                      "non-members is marked below resolution, with no TPR.")
    which = p.add_mutually_exclusive_group(required=True)
    which.add_argument("--run", metavar="RUN_ID", help="the DP-SGD or PATE run whose recipe is attacked")
    which.add_argument("--target-run", metavar="RUN_ID",
                       help="the finished DP-SGD run whose stored (kept) model is attacked: its private training "
                            "rows against the held-out rows it never trained on (digits or a user data set; lira "
                            "or loss)")
    p.add_argument("--attack", choices=("lira", "rmia", "loss"), default="lira", help="default lira")
    p.add_argument("--reference-models", type=int, default=16, metavar="N", help="even, default 16")
    p.add_argument("--seed", type=int, default=0, help="seed of the halves and of the models (default 0)")
    p.add_argument("--offline", action="store_true", help="LiRA / RMIA from the OUT reference models only")
    p.add_argument("--models-per-pass", type=int, default=None, metavar="N",
                   help="models trained together in one batch, 0: all at once (default: the attack's own, 8 for "
                        "DP-SGD; on a GPU 0 is fastest)")
    p.add_argument("--device", default=None, help="cpu, cuda, ... (default: cuda when available)")
    p.add_argument("--json", action="store_true", help="print the result as one JSON object")


def dispatch(args: argparse.Namespace, store: RunStore, out: TextIO, err: TextIO, follow: Callable) -> int:
    """Run the audit named on the command line as a stored job (``follow``: the CLI's submit-and-follow) and
    print its result."""
    if args.audit == MEMBERSHIP:
        return _membership(args, store, out, err, follow)
    entry = registry.get(args.audit)
    config = entry.config_cls.from_dict(field_values(args, entry.config_cls))
    run = follow(store, entry.name, config, source="cli", err=err)
    if run is None:
        return EXIT_INTERRUPTED
    result = result_of(run.summary)
    if result is None:
        print(f"audit run {run.id} {run.state}: {run.error or 'no result'}", file=err)
        return EXIT_FAILED
    if args.json:
        print(json.dumps({"run_id": run.id, **run.summary}, indent=2, sort_keys=True), file=out)
    else:
        print_result(result, out, run_id=run.id)
    return EXIT_OK if run.state == "finished" else EXIT_FAILED


def _short(value) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_short(v) for v in value) + "]"
    return str(value)


def print_result(result: AuditResult, out: TextIO, *, run_id: str) -> None:
    """The human-readable result: claim beside bound, method, counts, details and notes."""
    print(f"audit {result.audit} (mechanism {result.mechanism}), run {run_id}", file=out)
    for line in result.summary_lines():
        print(line, file=out)
    print("counts:   " + "  ".join(f"{k}={v}" for k, v in result.counts.items()), file=out)
    for key, value in result.details.items():
        print(f"  {key}: {_short(value)}", file=out)
    for note in result.notes:
        print(f"note: {note}", file=out)


def membership_json(result: dict, run_id: str) -> dict:
    """The ``--json`` object of ``audit membership``: ``attack``, ``run``, ``epsilon``, ``delta``, ``members``,
    ``non_members``, ``reference_models``, ``auc``, ``tpr_at_fpr`` (keyed by "0.001" and "0.01", the levels the
    non-members resolve), ``below_resolution_at_fpr`` (the others, each with the non-members it needs),
    ``bound_at_fpr`` (every level), ``non_private_twin`` (``auc``, ``tpr_at_fpr``, ...; absent for a stored model),
    then everything else the attack measured."""
    first = ("attack", "epsilon", "delta", "members", "non_members", "reference_models", "auc", "tpr_at_fpr",
             "below_resolution_at_fpr", "bound_at_fpr", "non_private_twin")
    return {"run": run_id, **{k: result[k] for k in first if k in result},
            **{k: v for k, v in result.items() if k not in first}}


def level_lines(result: dict) -> list[str]:
    """One line per FPR level of an attack output ``result`` (:func:`membership_json`'s keys): the TPR with its
    interval, the (ε, δ) bound and the trade-off bound (PLD or RDP) where it has one, named "applied twice" for a
    replace-one game (:func:`.membership.applied_twice`), whether a bound is exceeded, the twin's TPR; a level below
    the non-members' resolution says so instead."""
    from .membership import applied_twice, below_resolution, tradeoff_of

    twin = result.get("non_private_twin", {})
    tradeoff = tradeoff_of(result)
    prefix = tradeoff[0] if tradeoff else None
    twice = applied_twice(result)
    lines = []
    for key, bound in result["bound_at_fpr"].items():
        unresolved = below_resolution(key, result["non_members"])
        if unresolved:
            lines.append(f"FPR {key}: {unresolved}, no TPR reported; this attack had {result['non_members']}")
            continue
        lo, hi = result["tpr_interval_at_fpr"][key]
        above = result["exceeds_bound"][key] or bool(prefix and result[f"exceeds_{prefix}_bound"][key])
        lines.append(f"FPR {key}: TPR {result['tpr_at_fpr'][key]:.4f} [{lo:.4f}, {hi:.4f}], DP bound {bound:.4f}"
                     + (f" ({prefix.upper()} {result[f'{prefix}_bound_at_fpr'][key]:.4f})" if prefix else "")
                     + f"{twice}, {'ABOVE a bound' if above else 'within the bounds'}"
                     + (f"; twin TPR {twin.get('tpr_at_fpr', {}).get(key, math.nan):.4f}" if twin else ""))
    return lines


def _membership(args: argparse.Namespace, store: RunStore, out: TextIO, err: TextIO, follow: Callable) -> int:
    """``audit membership``: the membership audit of run ``--run``'s mechanism as a stored job (refused before it is
    queued when the run cannot be attacked), printed as :func:`membership_json` or as lines."""
    from .membership_job import AUDIT_OF_MECHANISM, measured_output
    from .membership_knobs import attack_knobs

    flag, run_id = ("--target-run", args.target_run) if args.target_run else ("--run", args.run)
    try:
        mechanism = store.get_run(run_id).mechanism
    except RunNotFoundError:
        raise ConfigError(flag, f"must be the id of a stored run; {run_id!r} is not in the store") from None
    if mechanism not in AUDIT_OF_MECHANISM:
        raise ConfigError(flag, f"is a {mechanism} run; membership attacks cover {', '.join(AUDIT_OF_MECHANISM)} "
                                "runs")
    if args.target_run and mechanism != "dpsgd":
        raise ConfigError(flag, f"is a {mechanism} run; only a DP-SGD run's kept model is scored on the rows it "
                                "trained on (PATE's kept student learnt from public queries); attack its recipe with "
                                "--run")
    chosen = {} if args.models_per_pass is None else {"models_per_pass": args.models_per_pass}
    chosen |= {"stored_model": True} if args.target_run else {}
    try:  # ConfigError naming the field before anything is queued
        config = attack_knobs(mechanism, run=run_id, attack=args.attack, reference_models=args.reference_models,
                              seed=args.seed, offline=args.offline, device=args.device or "auto", **chosen)
        config.target(store)
    except ConfigError as exc:
        raise ConfigError(flag, exc.reason) if exc.field == "run" else exc from None
    job = follow(store, AUDIT_OF_MECHANISM[mechanism], config, source="cli", err=err)
    if job is None:
        return EXIT_INTERRUPTED
    result = measured_output(job.summary)
    if result is None:
        print(f"membership attack {job.id} {job.state}: {job.error or 'nothing measured'}", file=err)
        return EXIT_FAILED
    if args.json:
        print(json.dumps(membership_json(result, run_id) | {"audit_run": job.id}, indent=2, sort_keys=False),
              file=out)
        return EXIT_OK if job.state == "finished" else EXIT_FAILED
    twin = result.get("non_private_twin", {})
    attacked = f"the stored model of run {run_id}" if args.target_run else f"run {run_id}"
    print(f"membership attack {args.attack}{' (offline)' if args.offline else ''} on {attacked} (stored as "
          f"{job.id}): {result['members']} members, {result['non_members']} non-members, "
          f"{result['reference_models']} reference models; claim ε = {result['epsilon']:.4g}, "
          f"δ = {result['delta']:g}", file=out)
    print(result["privacy"], file=out)
    print(f"AUC {result['auc']:.4f}" + (f" (non-private twin {twin['auc']:.4f})" if twin else ""), file=out)
    for line in level_lines(result):
        print(line, file=out)
    print_result(result_of(job.summary), out, run_id=job.id)
    return EXIT_OK if job.state == "finished" else EXIT_FAILED
