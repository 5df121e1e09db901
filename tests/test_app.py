"""Streamlit AppTest: every page renders without an exception, and the forms validate inline."""

from __future__ import annotations

import json
import time

import pytest
from streamlit.testing.v1 import AppTest

from privengine import registry
from privengine.claims import PrivacyClaim
from tests.conftest import ROOT, run_from_published_preset

APP = str(ROOT / "app.py")


def _page(path: str, **query) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=60)
    at.switch_page(path) if path != "home" else None
    for k, v in query.items():
        at.query_params[k] = v
    return at.run()


def _assert_clean(at: AppTest) -> None:
    assert not at.exception, [e.message for e in at.exception]


def test_home_lists_every_mechanism():
    at = _page("home")
    _assert_clean(at)
    text = " ".join(m.value for m in at.markdown)
    for mech in registry.all_mechanisms():
        if mech.name != "toy":
            assert mech.protects[:40] in text


def test_runs_page_empty_and_with_runs(store):
    at = _page("pages/runs.py")
    _assert_clean(at)
    assert any("No runs match" in i.value for i in at.info)
    run_id = store.create_run("toy", {"steps": 1})
    store.add_metrics(run_id, [(0, "loss", 1.0)])
    # the first claim is not the headline: the table must show the one the mechanism marked
    raw = PrivacyClaim("data-dependent", 0.3, 1e-5, "some analysis", "replace one")
    claim = PrivacyClaim("toy", 2.5, 1e-5, "Opacus RDP accountant (Mironov et al.), orders 2..64", "add/remove one",
                         headline=True)
    store.mark_ended(run_id, "finished", summary={"steps_done": 1, "privacy": [raw.to_dict(), claim.to_dict()]})
    at = _page("pages/runs.py")
    _assert_clean(at)
    table = at.dataframe[0].value
    assert run_id in table["run"].tolist()
    assert table["privacy"].tolist() == ["ε = 2.5, δ = 1e-05 [toy]"]
    assert table["accountant"].tolist() == ["Opacus RDP accountant"]
    assert table["settings"].tolist() == ["steps = 1"]  # the knobs changed from the defaults, by their labels
    assert table.columns.tolist()[:7] == ["open", "run", "name", "mechanism", "state", "privacy",
                                          "result"]  # before the details
    assert table["open"].tolist() == [f"toy?run={run_id}"]  # a click on it opens the run's page


def test_an_audit_runs_link_opens_the_page_that_shows_it(store):
    """Audits have no page of their own: an audit run opens its mechanism's page at its audit section, a membership
    attack the page of the run it attacked, at that attack (none for the demonstration recipe: no page shows it)."""
    from ui.runs_table import run_url

    gnmax = store.get_run(store.create_run("pate-gnmax", {}))
    attack = store.get_run(store.create_run("pate-membership", {"run": "abc123"}))
    demo = store.get_run(store.create_run("dpsgd-membership", {"run": ""}))
    assert run_url(gnmax) == f"pate?audit={gnmax.id}"
    assert run_url(attack) == f"pate?run=abc123&attack={attack.id}"
    assert run_url(demo) is None
    assert run_url(store.get_run(store.create_run("no-such-mechanism", {}))) is None


@pytest.mark.parametrize("name", [m.name for m in registry.all_mechanisms() if m.name != "toy"])
def test_mechanism_pages_render(name):
    at = _page(f"pages/{name}.py")
    _assert_clean(at)
    assert at.title[0].value == registry.get(name).title


def _toy_page(root_path: str):
    import sys

    sys.path.insert(0, root_path)
    from tests import toy_mechanism  # noqa: F401
    from ui.mechanism_page import render_mechanism_page

    render_mechanism_page("toy")


def _toy_app() -> AppTest:
    return AppTest.from_function(_toy_page, kwargs={"root_path": str(ROOT)}, default_timeout=60)


