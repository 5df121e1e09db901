"""The privacy claims of DP-SGD: of one run (its models alone and together), and of sweeps of runs.

Every model a run trains is a history of Poisson-subsampled Gaussian steps, accounted by
:mod:`privengine.accounting.subsampled_gaussian` (Opacus' PRV and RDP accountants); this module
states what a run or a sweep releases in those terms: which histories compose, at which delta,
with which caveats, and which claim is the headline.

Every claim that is a bound on Poisson-sampled training records its releases as privacy events
(:func:`released_events`: each model's history by
:func:`~privengine.accounting.subsampled_gaussian.history_events`, in the JSON form of
:mod:`privengine.accounting.events`) under the relation :data:`RELATION`, so dp-accounting alone
recomputes its epsilon. Two kinds of claim record none: the GDP approximation (not a bound) and the
claims of fixed-size shuffled batches, whose epsilon is the Poisson accountant's estimate of a
mechanism that did not sample by Poisson (no dp-accounting event describes shuffling).
"""

from __future__ import annotations

from collections import Counter

from dp_accounting import dp_event, rdp

from privengine.accounting.events import to_json
from privengine.accounting.repetition import SHAPES
from privengine.accounting.opacus_names import ACCOUNTANT_NAMES, GDP_CAVEAT, SOUND_ACCOUNTANTS
from privengine.accounting.subsampled_gaussian import (History, IntractableAccounting, epsilon_of, history_events,
                                                       merge)
from privengine.claims import PrivacyClaim, claims_of, delta_caveat, headline_of, union_caveats

from .config import DPSGDConfig, declared_private_size

NEIGHBOURING = ("add or remove one private training example (Poisson-subsampled batches; q = B / N and the step "
                "count come from the declared private size N, public and fixed by the config, never from the data, "
                "so a data set and its neighbour get the same q, steps and published fields)")
RELATION = "add_or_remove_one"  # NEIGHBOURING's relation, as a key of accounting.events.RELATIONS


def released_events(histories: list[History]) -> tuple[dict, ...]:
    """The JSON events of releasing one model per history, the models independent mechanisms (their own Poisson
    batches and noise): the composition of every model's event (:func:`history_events`), the k models of one same
    history as ``SelfComposedDpEvent(its event, k)``, in the order the histories first appear."""
    counts = Counter(tuple(map(tuple, history)) for history in histories)
    events = []
    for history, k in counts.items():
        event = history_events(list(history))
        events.append(to_json(event if k == 1 else dp_event.SelfComposedDpEvent(event, k)))
    return tuple(events)


def run_histories(summary: dict) -> list[History]:
    """The accountant history of each model a run's summary (or planned or failure charge) lists: its
    private-normalisation step if any, then the steps it took (or was charged) at the run's (sigma, q)."""
    return [_norm_steps(summary) + [(summary["noise_multiplier"], summary["sample_rate"], m["steps"])]
            for m in summary.get("models", [])]


def stored_claims(config: dict, summary: dict) -> list[PrivacyClaim]:
    """The claims :func:`dpsgd_claims` states for a stored run, from its stored config (accountant, delta, sampling)
    and summary (:func:`run_histories`), epsilons and events recomputed: how the store's one-time upgrade gives the
    claims of runs stored before claims carried events theirs (:mod:`privengine.ledger.upgrade`, which keeps the
    stored caveats). No GDP figure (it carries no events)."""
    cfg = DPSGDConfig.from_dict(config)
    return dpsgd_claims(histories=run_histories(summary) or [[]], accountant=cfg.accountant, delta=cfg.delta,
                        private_size=declared_private_size(cfg), public_note="", sampling=cfg.sampling)


