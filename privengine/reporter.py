"""The reporter: the only channel from a running mechanism to the outside world.

A run function calls ``reporter.metric(step, loss=..., acc=...)`` for curves,
``reporter.artifact(name, data)`` for tables and histograms,
``reporter.log(text)``, ``reporter.progress(fraction, text)``, ``reporter.keep_model(name, tensors, spec)`` for
its final models (files beside the store, :mod:`privengine.store.model_files`), and returns early
when ``reporter.should_stop()`` says so (it must ask at least once a second).
Everything goes straight to the run store, so any page, tab or process sees it.

A run that can fail after storing outputs also declares, as it goes, the summary whose privacy
claims cover what it has released so far: ``reporter.charge(summary_fn)`` (:class:`ReleaseCharge`).
The executor stores that summary with the failed run (:func:`failure_record`), so the run is charged
in its own claim and in any sweep that composes its runs.

That declaration lives in the run's process, so it dies with it. So a run that states a privacy claim also
declares, before its first output, its *planned* charge: ``reporter.charge_plan(summary)``, the summary whose
claims cover its whole planned release. It is stored at once, and a run whose process (or Ray worker) dies
after storing outputs is stored with it (:meth:`privengine.store.RunStore.death_charge`).
"""

from __future__ import annotations

import threading
import time
import traceback
from typing import Any, Callable

from .claims import headline_of, with_caveat
from .store import RunStore

METRIC_FLUSH_S = 0.25  # metric points are written in batches at most this old
STOP_POLL_S = 0.5      # how often the store's stop flag (set by another process) is read


# A run a mechanism's run_group returned without ending (its contract is one ``ended`` call per run): it fails
# with its own charge, locally (privengine.jobs) and in a Ray worker (privengine.explore.ray_worker)
NOT_ENDED_BY_GROUP = "its group's run function returned without ending it"
FAILURE_CAVEAT = ("Where a run failed, its claim covers what it stored before the failure; the failure itself (when "
                  "it came and its error text) may depend on the private data (a non-finite gradient, say) and is "
                  "covered by no claim: do not publish the error.")


class ReleaseCharge:
    """What a run has released so far, charged: the summary stored with the run if it fails.

    A run function returns its summary, whose ``"privacy"`` claims cover everything it published; a run
    that raises returns nothing, yet the curves, tables and logs it stored before the error stay in the
    store, and a sweep choosing among its runs has seen them. So a run declares, before its first output
    that a claim must cover and whenever what it has released grows, ``charge(summary)``: a summary dict,
    or a function returning one (called only if the run fails, so an expensive accountant runs once, at
    the end; None: nothing needs a claim yet). Its claims must cover every output stored up to that point
    and up to the failure, whenever it comes (a declaration made before an output may charge it in
    advance; the stored claim may over-charge, never under-charge). The executor stores it with the
    failed run (:func:`failure_record`), marked ``"failed": true``; a run that returns stores what it
    returned and the declaration is dropped.

    One capability for every executor: the job manager's :class:`Reporter` and the Ray workers'
    reporter both mix it in, and test doubles may too. A run ended by the death of its process (state
    *interrupted*) cannot store a declaration made in memory: :meth:`charge_plan` is what covers it.
    """

    _charge: "dict | Callable[[], dict | None] | None" = None
    _plan: dict | None = None

    def charge(self, summary: "dict | Callable[[], dict | None] | None") -> None:
        """Declare the summary (or a function computing it) that covers everything released so far; it
        replaces the previous declaration."""
        self._charge = summary

    def charged_summary(self) -> dict | None:
        """The declared summary, computed now (None if none was declared, or the run declared that nothing
        needs a claim). Raises whatever the declaration raises, and ValueError if it does not mark at most one
        headline claim."""
        charge = self._charge
        summary = charge() if callable(charge) else charge
        if summary is None:
            return None
        return with_caveat(_checked_charge(summary, "charged"), FAILURE_CAVEAT, failed=True)

    def charge_plan(self, summary: dict) -> None:
        """Declare, before the run's first output, the summary whose claims cover its whole planned release: every
        model, query or draw it would release had it finished. Stored at once (:meth:`_persist_plan`), so it
        outlives the process: a run whose process dies after storing outputs is charged it, since what it released
        before dying is not known, and its whole plan covers that whenever the death came.

        It replaces the previous declaration: a run that releases in stages may widen it before the outputs of a
        later stage, as long as each declaration covers everything stored up to the next one. Raises ValueError if
        ``summary`` is not a dict marking at most one headline claim."""
        self._plan = _checked_charge(summary, "planned")
        self._persist_plan(summary)

    def planned_summary(self) -> dict | None:
        """The last planned charge declared (:meth:`charge_plan`); None if none was."""
        return self._plan

    def _persist_plan(self, summary: dict) -> None:
        """Store the planned charge where a death of the run's process leaves it (the run store, or the Ray driver's
        hub); a test double keeps it in memory only (:meth:`planned_summary`)."""

    def keep_model(self, name: str, tensors: dict, spec: dict) -> None:
        """Keep one final model of the run: ``tensors`` (parameter and buffer name -> tensor) and ``spec``, the
        JSON-able architecture that rebuilds it (:mod:`privengine.kept_models`). A mechanism calls it only after
        the model is final and only when its config's ``keep_model`` is on; the run's claims already cover every
        model it trains, so keeping one releases nothing new. Here (a test double): kept nowhere."""