def test_generated_form_shows_inline_errors_and_blocks_launch():
    at = _toy_app().run()
    _assert_clean(at)
    at.number_input(key="form.toy.steps").set_value(0).run()
    assert [e.value for e in at.error] == ["**Steps** must be in [1, 100000]; got 0"]
    assert at.button(key="launch.toy").disabled
    at.number_input(key="form.toy.steps").set_value(3)
    at.text_input(key="form.toy.scales").set_value("1, 50").run()
    assert [e.value for e in at.error] == ["**Scales** must be in [0, 10] (item 2); got 50.0"]
    at.text_input(key="form.toy.scales").set_value("1, 5").run()
    assert not at.error and not at.button(key="launch.toy").disabled


def test_shown_when_hides_irrelevant_fields():
    at = _toy_app().run()
    assert not any(n.key == "form.toy.extra" for n in at.number_input)
    at.selectbox(key="form.toy.mode").set_value("b").run()
    assert any(n.key == "form.toy.extra" for n in at.number_input)


def test_launch_runs_in_background_and_reattaches_by_url(store):
    at = _toy_app().run()
    at.number_input(key="form.toy.steps").set_value(3)
    at.button(key="launch.toy").click().run()
    _assert_clean(at)
    run_id = at.query_params["run"]
    if isinstance(run_id, list):
        run_id = run_id[0]
    deadline = time.monotonic() + 20
    while store.get_run(run_id).active and time.monotonic() < deadline:
        time.sleep(0.1)
    assert store.get_run(run_id).state == "finished"
    fresh = _toy_app()
    fresh.query_params["run"] = run_id
    fresh.run()
    _assert_clean(fresh)
    assert any("ε = 1, δ = 1e-05" in m.value for m in fresh.markdown)
    assert any("accountant: none (test only)" in c.value.lower() for c in fresh.caption)
    assert any(f"Run **{run_id}**" in m.value and "finished" in m.value for m in fresh.markdown)
    assert any("toy run of 3 steps" in c.value for c in fresh.code)  # the run's log


@pytest.mark.slow
def test_the_run_status_sits_under_launch_and_a_queued_run_names_the_run_it_waits_for(store):
    """After Launch the state and Stop show right under the button (the form is taller than a screen)."""
    at = _toy_app().run()
    at.number_input(key="form.toy.steps").set_value(10_000)
    at.number_input(key="form.toy.delay").set_value(0.05)
    at.button(key="launch.toy").click().run()
    first = store.list_runs(mechanism="toy")[0].id
    at.button(key="launch.toy").click().run()
    _assert_clean(at)
    second = store.list_runs(mechanism="toy")[0].id
    try:
        texts = [m.value for m in at.markdown]
        assert any(f"Run **{second}** · waits for run {first} to end" in t for t in texts)
        assert any(b.key == f"stop.strip.{second}" for b in at.button)  # Stop where the eye is
        assert any(b.key == f"stop.panel.{second}" for b in at.button)  # and in the run panel
    finally:
        _stop_and_wait(store, second, first)


def test_config_link_prefills_the_form_and_bad_links_say_why():
    at = _toy_app()
    at.query_params["config"] = '{"steps": 7, "mode": "b"}'
    at.run()
    assert at.number_input(key="form.toy.steps").value == 7
    assert at.selectbox(key="form.toy.mode").value == "b"
    bad = _toy_app()
    bad.query_params["config"] = '{"steps": 0}'
    bad.run()
    assert any("The config in the link was not used: **Steps** must be in [1, 100000]; got 0" in e.value
               for e in bad.error)


def test_a_preset_loads_into_the_form():
    at = _page("pages/dpsgd.py")
    _assert_clean(at)
    at.selectbox(key="preset.dpsgd").select("fmnist-scatter-eps3").run()
    assert any("Tramer & Boneh" in c.value and "89.7 %" in c.value for c in at.caption)
    at.button(key="preset.load.dpsgd").click().run()
    _assert_clean(at)
    assert at.query_params["preset"] in ("fmnist-scatter-eps3", ["fmnist-scatter-eps3"])  # a shareable link
    assert at.selectbox(key="form.dpsgd.g1.model").value == "scatter_linear"  # fresh widgets, preset values
    assert at.number_input(key="form.dpsgd.g1.batch_size").value == 8192


