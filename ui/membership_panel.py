"""The "Membership inference" section of the DP-SGD and PATE pages: attack the run shown above (once it has ended)
and watch the attack's ROC fill in under the bounds of the attacked model's claim.

The attack is the mechanism's membership audit (``dpsgd-membership``, :mod:`privengine.audit.membership_job`;
``pate-membership``, :mod:`privengine.audit.membership_pate_job`), a stored run like any other:
launched through the job manager, drawn by the same live panel (state, progress, stop, report), listed on the Runs
page. The section keeps the attack run's id per attacked run in the session, and shows the latest attack of the run
otherwise, so a reload reattaches. A DP-SGD run that kept its models can have its stored model attacked instead of its
recipe (the ``stored_model`` knob, :mod:`privengine.audit.membership_stored`).
"""

from __future__ import annotations

import streamlit as st

from privengine.audit import result_of
from privengine.audit.membership import ATTACKS, above_a_bound, below_resolution
from privengine.audit.membership_job import AUDIT_OF_MECHANISM, MembershipKnobs, stored_attacks
from privengine.audit.membership_knobs import attack_knobs
from privengine.audit.membership_stored import redrawable
from privengine.errors import ConfigError
from privengine.figures import membership as figures
from privengine.store import RunRecord, RunSnapshot

from . import charts, services
from .form import error_text
from .launch import launch
from .links import ATTACK_QUERY_KEY
from .run_panel import live_run

INTRO = ("What can an attacker learn about the people in the training data? The attack retrains this run's recipe "
         "on a random half of its private data, with reference models on other halves, and tries to tell members "
         "from non-members (LiRA, RMIA or the loss attack). Its ROC is drawn under the bounds of the attacked "
         "model's own claim (its recipe on half the private data; for DP-SGD its ε differs from the run's headline "
         "ε): no attack on a model that keeps its promise can go above them.")
WHAT_IS_ATTACKED = {"pate": "PATE: the student is attacked (and PATE's non-private baseline as the twin). Halves are "
                            "one example of each random pair, so every model trains on sets of one size, as PATE's "
                            "replace-one claim needs; its bound is the a-priori ε of the student's queries, which "
                            "does not depend on the data's size: the run's headline ε, or below it where the run "
                            "published a sanitized data-dependent ε (whose release the student does not make)."}
STORED_HELP = ("Attack the model this run kept, not a retrained copy: its private training rows (members) against "
               "the held-out rows it never trained on (non-members), for runs on digits or a user data set; the "
               "reference models retrain its recipe on halves of those rows (lira or loss).")
TAKES = {"dpsgd": "the digits demonstration takes seconds, a Fashion-MNIST preset with 16 reference models about a "
                  "minute on two CPU cores",
         "pate": "each reference model is a whole PATE pipeline (teachers and student): about 2 s each for a digits "
                 "recipe with 10 teachers on two CPU cores, minutes each for a real-data preset"}


def membership_section(mechanism: str = "dpsgd") -> None:
    """Draw the section for the run the mechanism page shows (kept in the session by :mod:`ui.mechanism_page`)."""
    st.divider()
    st.header("Membership inference", anchor="membership")
    st.markdown(INTRO)
    if mechanism in WHAT_IS_ATTACKED:
        st.caption(WHAT_IS_ATTACKED[mechanism])
    run_id = st.session_state.get(f"run.{mechanism}")
    if run_id is None:
        st.info("Launch or pick a run above; once it has ended you can attack it here.", icon=":material/policy:")
        return
    run = services.store().get_run(run_id)
    if run.active:
        st.info(f"Run {run_id} is {run.state}: attack it once it has ended.", icon=":material/policy:")
        return
    attack_id = _current_attack(mechanism, run_id)
    left, right = st.columns([1, 2.2], gap="large")
    with left:
        config = _settings(mechanism, run_id)
        refusal = _refusal(config)
        if refusal:
            st.warning(refusal, icon=":material/block:")
        if st.button("Attack this run", disabled=config is None or refusal is not None, key="membership.launch",
                     icon=":material/policy:", width="stretch"):
            launched = launch(AUDIT_OF_MECHANISM[mechanism], config)
            if launched is not None:
                st.session_state[f"membership.{run_id}"] = launched
                st.rerun()
        _picker(mechanism, run_id, attack_id)
    with right:
        if attack_id is None:
            st.info(f"Press **Attack this run**: {TAKES[mechanism]}.", icon=":material/policy:")
        else:
            live_run(attack_id, draw_membership)