def _checked_charge(summary: Any, kind: str) -> dict:
    """``summary``, a declared charge (``kind``: "charged" or "planned"), if it is a dict marking at most one
    headline claim; ValueError otherwise (such a summary would mislead every view)."""
    if not isinstance(summary, dict):
        raise ValueError(f"a {kind} summary must be a dict; got {type(summary).__name__}")
    headline_of(summary)  # ValueError on several headlines
    return summary


def outcome_record(reporter, outcome: Any) -> dict[str, Any]:
    """How a run ended, as stored (the keyword arguments of ``RunStore.mark_ended`` beside the run id): ``outcome``
    is what its run function returned, its summary (``state`` "stopped" when its reporter saw a stop request, else
    "finished"), or the exception it raised (``state`` "failed" with :func:`failure_record`; call it inside the
    ``except`` block then)."""
    if isinstance(outcome, BaseException):
        return {"state": "failed", **failure_record(reporter, outcome)}
    return {"state": "stopped" if reporter.stop_was_requested else "finished", "summary": outcome}


def failure_record(reporter: ReleaseCharge | None, exc: BaseException) -> dict[str, Any]:
    """How a run that raised ``exc`` is recorded: ``{"error", "traceback", "summary"}``, the summary being
    the reporter's declared charge (:class:`ReleaseCharge`). Call it inside the ``except`` block (it formats
    the traceback being handled).

    If the charge cannot be computed the run is still recorded as failed, without a summary, and its error
    says that no claim covers what it stored (never a silent gap: a sweep then lists it among the runs
    that stated no claim).
    """
    error, trace = f"{type(exc).__name__}: {exc}", traceback.format_exc()
    summary = None
    if reporter is not None:
        try:
            summary = reporter.charged_summary()
        except Exception as charge_exc:  # noqa: BLE001  (the run's own error must still be recorded)
            error += (f" [and its privacy claim could not be computed ({type(charge_exc).__name__}: {charge_exc}): "
                      "what it stored is covered by no claim]")
            trace += "\nWhile computing the charged claim:\n" + traceback.format_exc()
    return {"error": error, "traceback": trace, "summary": summary}


class Reporter(ReleaseCharge):
    """Writes one run's outputs to the store; thread-confined to the run's thread.

    Attributes:
        run_id: the run's id in the store.
        device: the torch device string the run must put its tensors on (``"cpu"``, ``"cuda"``, ...).
    """

    def __init__(self, store: RunStore, run_id: str, *, device: str = "cpu",
                 stop_event: threading.Event | None = None):
        self.store = store
        self.run_id = run_id
        self.device = device
        self._stop_event = stop_event or threading.Event()
        self._pending: list[tuple[int, str, float]] = []
        self._last_flush = 0.0
        self._last_stop_poll = 0.0

    def metric(self, step: int, **values: float) -> None:
        """Record metric values at ``step`` (e.g. an epoch or an optimiser step)."""
        self._pending.extend((int(step), name, float(v)) for name, v in values.items() if v is not None)
        now = time.monotonic()
        if now - self._last_flush >= METRIC_FLUSH_S:
            self.flush()

    def artifact(self, name: str, data: Any) -> None:
        """Store (or replace) a JSON-serialisable table, histogram or sample set."""
        self.store.put_artifact(self.run_id, name, data)

    def log(self, text: str) -> None:
        self.store.add_log(self.run_id, text)

    def _persist_plan(self, summary: dict) -> None:
        self.store.set_planned_charge(self.run_id, summary)

    def keep_model(self, name: str, tensors: dict, spec: dict) -> None:
        self.store.put_model(self.run_id, name, tensors, spec)

    def progress(self, fraction: float, text: str = "") -> None:
        """Overall progress in [0, 1] with a short description of the current stage."""
        self.flush()
        self.store.set_progress(self.run_id, fraction, text)

    def should_stop(self) -> bool:
        """True once a stop was requested here or through the store (from another process).

        Also writes buffered metrics that have waited long enough, so a run that
        asks regularly shows its points promptly.
        """
        now = time.monotonic()
        if self._pending and now - self._last_flush >= METRIC_FLUSH_S:
            self.flush()
        if self._stop_event.is_set():
            return True
        if now - self._last_stop_poll >= STOP_POLL_S:
            self._last_stop_poll = now
            if self.store.stop_requested(self.run_id):
                self._stop_event.set()
        return self._stop_event.is_set()

    @property
    def stop_was_requested(self) -> bool:
        return self._stop_event.is_set()

    def flush(self) -> None:
        """Write buffered metric points now."""
        self._last_flush = time.monotonic()
        if self._pending:
            pending, self._pending = self._pending, []
            self.store.add_metrics(self.run_id, pending)
