"""Explore: sweep a mechanism's knobs over several seeds and chart its privacy-utility frontier.

The page keeps only the sweep id, in the session and in the URL (``?sweep=ID``), so a reload, a
second tab or a shared link reattaches; the sweep itself lives in the store (engine:
:mod:`privengine.explore`). Values to vary are typed as text and checked through each knob, never clamped.
"""

from __future__ import annotations

from dataclasses import dataclass

import streamlit as st

from privengine import registry
from privengine.config import FieldSpec, RunConfig
from privengine.errors import ConfigError, RunNotFoundError
from privengine.explore import SweepSpec, run_configs, runner, suggest_values
from privengine.ledger import BudgetExceeded
from ui import services, sweep_view
from ui.budget_notice import show_refusal
from ui.form import config_form, error_text
from ui.scroll import start_next_page_at_top
from ui.shell import through_app

EXECUTORS = {"local": "local (job threads here)", "ray": "Ray (a cluster, or a new local one)"}
# runner.launch's group: None (automatic: only on an accelerator, runner.groups_pay), always, never
GROUPING = {None: "automatic (on a GPU)", True: "always", False: "never"}
# the page's own fields, outside the mechanism's config: their labels, for errors that name them
FIELDS = {"seeds": "Seeds per point", "workers": "Workers (runs at once)", "address": "Ray address"}
# never varied: the seeds are the sweep's, the device is shared, replicas are for resumed runs
_FIXED = ("device", "seed", "replica")
_SHARED = {s.name for s in RunConfig.specs()}  # fields every mechanism has (secure noise, ...): listed last


def _knob_order(spec: FieldSpec) -> tuple[bool, bool]:
    """The mechanism's own knobs first, its main ones before its advanced ones; the fields every run has last
    (sorted is stable, so each group keeps the config's order)."""
    return spec.name in _SHARED, spec.knob.advanced


@dataclass(frozen=True)
class Launch:
    """What the form asks for: a validated spec (None while a field is wrong) and where to run it."""

    spec: SweepSpec | None
    kind: str
    workers: int | None
    address: str | None
    group: bool | None = None

    def executor(self):
        """The cached executor for this choice (ConfigError for bad workers, ImportError without Ray)."""
        if self.workers is None:
            raise ConfigError("workers", "must be an integer >= 1")
        return services.sweep_executor(self.kind, workers=self.workers, address=self.address)


def _values_text(spec: FieldSpec, values: list) -> str:
    """Values as the text box takes them: comma-separated (lists: items by commas, values by semicolons)."""
    def one(v):
        if isinstance(v, bool):
            return str(v).lower()
        if isinstance(v, (list, tuple)):
            return ", ".join(one(x) for x in v)
        return f"{v:g}" if isinstance(v, float) else str(v)

    return ("; " if spec.is_list else ", ").join(one(v) for v in values)


def _parse_values(spec: FieldSpec, text: str) -> list:
    """Every value of the text checked through the knob (ConfigError naming the field; nothing is clamped).

    Empty values are kept where the knob may take one (free text, lists), and dropped elsewhere."""
    parts = [p.strip() for p in text.split(";" if spec.is_list else ",")]
    if not (spec.is_list or (spec.kind == "str" and spec.knob.choices is None)):
        parts = [p for p in parts if p]
    if not parts:
        raise ConfigError(spec.name, "needs at least one value to vary over")
    values = [spec.parse(p) for p in parts]
    if len({repr(v) for v in values}) != len(values):
        raise ConfigError(spec.name, f"must not repeat a value; got {text!r}")
    return values


def _count(name: str, value) -> int:
    if value is None or value != int(value) or value < 1:
        raise ConfigError(name, f"must be an integer >= 1; got {value}")
    return int(value)


def _checked(errors: list[ConfigError], config_cls, check, *args):
    """``check(*args)``, or None with its error shown inline, fields named by their labels (and collected)."""
    try:
        return check(*args)
    except ConfigError as exc:
        errors.append(exc)
        st.error(error_text(exc, config_cls, FIELDS), icon=":material/error:")
        return None


def follow_shown_sweep(sweep_id: str | None) -> None:
    """Set the form's mechanism to that of the sweep the page shows, once per shown sweep (the form showed PATE's
    knobs beside a DP-Bayes sweep opened by its link); the user may pick another mechanism afterwards."""
    if sweep_id is None or st.session_state.get("explore.form_follows") == sweep_id:
        return
    st.session_state["explore.form_follows"] = sweep_id
    st.session_state["explore.mechanism"] = services.store().get_sweep(sweep_id).mechanism