def _settings(mechanism: str, run_id: str) -> MembershipKnobs | None:
    """The attack's main knobs (the rest keep their defaults); None with the error shown when they are refused."""
    attack = st.selectbox("Attack", ATTACKS, key="membership.attack",
                          help="lira: Carlini et al. 2022; rmia: Zarifzadeh et al. 2024; loss: Yeom et al. 2018.")
    refs = st.number_input("Reference models", min_value=2, max_value=1024, value=16, step=2, key="membership.refs",
                           help="Even: each example is in half of them; more models, a stronger attack.")
    seed = st.number_input("Seed", min_value=0, value=0, step=1, key="membership.seed")
    stored = _stored_offered(mechanism, run_id) and st.checkbox(
        "Attack the stored model", value=False, key="membership.stored", help=STORED_HELP)
    twin = not stored and st.checkbox("Also attack the non-private twin", value=True, key="membership.twin")
    try:
        return attack_knobs(mechanism, run=run_id, attack=attack, reference_models=int(refs), seed=int(seed),
                            twin=twin, **({"stored_model": True} if stored else {}))
    except ConfigError as exc:
        st.error(error_text(exc, MembershipKnobs), icon=":material/error:")
        return None


def _stored_offered(mechanism: str, run_id: str) -> bool:
    """Whether the run's stored model can be chosen: a DP-SGD run that kept models, on a data set whose split its
    config draws (:func:`~privengine.audit.membership_stored.redrawable`: digits, a user data set)."""
    store = services.store()
    return (mechanism == "dpsgd" and redrawable(str(store.get_run(run_id).config.get("dataset")))
            and bool(store.kept_models(run_id)))


def _refusal(config: MembershipKnobs | None) -> str | None:
    """Why the run cannot be attacked (a CNN, shaped noise only, a regression, too many teachers, ...), or None."""
    if config is None:
        return None
    try:
        config.target(services.store())
    except ConfigError as exc:
        return error_text(exc, type(config))
    return None


def _attacks_of(mechanism: str, run_id: str) -> list[RunRecord]:
    return stored_attacks(services.store(), run_id, audit=AUDIT_OF_MECHANISM[mechanism])


def _current_attack(mechanism: str, run_id: str) -> str | None:
    """The attack shown: the one the URL names (``?attack=ID``, taken once), else the one picked or launched in this
    session, else the run's latest."""
    attacks = _attacks_of(mechanism, run_id)
    linked = st.query_params.get(ATTACK_QUERY_KEY)
    if linked is not None:
        del st.query_params[ATTACK_QUERY_KEY]
        if linked in {r.id for r in attacks}:
            st.session_state[f"membership.{run_id}"] = linked
    chosen = st.session_state.get(f"membership.{run_id}")
    if chosen in {r.id for r in attacks}:
        return chosen
    return attacks[0].id if attacks else None


def _picker(mechanism: str, run_id: str, attack_id: str | None) -> None:
    attacks = _attacks_of(mechanism, run_id)
    if len(attacks) < 2:
        return
    ids = [r.id for r in attacks]
    labels = {r.id: f"{r.id} · {'stored model' if r.config.get('stored_model') else 'recipe'} · "
                    f"{r.config.get('attack')} · {r.state}" for r in attacks}  # two games, two bounds: named
    states = ",".join(r.state for r in attacks)  # a new widget when a state changes, so labels never go stale
    choice = st.selectbox("Show another attack of this run", ids, index=ids.index(attack_id) if attack_id in ids
                          else None, format_func=labels.get, key=f"membership.pick.{run_id}.{attack_id}.{states}")
    if choice is not None and choice != attack_id:
        st.session_state[f"membership.{run_id}"] = choice
        st.rerun()


def draw_membership(snapshot: RunSnapshot) -> None:
    """The live view of one attack: the caveat, AUC and TPR tiles, the verdict in one line (:func:`figures.verdict`),
    the ROC under what ε allows, the tables."""
    st.caption(f":material/warning: {figures.CAVEAT}")
    out = figures.output_of(snapshot)
    if out is not None:
        auc, tpr, twin = st.columns(3)
        auc.metric("Attack AUC", f"{out['auc']:.3f}", help="0.5: no better than a coin")
        name, bound = figures.tightest_bound(out)  # its name says where the bound is applied twice (replace one)
        unresolved = below_resolution("0.01", out["non_members"])
        tpr.metric("TPR at 1 % FPR", "below resolution" if unresolved else f"{out['tpr_at_fpr']['0.01']:.3f}",
                   help=unresolved or f"the claim's {name} there: {bound['0.01']:.3f}")
        if "non_private_twin" in out:
            twin.metric("Non-private twin AUC", f"{out['non_private_twin']['auc']:.3f}")
        if above_a_bound(out):  # the verdict, where a claim is contradicted, as an error
            st.error(figures.verdict(out), icon=":material/error:")
        else:
            st.markdown(f":material/gavel: **Verdict:** {figures.verdict(out)}")
    # the ROC alone (the audit's other charts are not drawn here: built each refresh, they were thrown away)
    charts.show(figures.roc_or_waiting(out), key=f"membership.{snapshot.run.id}.roc0")
    result = result_of(snapshot.run.summary)
    for table in figures.tables(snapshot):
        with st.expander(table.title, expanded=table.title == "Audited settings"):
            charts.table(table.frame)
    if result is not None:  # a stored model's game has no one-run bound: its headline says "ROC only"
        st.caption(result.headline() + (" (one-run bound of the attack's guesses)" if result.epsilon_lower is not None
                                        else ""))
