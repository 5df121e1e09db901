"""The CLI, driven as a user would, with the toy mechanism as a plugin: in-process through ``cli.main`` (argv,
stdout, stderr and the exit status, as a shell sees them), and once through a ``python -m privengine`` subprocess.
The ``--json`` guard against anything else reaching the process's stdout is tested by a subprocess in
``test_faults.py``."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.conftest import ROOT, run_cli, subprocess_env

cli = run_cli  # in-process through cli.main (see tests/conftest.py)


def test_python_m_privengine_exits_with_the_commands_status_and_one_error_line():
    """The real entry point, once: a bad value exits 2 with one line on stderr and nothing on stdout."""
    done = subprocess.run([sys.executable, "-m", "privengine", "run", "toy", "--delay", "9"], cwd=ROOT,
                          env=subprocess_env(), capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.strip().splitlines() == ["privengine: error: `delay` must be in [0, 5]; got 9.0"]


def test_good_run_lands_in_the_store_and_can_be_shown_and_exported(private_home):
    done = cli("run", "toy", "--steps", "3", "--scales", "0.5,1", "--json")
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["state"] == "finished" and result["config"]["scales"] == [0.5, 1.0]
    assert result["source"] == "cli"
    run_id = result["id"]

    from privengine.store import RunStore

    assert RunStore().get_run(run_id).summary["steps_done"] == 3  # same store as the dashboard's

    listed = cli("runs")
    assert run_id in listed.stdout and "finished" in listed.stdout and "ε = 1, δ = 1e-05 [toy]" in listed.stdout
    shown = cli("show", run_id)
    assert "privacy (headline): ε = 1, δ = 1e-05 [toy]" in shown.stdout and "accountant:" in shown.stdout
    csv = cli("export", run_id, "--format", "csv")
    assert csv.returncode == 0 and csv.stdout.splitlines()[0] == "step,acc,loss"
    exported = json.loads(cli("export", run_id, "--format", "json").stdout)
    assert exported["run"]["id"] == run_id
    assert exported["headline_privacy"]["label"] == "toy" and exported["headline_privacy"]["headline"] is True


def test_bad_value_exits_2_with_one_line_naming_the_field():
    done = cli("run", "toy", "--delay", "9")
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == ["privengine: error: `delay` must be in [0, 5]; got 9.0"]
    not_a_number = cli("run", "toy", "--steps", "many")
    assert not_a_number.returncode == 2
    assert not_a_number.stderr.strip() == "privengine: error: `steps` must be an integer; got 'many'"


def test_unknown_flag_and_mechanism_exit_2_in_one_line():
    flag = cli("run", "toy", "--stepz", "3")
    assert flag.returncode == 2 and len(flag.stderr.strip().splitlines()) == 1
    assert "--stepz" in flag.stderr
    mech = cli("run", "nope")
    assert mech.returncode == 2 and len(mech.stderr.strip().splitlines()) == 1
    assert "nope" in mech.stderr


def test_cross_field_rule_and_missing_run():
    rule = cli("run", "toy", "--steps", "2", "--fail-at", "5")
    assert rule.returncode == 2 and "`fail_at` must be below steps" in rule.stderr
    missing = cli("show", "deadbeef")
    assert missing.returncode == 2 and "no run with id 'deadbeef'" in missing.stderr


def test_failed_run_exits_1_and_is_stored():
    done = cli("run", "toy", "--steps", "3", "--fail-at", "1")
    assert done.returncode == 1
    assert "RuntimeError: toy failure at step 1" in done.stderr


def test_list_names_every_mechanism():
    done = cli("list")
    assert done.returncode == 0 and "toy" in done.stdout and "protects:" in done.stdout


def test_presets_are_listed_and_a_bad_preset_names_the_known_ones(private_home):
    listed = cli("presets", "--json")
    assert listed.returncode == 0, listed.stderr
    rows = json.loads(listed.stdout)
    assert all(set(r) >= {"mechanism", "name", "description", "published"} for r in rows)
    bad = cli("run", "toy", "--preset", "nope")
    assert bad.returncode == 2 and "`preset` must be one of toy's presets" in bad.stderr


@pytest.mark.slow
def test_a_run_from_a_preset_records_it_and_that_flags_changed_it(private_home):
    done = cli("run", "dp_bayes", "--preset", "quick-demo", "--n-records", "100", "--vi-steps", "20",
               "--warmup-steps", "10", "--burn-in", "10", "--steps", "30", "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["source"] == "cli (preset quick-demo, modified)"  # the page draws its figure


def test_where_a_run_trains_and_reads_its_data_and_its_seed_do_not_modify_a_preset():
    """A preset reproduces a setting: the seed, device, data root and noise source are not part of it (the PATE
    MNIST runs with --data-root were marked "modified" before)."""
    from privengine import registry
    from privengine.presets import changed_fields

    preset = registry.get("pate").preset_config("mnist-confident-gnmax").to_dict()
    moved = preset | {"seed": 2, "device": "cpu", "data_root": "/data", "secure_noise": True, "download": True}
    assert changed_fields(preset, moved) == []
    assert changed_fields(preset, moved | {"queries": 400}) == ["queries"]
    assert changed_fields(preset, {k: v for k, v in moved.items() if k != "student"}) == []  # an older run


def test_runs_and_show_word_claim_counts_as_the_pages_do(store):
    from privengine.claims import PrivacyClaim
    from privengine.figures.text import headline_text

    claim = PrivacyClaim("all 2 models of this run released together", 2.5, 1e-5, "Opacus PRV accountant",
                         "add or remove one example", headline=True)
    run_id = store.create_run("toy", {"steps": 1})
    store.mark_ended(run_id, "finished", summary={"privacy": [claim.to_dict()]})
    listed = cli("runs")
    assert listed.returncode == 0, listed.stderr
    line = next(x for x in listed.stdout.splitlines() if x.startswith(run_id))
    assert "[both models of this run released together]" in line and "all 2" not in line
    assert line.endswith(headline_text(claim))  # the same words as the runs tables of the pages
    shown = cli("show", run_id)
    assert "privacy (headline): ε = 2.5, δ = 1e-05 [both models of this run released together]" in shown.stdout
    assert "all 2" not in shown.stdout


def test_a_run_is_named_and_annotated_and_shows_it_everywhere(store):
    """Issue 29 (run names and notes): set from the CLI, listed by runs (text and --json), shown by show and in the
    report; a name that does not fit a table cell is refused naming the field and its limit, and changes nothing."""
    run_id = store.create_run("toy", {"steps": 2})
    store.mark_ended(run_id, "finished", summary={})
    done = cli("label", run_id, "--name", "baseline for the talk", "--notes", "eps 1; *seed* 3")
    assert done.returncode == 0, done.stderr
    assert "baseline for the talk" in cli("runs").stdout
    (listed,) = json.loads(cli("runs", "--json").stdout)
    assert (listed["name"], listed["notes"]) == ("baseline for the talk", "eps 1; *seed* 3")
    shown = cli("show", run_id).stdout
    assert f"run baseline for the talk ({run_id})" in shown and "notes: eps 1; *seed* 3" in shown

    too_long = cli("label", run_id, "--name", "x" * 81)
    assert too_long.returncode == 2 and "`Run name` must be one line of at most 80 characters" in too_long.stderr
    assert store.get_run(run_id).name == "baseline for the talk"
    assert cli("label", run_id).returncode == 2  # nothing to set: said, not silently ignored
    cleared = cli("label", run_id, "--notes", "")
    assert cleared.returncode == 0 and store.get_run(run_id).notes == "" and store.get_run(run_id).name

    from privengine.report import build

    html = build(store, run_id).html
    assert f"run baseline for the talk ({run_id})" in html and "<dt>notes</dt>" not in html  # notes cleared