def sweep_form(mechanisms: list[registry.Mechanism]) -> Launch:
    """Mechanism, knobs to vary and their values, seeds, executor, workers, grouping, and the base config."""
    names = [m.name for m in mechanisms]
    name = st.selectbox("Mechanism", names, format_func=lambda n: registry.get(n).title, key="explore.mechanism")
    mech = registry.get(name)
    cls, fixed = mech.config_cls, dict(mech.frontier.fixed)
    knobs = sorted((s for s in cls.specs() if s.name not in _FIXED and s.name not in fixed), key=_knob_order)
    labels = {s.name: s.label for s in knobs}
    varied = st.multiselect("Knobs to vary", list(labels), format_func=labels.get, key=f"explore.{name}.knobs",
                            placeholder="none: one point, repeated over the seeds")
    by_reason: dict[str, list[str]] = {}
    for field, why in fixed.items():
        by_reason.setdefault(why, []).append(cls.spec(field).label)
    for why, fields in by_reason.items():
        st.caption(f"Not variable in a sweep: {', '.join(fields)}. Why: {why}.")
    errors: list[ConfigError] = []
    axes = {}
    for field in varied:
        spec = cls.spec(field)
        hint = "Values separated by ';', each a comma-separated list." if spec.is_list else "Comma-separated."
        text = st.text_input(f"Values of {spec.label}", _values_text(spec, suggest_values(spec)),
                             key=f"explore.{name}.values.{field}", help=f"{hint} Allowed: {spec.range_text()}.")
        axes[field] = _checked(errors, cls, _parse_values, spec, text)
    seeds = _checked(errors, cls, _count, "seeds", st.number_input(
        "Seeds per point", value=1, step=1, key="explore.seeds", help="Runs per point, with seeds seed, seed + 1, …"))
    ray_missing = services.ray_missing()
    kind = st.radio("Executor", list(EXECUTORS), format_func=EXECUTORS.get, key="explore.executor", horizontal=True,
                    disabled=ray_missing is not None)
    if ray_missing:
        st.caption(f"Ray is disabled: {ray_missing}")
    address = st.text_input("Ray address", key="explore.address", placeholder="$RAY_ADDRESS, else a new local cluster"
                            ) if kind == "ray" else None
    workers = _checked(errors, cls, _count, "workers", st.number_input(
        "Workers (runs at once)", value=runner.default_workers(), step=1, key="explore.workers",
        help=f"Default {runner.default_workers()}: one per two cores (each run already uses several threads)."))
    group = st.radio("Train compatible runs together", list(GROUPING), format_func=GROUPING.get, key="explore.group",
                     horizontal=True, help="Runs that may share one model batch (DP-SGD: the same data, model, batch "
                     "size and epochs) train in one pass, one job or Ray task, each still its own run and claim. "
                     "Automatic: only when the runs' device is an accelerator (CUDA, MPS); on a CPU a batch of K "
                     "models costs about K single ones.") if mech.group_key is not None else None
    st.markdown("**Values every run shares**")
    st.caption("The varied knobs take the values above instead of the ones below; the seed is the first seed.")
    preset = st.selectbox("Start from a preset", [p.name for p in mech.presets], index=None,
                          placeholder="the mechanism's defaults", key=f"explore.{name}.preset",
                          help="Fill the values below with a named preset's (e.g. a published setting), then vary "
                               "knobs around it.") if mech.presets else None
    # one widget key per preset: a newly picked preset's values replace what the form showed
    base, form_errors = config_form(cls, key=f"explore.{name}.base" + (f".{preset}" if preset else ""),
                                    initial=mech.preset_config(preset).to_dict() if preset else None)
    if errors or form_errors:
        return Launch(None, kind, workers, address, group)
    # knobs in name order: the store keeps the spec with sorted keys, and the points are numbered from it
    spec = SweepSpec(name, base=base.to_dict(), axes=dict(sorted(axes.items())), seeds=seeds)
    total = _checked(errors, cls, lambda: len(run_configs(spec)))  # every run's config, checked before launch
    if total is None:
        return Launch(None, kind, workers, address, group)
    st.markdown(f"**{total:,} run{'s' if total > 1 else ''}**: {total // seeds:,} point(s) × {seeds} seed(s)")
    return Launch(spec, kind, workers, address, group)


def current_sweep(known: set[str]) -> str | None:
    """The sweep this page shows: from the URL first, then from the session."""
    wanted = st.query_params.get("sweep") or st.session_state.get("explore.sweep")
    if not wanted:
        return None
    try:
        record = services.store().get_sweep(wanted)
    except RunNotFoundError:
        st.warning(f"Sweep {wanted} is not in the store.", icon=":material/warning:")
        return None
    if record.mechanism not in known:
        st.warning(f"Sweep {wanted} is of {record.mechanism!r}, which is not registered here.",
                   icon=":material/warning:")
        return None
    select_sweep(wanted)
    return wanted