def compose_runs(runs) -> PrivacyClaim:
    """One claim for releasing every model of several DP-SGD runs (a sweep's; ``runs``: store records).

    Each run's models are independent subsampled Gaussian mechanisms with the run's (sigma, q) for
    the steps each took (``summary["models"]``), so all of them compose as one history, accounted
    with the strictest accountant and the smallest delta the runs used (PRV if any run used it, RDP where
    PRV would need too much memory for the composition: a valid, looser bound, named in the claim). The claim
    carries every model's events (:func:`released_events`), from which dp-accounting recomputes its epsilon; none
    if a run used shuffled batches (its epsilon is then an estimate, see the module's docstring).
    """
    histories = [h for r in runs for h in run_histories(r.summary)]
    accountant = "prv" if any(r.config.get("accountant", "prv") == "prv" for r in runs) else "rdp"
    delta = _smallest_delta(runs)
    released, fallback = merge(histories), ""
    try:
        eps, order = epsilon_of(released, accountant=accountant, delta=delta)
    except IntractableAccounting:  # PRV only; RDP is always computable and a valid (looser) bound
        accountant, fallback = "rdp", " (PRV would need too much memory for this composition; RDP bounds it)"
        eps, order = epsilon_of(released, accountant=accountant, delta=delta)
    return PrivacyClaim(
        label=f"selecting among the {len(runs)} runs of the sweep that state a claim "
              f"({len(histories)} models composed)",
        epsilon=eps, delta=delta,
        accountant=f"{ACCOUNTANT_NAMES[accountant]}{fallback}, composing every step of the {len(histories)} "
                   "independently sampled and noised models of the runs", neighbouring=NEIGHBOURING, order=order,
        caveats=_headline_caveats(runs), headline=True,
        **_recorded(released_events(histories), poisson=_poisson(runs)))


def _recorded(events: tuple[dict, ...], *, poisson: bool) -> dict:
    """A claim's ``events`` and ``relation`` fields: no events unless the batches were Poisson samples (the events
    state Poisson sampling); the relation either way (the claim's, add/remove, which a ledger reads from it)."""
    return {"events": events, "relation": RELATION} if poisson else {"relation": RELATION}


def _poisson(runs) -> bool:
    """Whether every run drew its batches by Poisson sampling (the default of runs stored before the choice)."""
    return all(r.config.get("sampling", "poisson") == "poisson" for r in runs)


def _norm_steps(summary: dict) -> History:
    """The private-normalisation step each model of a run took before training (empty if none)."""
    sigma = summary.get("norm_noise_multiplier")
    return [(sigma, 1.0, 1)] if sigma else []


def _smallest_delta(runs) -> float:
    """The strictest delta the runs used: a claim over all of them is stated at it."""
    return min(float(r.config.get("delta", 1e-5)) for r in runs)


def _headline_caveats(runs) -> tuple[str, ...]:
    """The caveats of the runs' headline claims, each once: a claim composing the runs repeats them. A run stored
    before claims were marked has no headline: every claim it states lends its caveats instead."""
    claims = []
    for run in runs:
        headline = headline_of(run.summary)
        claims.extend([headline] if headline is not None else claims_of(run.summary))
    return union_caveats(claims)


def repeat_and_select(runs, shape: str, mean: float) -> PrivacyClaim | str:
    """Papernot & Steinke (2022): publishing the best of K ~ ``shape``(mean) DP-SGD runs, by dp-accounting's RDP.

    Every candidate must have the same per-run mechanism: the sweep varies only the mechanism's
    ``repeat_neutral`` knobs (checked at launch), and the finished ``runs`` must agree on (sigma, q,
    steps of every model). One run is then ``steps_total`` compositions of the Poisson-subsampled
    Gaussian; returns the claim, or why there is none.
    """
    settings = {(r.summary["noise_multiplier"], r.summary["sample_rate"],
                 sum(m["steps"] for m in r.summary.get("models", [])), r.summary.get("norm_noise_multiplier"),
                 len(r.summary.get("models", []))) for r in runs}
    if len(settings) != 1:
        return (f"the runs differ in (sigma, q, steps, normalisation sigma, models): {sorted(settings, key=str)}; "
                "the random-repetition bound needs one")
    (sigma, q, steps, _, _), = settings
    delta = _smallest_delta(runs)
    # one run: every step of its models (each first releasing its private channel statistics, if any), composed
    released = dp_event.RepeatAndSelectDpEvent(history_events(merge(run_histories(runs[0].summary))), mean,
                                               SHAPES[shape])
    accountant = rdp.RdpAccountant()
    accountant.compose(released)
    eps, order = accountant.get_epsilon_and_optimal_order(delta)
    # Only the caveats every run states: one that some runs state and others do not (a public-data note naming a
    # warm start some drawn settings used) would tell the reader about runs that were not published, and bound K.
    per_run = [set(_headline_caveats([run])) for run in runs]
    shared = tuple(c for c in _headline_caveats(runs) if all(c in mine for mine in per_run))
    dropped = () if len(shared) == len(_headline_caveats(runs)) else (
        "Caveats that only some of the drawn runs state (e.g. which public data a setting used) are left out: "
        "they would describe runs that were not published; the best run's own claim states them.",)
    return PrivacyClaim(
        label=f"publishing only the best run of K ~ {shape}(mean {mean:g}) runs (random-repetition tuning)",
        epsilon=float(eps), delta=delta,
        accountant=("Papernot & Steinke (ICLR 2022) random-repetition bound on the RDP of one run (sigma = "
                    f"{sigma:.4g}, q = {q:.4g}, {steps} steps), Google's dp-accounting RdpAccountant "
                    "(RepeatAndSelectDpEvent)"), neighbouring=NEIGHBOURING, order=float(order),
        caveats=shared + dropped, **_recorded((to_json(released),), poisson=_poisson(runs)))