def test_a_preset_link_prefills_the_form_and_a_bad_one_says_why():
    at = _page("pages/dpsgd.py", preset="fmnist-scatter-eps3")
    _assert_clean(at)
    assert at.selectbox(key="preset.dpsgd").value == "fmnist-scatter-eps3"
    assert at.selectbox(key="form.dpsgd.model").value == "scatter_linear"
    assert at.number_input(key="form.dpsgd.batch_size").value == 8192
    bad = _page("pages/dpsgd.py", preset="nope")
    assert any("The preset in the link was not used" in e.value and "fmnist-scatter-eps3" in e.value
               for e in bad.error)


def _stop_and_wait(store, *run_ids: str, timeout: float = 60) -> None:
    """Ask every run to stop, then wait until none is active: a queued run asked to stop ends when its turn
    comes, so waiting for it before the run ahead of it was asked to stop waited out the whole timeout."""
    for run_id in run_ids:
        store.request_stop(run_id)
    deadline = time.monotonic() + timeout
    while any(store.get_run(run_id).active for run_id in run_ids) and time.monotonic() < deadline:
        time.sleep(0.2)


def test_home_gallery_has_a_quick_demo_card_per_mechanism_and_the_presets_table():
    at = _page("home")
    _assert_clean(at)
    titles = [h.value for h in at.subheader]
    launch_keys = {b.key for b in at.button}
    presets = at.dataframe[0].value  # the presets table comes before recent runs
    for mech in registry.all_mechanisms():
        assert mech.title in titles
        has_demo = "quick-demo" in [p.name for p in mech.presets]
        assert (f"gallery.launch.{mech.name}" in launch_keys) == has_demo
        for preset in mech.presets:
            if preset.name == "quick-demo":
                assert any(preset.description in m.value for m in at.markdown)  # what the demo shows
                continue
            link = f"/{mech.name}?preset={preset.name}"  # the page with the preset loaded, ready to launch
            row = presets[presets["preset"] == link].iloc[0]
            assert row["mechanism"] == mech.title.split(":")[0]  # "PATE: teacher ensembles" -> "PATE"
            assert row["what it is"] and preset.description.startswith(row["what it is"].rstrip("…"))
            assert not row["what it is"].endswith(" al.")  # "Papernot et al." is not a sentence
            if preset.published is not None:
                assert row["source"] == preset.published.source
                epsilon = preset.published.epsilon
                assert row["ε"] == epsilon if epsilon is not None else row["ε"] != row["ε"]  # NaN: shown as "—"
    fmnist = presets[presets["preset"] == "/dpsgd?preset=fmnist-scatter-eps3"].iloc[0]
    assert (fmnist["published metric"], fmnist["value"]) == ("test accuracy", "89.7 %")


def test_launching_a_quick_demo_from_home_starts_it_and_opens_its_page(store):
    at = _page("home")
    at.button(key="gallery.launch.dp_bayes").click().run()
    _assert_clean(at)
    run_id = at.query_params["run"]
    run_id = run_id[0] if isinstance(run_id, list) else run_id
    try:
        run = store.get_run(run_id)
        expected = registry.get("dp_bayes").config_cls.from_dict(
            dict(registry.get("dp_bayes").preset("quick-demo").overrides)).to_dict()
        assert run.mechanism == "dp_bayes" and run.config == expected  # the preset's config, as launched
        assert run.source == "dashboard (preset quick-demo)"  # the run records its preset
        assert at.title[0].value == registry.get("dp_bayes").title  # the mechanism's page, showing the run
        assert any(f"Run **{run_id}**" in m.value and "preset quick-demo" in m.value for m in at.markdown)
    finally:
        _stop_and_wait(store, run_id)