def select_sweep(sweep_id: str) -> None:
    st.session_state["explore.sweep"] = sweep_id
    if st.query_params.get("sweep") != sweep_id:
        st.query_params["sweep"] = sweep_id


def launched_executor(sweep_id: str):
    """The executor this session launched ``sweep_id`` on (None after a reload: stops then go through the store)."""
    launched = st.session_state.get("explore.launched", {}).get(sweep_id)
    return launched.executor() if launched else None


through_app()
st.title("Explore")
st.markdown("Sweep a mechanism's knobs over several seeds and see the **privacy-utility frontier**: each point is "
            "one setting, with its spread over the seeds; the frontier joins the settings no other one beats on "
            "both axes. Selecting among a sweep's runs is covered only by the sweep's composed privacy claim.")
sweepable = registry.sweepable()  # mechanisms and audits (an audit's frontier: audited against claimed ε)
if not sweepable:
    st.info("No registered mechanism declares a frontier, so none can be swept.", icon=":material/info:")
    st.stop()
store = services.store()
known = {m.name for m in sweepable}

sweep_id = current_sweep(known)
follow_shown_sweep(sweep_id)
left, right = st.columns([1, 2.2], gap="large")
with left:
    st.subheader("New sweep")
    launch = sweep_form(sweepable)
    if st.button("Launch sweep", type="primary", disabled=launch.spec is None, key="explore.launch",
                 icon=":material/play_arrow:", width="stretch"):
        try:
            with st.spinner("Checking the sweep's whole planned release against the privacy budget..."):
                sweep_id = runner.launch(store, launch.executor(), launch.spec, source="dashboard",
                                         group=launch.group)
        except BudgetExceeded as exc:
            show_refusal(exc)
        except ConfigError as exc:
            text = error_text(exc, registry.get(launch.spec.mechanism).config_cls, FIELDS)
            st.error(f"The sweep was not launched: {text}", icon=":material/error:")
        except (ImportError, ConnectionError) as exc:
            st.error(f"The sweep was not launched: {exc}", icon=":material/error:")
        else:
            st.session_state.setdefault("explore.launched", {})[sweep_id] = launch
            select_sweep(sweep_id)
            start_next_page_at_top()  # the frontier builds at the top right; Launch sits ~3 000 px down the form
            st.rerun()

with right:
    recent = {r.id: sweep_view.sweep_label(r.mechanism, r.id) for r in store.list_sweeps(limit=50)
              if r.mechanism in known}
    if recent:
        ids = list(recent)
        choice = st.selectbox("Show a stored sweep", ids, index=ids.index(sweep_id) if sweep_id in ids else None,
                              format_func=recent.get, key=f"explore.pick.{sweep_id}", placeholder="pick a sweep")
        if choice is not None and choice != sweep_id:
            select_sweep(choice)
            st.rerun()
    if sweep_id is None:
        st.info("Choose the knobs to vary and press **Launch sweep**; the frontier fills in as runs finish.",
                icon=":material/insights:")
    else:
        first = runner.result(store, sweep_id)
        frontier = registry.get(first.mechanism).frontier
        utility = None
        if first.utility_axis is not None:  # the mechanism's utilities offered
            # nothing preselected: a value picked before any run finished (DP-SGD: test accuracy) stayed the widget's
            # after a regression's runs finished without it; left empty, the sweep's own or the runs' is drawn
            own = first.spec.utility
            utility = st.selectbox("Utility metric", [a.name for a in frontier.utility], index=None,
                                   placeholder=f"the sweep's own: {sweep_view.short_label(frontier.utility_axis(own))}"
                                   if own else "the first one the finished runs report",
                                   format_func=lambda n: sweep_view.axis_title(frontier.utility_axis(n)),
                                   key=f"explore.utility.{sweep_id}")
        sweep_view.live_sweep(sweep_id, utility=utility, active=first.state == "running",
                              stop_executor=launched_executor(sweep_id), resume_executor=launch.executor)

st.divider()
st.subheader("Overlay sweeps")
stored = {r.id: sweep_view.sweep_label(r.mechanism, r.id) for r in store.list_sweeps(limit=200)
          if r.mechanism in known}
chosen = st.multiselect("Sweeps to draw on one chart", list(stored), format_func=stored.get, key="explore.overlay",
                        placeholder="pick sweeps of any mechanism")
if chosen:
    sweep_view.overlay([runner.result(store, i) for i in chosen], key="explore.overlay.chart")
else:
    st.caption("Sweeps measured on the same axes are drawn together, one colour each.")