def dpsgd_claims(*, histories: list[History], accountant: str, delta: float, private_size: int,
                 public_note: str, sampling: str, show_gdp: bool = False,
                 extra_caveats: tuple[str, ...] = ()) -> list[PrivacyClaim]:
    """The claims of a run that trained one model per history on the same private data.

    The models must be independent mechanisms (their own Poisson batches and noise, as
    :func:`~.training.train_model` gives them), so releasing all of them is the adaptive
    composition of every step of every history (:func:`merge`). Claims: each model alone
    (the largest epsilon of them, all equal unless the run was stopped), and, with more
    than one model, all models together. The headline is what the run publishes: its
    summary reports every model's results, so the composition when there are several.
    ``show_gdp`` adds Opacus' GDP figure for the same release, never as the headline, and without events (not
    a bound). With Poisson ``sampling`` each other claim carries the events it covers (:func:`released_events`):
    the model of the largest epsilon alone, or every model.
    """
    if accountant not in SOUND_ACCOUNTANTS:
        raise ValueError(f"accountant must be one of {SOUND_ACCOUNTANTS} (GDP is shown only beside one); "
                         f"got {accountant!r}")
    caveats = [public_note,
               "The training-loss and captured-energy curves are computed from private examples without "
               "noise: they are operator diagnostics and are not covered by this guarantee."]
    if sampling != "poisson":
        caveats.append("Batches were fixed-size slices of a shuffled pass, not Poisson samples: the accountant "
                       "assumes Poisson subsampling, so this epsilon is an estimate, not a proven bound.")
    caveats.extend(delta_caveat(delta, private_size))
    caveats.extend(extra_caveats)
    name = ACCOUNTANT_NAMES[accountant]
    several = len(histories) > 1
    poisson = sampling == "poisson"
    per_model = [epsilon_of(h, accountant=accountant, delta=delta) for h in histories]
    largest = max(range(len(histories)), key=lambda i: per_model[i][0], default=None)
    eps, order = per_model[largest] if largest is not None else (0.0, None)
    alone = histories[largest] if largest is not None else []  # no model: no step, nothing spent
    claims = [PrivacyClaim(label="each trained model alone" if several else "the trained model", epsilon=eps,
                           delta=delta, accountant=name, neighbouring=NEIGHBOURING, order=order,
                           caveats=tuple(caveats), headline=not several,
                           **_recorded(released_events([alone]), poisson=poisson))]
    released = merge(histories)
    if several:
        eps_all, order_all = epsilon_of(released, accountant=accountant, delta=delta)
        claims.append(PrivacyClaim(
            label=f"all {len(histories)} models of this run released together", epsilon=eps_all, delta=delta,
            accountant=f"{name}, composing every step of the {len(histories)} independently sampled and "
                       "noised models", neighbouring=NEIGHBOURING, order=order_all, caveats=tuple(caveats),
            headline=True, **_recorded(released_events(histories), poisson=poisson)))
    if show_gdp and released:
        eps_gdp, _ = epsilon_of(released, accountant="gdp", delta=delta)
        claims.append(PrivacyClaim(label="GDP approximation of the released models (comparison only)",
                                   epsilon=eps_gdp, delta=delta, accountant=ACCOUNTANT_NAMES["gdp"],
                                   neighbouring=NEIGHBOURING, caveats=(GDP_CAVEAT,) + tuple(caveats),
                                   relation=RELATION))
    return claims