def test_a_run_from_a_preset_draws_its_published_figure_as_a_reference_line(store):
    from privengine.figures import run_figures

    run_id = run_from_published_preset(store)
    label = "published: 89.7 % at ε = 3<br>(Tramer & Boneh, ICLR 2021; ε per model)"  # what the source says of ε
    figures = run_figures(store.snapshot(run_id))  # as reports draw them
    marked = [f for f in figures if any(s.name == "published" for s in f.layout.shapes)]
    assert len(marked) == 1 and marked[0].layout.title.text == "Test accuracy"
    assert marked[0].layout.shapes[0].y0 == marked[0].layout.shapes[0].y1 == 0.897
    assert [a.text for a in marked[0].layout.annotations] == [label]

    at = _page("pages/dpsgd.py", run=run_id)  # the page draws the same line through the shared chart helper
    _assert_clean(at)
    specs = [json.dumps(json.loads(c.proto.spec), ensure_ascii=False) for c in at.get("plotly_chart")]
    assert sum(label in spec for spec in specs) == 1
    assert any("ε spent by each model alone" in spec and "Opacus PRV accountant, δ = 1e-05" in spec
               for spec in specs)  # the ε chart names its accountant
    beside = [m.value for m in at.markdown if "Preset **fmnist-scatter-eps3**" in m.value]
    assert beside and "**89.7 %** at ε = 3" in beside[0] and "this run: **88.1 %**" in beside[0]
    assert any("the one model of this run released together" in m.value for m in at.markdown)  # not "all 1 models"


def test_a_run_is_named_and_annotated_on_its_page(store):
    """Issue 29 (run names and notes): the run panel's editor stores them; the heading and the Runs page show them
    (the store's refusal of a name too long is tested through the CLI)."""
    run_id = run_from_published_preset(store)
    at = _page("pages/dpsgd.py", run=run_id)
    name_box = next(w for w in at.text_input if w.label == "Run name")
    name_box.input("baseline for the talk")
    next(w for w in at.text_area if w.label == "Notes").input("first of three seeds")
    next(b for b in at.button if b.label == "Save").click()
    at.run()
    _assert_clean(at)
    run = store.get_run(run_id)
    assert (run.name, run.notes) == ("baseline for the talk", "first of three seeds")
    # the heading shows the name right after Save, not after the next rerun (issue 40, item 10)
    assert any(f"**baseline for the talk** · run {run_id}" in m.value for m in at.markdown)
    assert [t.value for t in at.toast] == [f"Saved the name and notes of run {run_id}"]
    at = _page("pages/dpsgd.py", run=run_id)
    assert any(f"**baseline for the talk** · run {run_id}" in m.value for m in at.markdown)
    assert any(c.value == "first of three seeds" for c in at.caption)
    assert _page("pages/runs.py").dataframe[0].value["name"].tolist() == ["baseline for the talk"]


def test_a_run_is_overlaid_live_on_an_earlier_run_of_its_mechanism(store):
    """Issue 29 (live side by side): the page's "Compare with an earlier run" (and ``?compare=ID``) overlays the shown
    run's curves on the chosen run's, above its own charts; a link naming a run of another mechanism says why not."""
    earlier, shown = run_from_published_preset(store), run_from_published_preset(store)
    store.set_label(earlier, name="seed 0 baseline")
    at = _page("pages/dpsgd.py", run=shown)
    picker = next(s for s in at.selectbox if s.label == "Compare with an earlier run")
    assert picker.value is None and picker.options[0].startswith("seed 0 baseline")  # the previous run first
    picker.select(earlier)
    at.run()
    _assert_clean(at)
    assert at.query_params["compare"] in (earlier, [earlier])  # shareable
    assert any(f"this run against run seed 0 baseline ({earlier})" in m.value for m in at.markdown)
    specs = [json.loads(c.proto.spec) for c in at.get("plotly_chart")]
    overlaid = [s for s in specs if {t.get("legendgroup") for t in s["data"]} == {shown, earlier}]
    assert overlaid and any(s["layout"]["title"]["text"].startswith("Test accuracy") for s in overlaid)

    other = store.create_run("pate", {})
    at = _page("pages/dpsgd.py", run=shown, compare=other)
    _assert_clean(at)
    assert any(f"Run {other} to compare with is a pate run, not dpsgd" in w.value for w in at.warning)


def test_a_run_without_a_preset_draws_no_reference_line(store):
    from privengine.figures import run_figures

    run_id = run_from_published_preset(store)
    other = store.create_run("dpsgd", store.get_run(run_id).config, source="dashboard")
    store.add_metrics(other, [(10, "test_acc|isotropic|seed=0", 0.7)])
    assert not any(s.name == "published" for f in run_figures(store.snapshot(other)) for s in f.layout.shapes)


