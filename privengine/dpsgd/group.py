"""Several DP-SGD runs trained in one model batch: what a sweep does with its compatible points.

Runs whose configs agree on everything but :data:`~.model_batch.PER_MODEL_FIELDS` (the seed, sigma or its target
epsilon, the learning rate, clip norm, EMA decay, ...), and whose every model is batchable, share their data, their
architecture, q and the step count: :func:`group_key` gives them the same key. :func:`run_group` loads the data once
and trains the models of all of them in one :func:`~.model_batch.train_models` pass, while each run keeps its own
reporter, plan (its own sigma, calibrated to its own target), claim and charge, curves, progress and stop.

Keys. Each model keeps exactly the generators it has when its run trains alone (:mod:`.training`): initialisation
``derived_generator(seed, STREAM_INIT)``, Poisson batches ``noise_generator(its run's config, seed, index,
STREAM_SAMPLING, data=fingerprint)`` on the CPU (on a GPU ``STREAM_SAMPLING_ON_DEVICE``, on the device) and noise
``noise_generator(its run's config, seed, index, STREAM_NOISE, data=fingerprint)``, ``index`` its place in its own
run's (seed, alpha) order and ``fingerprint`` the private split's (the same for every run of a group: they share
the data fields). Grouping adds nothing to any key and shares no stream, so each run's outputs are those of the
run alone, to float rounding (tests/test_explore_batching.py).
"""

from __future__ import annotations

import json
from typing import Callable, Sequence

import torch

from .config import DPSGDConfig
from .model_batch import shared_settings, train_models, unbatchable
from .run import STOPPED_LOADING, RunState, load
from .training import ModelResult

Ended = Callable[[int, "dict | BaseException"], None]


def group_key(config: DPSGDConfig) -> str | None:
    """What runs must share to train in one model batch (a JSON text); None if a model of ``config`` cannot be
    batched (it then runs alone, as every run does outside a sweep)."""
    if any(unbatchable(config, alpha) is not None for alpha in config.alphas):
        return None
    return json.dumps(shared_settings(config), sort_keys=True)


def run_group(configs: Sequence[DPSGDConfig], reporters: Sequence, ended: Ended) -> None:
    """Train the runs ``configs`` (one :func:`group_key`) together; ``ended(i, outcome)`` once per run, as soon as
    run i has ended: its summary (finished or stopped: ``reporters[i].stop_was_requested`` tells), or the
    exception it failed with (its reporter's charge covers what it released).

    A run's ConfigError (a target epsilon it cannot reach, say) fails that run alone, before anything of it is
    trained. A failure of the shared batch fails every run still in it, each charged by its own reporter.
    """
    if len({group_key(c) for c in configs}) != 1 or group_key(configs[0]) is None:
        raise ValueError("run_group takes runs of one group_key")
    device = torch.device(reporters[0].device)
    everyone_stops = lambda: all(r.should_stop() for r in reporters)  # noqa: E731

    def progress(fraction: float, text: str = "") -> None:
        for r in reporters:
            r.progress(fraction, text)

    task = load(configs[0], device, should_stop=everyone_stops, progress=progress)
    if task is None:
        for i, config in enumerate(configs):
            ended(i, STOPPED_LOADING | {"dataset": config.dataset})
        return
    states: dict[int, RunState] = {}
    for i, (config, reporter) in enumerate(zip(configs, reporters)):
        state = RunState(config, reporter, task)
        try:
            ready = state.prepare()
        except Exception as exc:  # noqa: BLE001  (this run's own failure, e.g. a ConfigError: the others go on)
            ended(i, exc)
            continue
        if ready:
            states[i] = state
        else:
            ended(i, state.stopped_calibrating())
    if not states:
        return
    done: dict[int, list[ModelResult]] = {i: [] for i in states}
    members = []
    for i, state in states.items():
        members += state.members(own=True, on_done=lambda result, i=i: _model_done(i, result, states, done, ended))
        state.reporter.log(f"its {len(state.batched)} model(s) train in one model batch with "
                           f"{sum(len(s.batched) for s in states.values()) - len(state.batched)} model(s) of "
                           f"{len(states) - 1} other run(s) of its sweep (the same data, model and steps); each "
                           "keeps its own keys, so its outputs are its own run's")
    first = next(iter(states.values()))
    try:
        train_models(task, first.config, first.plan, members, device=device, should_stop=everyone_stops)
    except BaseException as exc:
        for i in states:
            if done[i] is not None:  # not ended yet
                ended(i, exc)
        if not isinstance(exc, Exception):
            raise


def _model_done(i: int, result: ModelResult, states: dict[int, RunState], done: dict, ended: Ended) -> None:
    """Model ``result`` of run ``i`` is final; once all of the run's are, the run ends (``done[i]`` becomes None)."""
    done[i].append(result)
    state = states[i]
    if len(done[i]) < len(state.batched):
        return
    new, done[i] = done[i], None
    try:
        summary = state.batch_done(sorted(new, key=lambda r: state.order.index((r.seed, r.alpha))))
        if summary is None:
            summary = state.train_rest(torch.device(state.reporter.device))  # every model was batched: summarises
    except Exception as exc:  # noqa: BLE001  (this run's summary failed: it alone fails, charged)
        ended(i, exc)
        return
    ended(i, summary)