def test_a_run_that_changed_its_preset_says_so_beside_the_published_figure(store):

    run_id = run_from_published_preset(store)
    changed = store.create_run("dpsgd", {**store.get_run(run_id).config, "target_epsilon": 0.5, "seed": 7},
                               source="dashboard (preset fmnist-scatter-eps3, modified)")
    store.add_metrics(changed, [(10, "test_acc|isotropic|seed=0", 0.8)])
    at = _page("pages/dpsgd.py", run=changed)
    _assert_clean(at)
    notes = [c.value for c in at.caption if "dashed line" in c.value]
    assert notes and "This run changed target_epsilon from the preset" in notes[0]  # the seed is not a change
    at = _page("pages/dpsgd.py", run=run_id)
    assert not any("changed" in c.value for c in at.caption if "dashed line" in c.value)


def test_forms_speak_in_labels_and_mark_datasets_missing_from_the_data_root(tmp_path, monkeypatch):
    monkeypatch.setenv("PRIVENGINE_DATA", str(tmp_path))  # an empty data root
    at = _page("pages/dpsgd.py", config=json.dumps({"dataset": "mnist", "model": "mlp"}))
    _assert_clean(at)
    dataset = at.selectbox(key="form.dpsgd.dataset")
    assert "MNIST (not found)" in dataset.options and "linear regression (embedded, low rank)" in dataset.options
    missing = [e.value for e in at.error]  # an error, so Launch stays disabled until the data is there
    assert missing == [f"**Dataset** MNIST is not in the data root {tmp_path}: put torchvision's files there, or set "
                       "the data root (field, or PRIVENGINE_DATA)"]
    assert at.button(key="launch.dpsgd").disabled
    assert "target ε (σ calibrated)" in at.selectbox(key="form.dpsgd.noise_mode").options  # not `target_epsilon`
    at.selectbox(key="form.dpsgd.dataset").set_value("linreg").run()
    at.number_input(key="form.dpsgd.target_epsilon").set_value(500.0).run()
    assert [e.value for e in at.error] == ["**Target epsilon** must be in [0.05, 100]; got 500.0"]


def test_a_batch_larger_than_the_private_data_is_refused_in_the_form_before_launch():
    at = _page("pages/dpsgd.py")
    at.number_input(key="form.dpsgd.batch_size").set_value(1_000_000).run()
    assert [e.value for e in at.error] == ["**Batch size** must be below the declared private size (9500); "
                                           "got 1000000"]
    assert at.button(key="launch.dpsgd").disabled


@pytest.mark.parametrize("name", ["split_label", "dp_bayes"])
def test_every_choice_of_split_learning_and_dp_bayes_reads_as_a_label(name):
    from privengine.config import CHOICE_NAMES, RunConfig

    shared = {s.name for s in RunConfig.specs()}  # device: the form offers the devices found here
    for spec in registry.get(name).config_cls.specs():
        if spec.name in shared:
            continue
        for choice in spec.knob.choices or ():
            labelled = dict(spec.knob.choice_labels).get(choice) or CHOICE_NAMES.get(choice)
            assert labelled and spec.knob.choice_label(choice) == labelled, (spec.name, choice)


def test_dp_bayes_methods_are_offered_by_name():
    at = _page("pages/dp_bayes.py")
    _assert_clean(at)
    assert at.selectbox(key="form.dp_bayes.method").options == [
        "exponential mechanism (seed)", "sufficient-statistics perturbation (noise-aware)",
        "DP variational inference (DP-SGD)", "all three (sweep mode only)"]
    split = _page("pages/split_label.py")
    _assert_clean(split)
    assert split.selectbox(key="form.split_label.protection").options == [
        "no protection", "isotropic noise", "max norm alignment", "Marvell (optimal noise for a sumKL budget)"]


def test_a_stored_run_with_a_choice_this_version_lacks_opens_with_a_field_error(store):
    """A run stored by another version (here model 'scatter_resnet', which this one lacks) opens: the form shows
    the stored value and names the field and its allowed values, instead of a traceback."""
    run_id = run_from_published_preset(store)
    config = dict(store.get_run(run_id).config) | {"model": "scatter_resnet"}
    other = store.create_run("dpsgd", config, source="another version")
    at = _page("pages/dpsgd.py", run=other)
    _assert_clean(at)
    assert at.selectbox(key="form.dpsgd.model").value == "scatter_resnet"
    assert any("**Model** must be one of" in e.value and "scatter_resnet" in e.value for e in at.error)


def test_a_published_epsilon_unlike_the_headline_is_explained_in_one_line():
    from privengine.claims import PrivacyClaim
    from ui.run_panel import two_epsilons_text

    published = registry.get("pate").preset("mnist-confident-gnmax").published
    headline = PrivacyClaim("data-independent (a priori)", 7.35, 1e-5, "RDP", "add/remove one", headline=True)
    text = two_epsilons_text(published, [headline])
    assert text.startswith("Why two ε: the published ε = 1.97 is the paper's own figure (realised data-dependent ε")
    assert "headline ε = 7.35 is its data-independent (a priori) claim" in text
    assert two_epsilons_text(published, [headline.__class__(**{**headline.__dict__, "epsilon": 1.975})]) is None


def test_the_form_follows_the_url_back_from_a_preset_link():
    """Issue 29, item 8: Back from ``/pate?preset=quick-demo`` to ``/pate`` kept the preset's values in the form
    while the URL named none."""
    from privengine import registry

    config_cls = registry.get("pate").config_cls
    at = _page("pages/pate.py", preset="quick-demo")
    _assert_clean(at)
    assert next(w for w in at.number_input if w.label == "Teachers").value == 50 != config_cls().teachers
    del at.query_params["preset"]
    at.run()
    _assert_clean(at)
    assert next(w for w in at.number_input if w.label == "Teachers").value == config_cls().teachers


def test_an_active_run_keeps_the_place_of_its_claim_so_the_charts_do_not_jump_when_it_ends(store):
    """Issue 29, item 8: the claim box appeared above the charts when a run ended and pushed them down."""
    running = store.create_run("dpsgd", {})
    store.mark_running(running, device="cpu")
    at = _page("pages/dpsgd.py", run=running)
    _assert_clean(at)
    assert any("privacy claim appears here when it ends" in m.value for m in at.markdown)
    store.mark_ended(running, "stopped", summary={})
    split = store.create_run("split_label", {})  # states no (ε, δ): nothing to hold a place for
    store.mark_running(split, device="cpu")
    at = _page("pages/split_label.py", run=split)
    _assert_clean(at)
    assert not any("privacy claim appears here" in m.value for m in at.markdown)
    store.mark_ended(split, "stopped", summary={})


@pytest.mark.parametrize("query", [{"preset": "nope"}, {"config": '{"teachers": 0}'}, {"config": '{"nope": 1}'},
                                   {"config": "[1, 2]"}, {"preset": "quick-demo", "config": '{"teachers": 0}'}],
                         ids=["unknown preset", "bad value", "unknown field", "no object", "preset, bad config"])
def test_a_rejected_link_launches_nothing_and_says_why_under_launch(store, query):
    """Issue 40, item 2: a link whose preset or config was rejected showed "not used" at the top and then launched
    the mechanism's defaults; now nothing starts, and the reason sits under the Launch button."""
    at = _page("pages/pate.py", launch="1", **query)
    _assert_clean(at)
    assert store.list_runs(mechanism="pate") == []
    assert any(e.value.startswith("The link asked to launch, but nothing was launched: The ") for e in at.error)


def test_a_config_link_applies_on_top_of_its_preset():
    """Issue 40, item 2: ``preset`` with ``config`` applied the config on the mechanism's defaults, not the preset."""
    at = _page("pages/dpsgd.py", preset="fmnist-scatter-eps3", config='{"epochs": 2.0}')
    _assert_clean(at)
    assert at.number_input(key="form.dpsgd.epochs").value == 2.0
    assert at.number_input(key="form.dpsgd.batch_size").value == 8192  # the preset's, not the default 100
    assert at.selectbox(key="form.dpsgd.model").value == "scatter_linear"
