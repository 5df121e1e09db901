"""DP-SGD takes its private size from the config, never from the data (issue 35, item 1).

Regression: q = B / n_private and steps = int(epochs / q) were read from the loaded private split, and the summary
published ``n_private``. Under the stated add/remove relation the published size alone told a data set from its
neighbour, and for some sizes the number of released iterates changed (the quick demo's linreg: 9 500 private
examples gave 950 steps, 9 499 gave 949). Now q, the step count, the private normalisation's divisor, the delta
caveat and the published size come from the declared private size N (the config's ``private_size``, or the built-in
data set's documented size), so a data set and its neighbour minus one record get the same plan and the same
published fields; only the results differ.
"""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
import torch

import privengine.dpsgd.mechanism  # noqa: F401  (registers dpsgd)
from privengine.claims import claims_of
from privengine.dpsgd import run as dpsgd_run
from privengine.dpsgd.config import DPSGDConfig, declared_private_size, private_examples, published_size
from privengine.dpsgd.data import load_task
from privengine.dpsgd.privacy import NEIGHBOURING
from privengine.errors import ConfigError
from privengine.randomness import data_fingerprint
from tests.conftest import SHARED_DATA
from tests.memory_reporter import MemoryReporter

pytestmark = pytest.mark.filterwarnings("ignore:Full backward hook is firing")

CPU = torch.device("cpu")
# The reproduction, made short: linreg's 9 500 private examples, B = 100, one epoch: 95 steps; read from a
# split of 9 499 the old plan took int(1 / (100 / 9499)) = 94.
CONFIG = DPSGDConfig(dataset="linreg", epochs=1.0, alphas=(0.0,), n_seeds=1, noise_mode="target_epsilon",
                     target_epsilon=3.0, accountant="rdp")


def _is_result(key: str) -> bool:
    """Whether a summary key holds the trained models' results (what neighbours may differ in): the model rows,
    the comparison, the best setting's values and each setting's "<setting>: <metric>" line."""
    return key in ("models", "comparison") or key.startswith("best_") or ": " in key


def _load(config: DPSGDConfig):
    return load_task(dataset=config.dataset, seed=config.data_seed, public_fraction=config.public_fraction,
                     train_limit=config.train_limit, data_root=config.data_root, device=CPU)


def _run_on(task, config: DPSGDConfig, monkeypatch) -> tuple[dict, MemoryReporter]:
    """``run(config)`` with its data loading replaced by ``task`` (a data set the config does not name)."""
    monkeypatch.setattr(dpsgd_run, "load", lambda *args, **kwargs: task)
    reporter = MemoryReporter("cpu")
    return dpsgd_run.run(config, reporter), reporter


@pytest.mark.parametrize("dataset, public_fraction, train_limit",
                         [("linreg", 0.05, 0), ("linreg", 0.2, 3000), ("digits", 0.1, 0), ("digits", 0.37, 500)])
def test_the_documented_size_of_an_embedded_data_set_is_its_loaded_private_split(dataset, public_fraction,
                                                                                train_limit):
    """The default declaration (private_size 0) is the documented size, which is exactly what the loader gives
    for the embedded data: the plan of every existing configuration is unchanged by the fix."""
    config = DPSGDConfig(dataset=dataset, public_fraction=public_fraction, train_limit=train_limit, model="linear")
    assert declared_private_size(config) == private_examples(dataset, train_limit, public_fraction)
    assert declared_private_size(config) == _load(config).n_private


@pytest.mark.parametrize("dataset", ["mnist", "fashion_mnist"])
def test_the_documented_size_of_a_real_image_data_set_is_its_loaded_private_split(dataset):
    folder = {"mnist": "MNIST", "fashion_mnist": "FashionMNIST"}[dataset]
    if not (SHARED_DATA / folder).exists():
        pytest.skip(f"the {folder} files are not in {SHARED_DATA}")
    config = DPSGDConfig(dataset=dataset, data_root=str(SHARED_DATA), alphas=(0.0,), model="linear")
    assert declared_private_size(config) == _load(config).n_private == 60_000 - 3_000


def test_a_data_set_and_its_neighbour_minus_one_record_get_the_same_plan_and_published_fields(monkeypatch):
    task = _load(CONFIG)
    neighbour = replace(task, x_private=task.x_private[1:], y_private=task.y_private[1:])
    assert (task.n_private, neighbour.n_private) == (9500, 9499)
    mine, my_reporter = _run_on(task, CONFIG, monkeypatch)
    theirs, their_reporter = _run_on(neighbour, CONFIG, monkeypatch)
    assert mine["steps_per_model"] == theirs["steps_per_model"] == 95
    assert mine["sample_rate"] == theirs["sample_rate"] == 100 / 9500
    assert mine["private_size"] == theirs["private_size"] == 9500
    assert "n_private" not in mine and "n_private" not in theirs
    assert set(mine) == set(theirs)
    published = {k: v for k, v in mine.items() if not _is_result(k)}
    assert published == {k: v for k, v in theirs.items() if not _is_result(k)}  # the claims included
    assert {"privacy", "sample_rate", "steps_per_model", "noise_multiplier", "private_size"} <= set(published)
    assert [m["steps"] for m in mine["models"]] == [m["steps"] for m in theirs["models"]] == [95]
    # the neighbour's own count is published nowhere: not in its summary, nor in its log
    assert "9499" not in json.dumps(theirs) and not any("9499" in line for line in their_reporter.logs)
    assert my_reporter.logs[0] == their_reporter.logs[0]


def test_the_claim_states_its_relation_and_where_the_size_comes_from():
    assert "declared private size" in NEIGHBOURING and "add or remove" in NEIGHBOURING
    fields = published_size(CONFIG)
    assert fields["private_size"] == 9500
    assert "documented size" in fields["private_size_basis"] and "linreg" in fields["private_size_basis"]
    declared = published_size(CONFIG.replace(private_size=9000))
    assert declared == {"private_size": 9000, "private_size_basis": "N = 9000, declared in the config (private size)"}


def test_a_declared_size_sets_q_and_the_steps(monkeypatch):
    """A declared N other than the data's count is taken as declared: q = B / N, steps = int(epochs / q)."""
    task = _load(CONFIG)
    summary, _ = _run_on(task, CONFIG.replace(private_size=5000, noise_mode="sigma", noise_multiplier=1.0),
                         monkeypatch)
    assert summary["sample_rate"] == 100 / 5000 and summary["steps_per_model"] == 50
    assert claims_of(summary)[0].epsilon > 0


def test_a_batch_not_below_the_declared_size_is_refused_by_the_config():
    with pytest.raises(ConfigError) as err:
        CONFIG.replace(private_size=100).validate()
    assert err.value.field == "batch_size" and "declared private size (100)" in str(err.value)


def test_the_membership_game_plans_from_half_the_declared_size_not_the_pool():
    """The attacked recipe's q is B / floor(N / 2), N declared: the same for any pool the data gives."""
    from privengine.audit.interface import NullReporter
    from privengine.audit.membership_dpsgd import _Attack, game_plan

    config = CONFIG.replace(dataset="digits", model="linear", noise_mode="sigma", noise_multiplier=1.0)
    task = _load(config)  # 1 367 private examples: N = 1797 - 359 held out - 71 public
    plans = []
    for pool in (task, replace(task, x_private=task.x_private[1:], y_private=task.y_private[1:])):
        attack = _Attack(config, pool, attack="loss", refs=2, seed=0, offline=False, guesses=10, confidence=0.95,
                         device=CPU, reporter=NullReporter())
        assert attack.recipe.private_size == 0  # the recipe keeps its declaration (and its noise keys)
        plans.append(game_plan(attack.recipe, NullReporter()))
    assert plans[0] == plans[1]
    assert plans[0].sample_rate == 100 / (1367 // 2)
    with pytest.raises(ConfigError) as err:
        game_plan(config.replace(batch_size=700), NullReporter())
    assert err.value.field == "batch_size" and "half of the recipe's 1367 private examples, 683" in str(err.value)


def test_a_split_of_another_size_than_declared_gets_noise_keys_of_its_own():
    """Review of 8b27325, finding A: the default declaration keeps earlier runs' keys (its digest leaves it out),
    which is right only where the split has the documented size, so that N plans what the count planned before. A
    data root holding another version of the data (here: a split one record short of the declared N) plans from N
    now, not from its count as before: its data key is folded with N (still a fingerprint's 8 words), so it does not
    share noise with the old plan."""
    from privengine.dpsgd.data import with_declared_size
    from privengine.randomness import FINGERPRINT_WORDS

    task = load_task(dataset="linreg", seed=0, public_fraction=0.05, train_limit=0, data_root="", device=CPU,
                     declared_size=9500)
    assert task.private_fingerprint == data_fingerprint(task.x_private, task.y_private)  # the split's words alone
    short = replace(task, x_private=task.x_private[1:], y_private=task.y_private[1:])
    own = data_fingerprint(short.x_private, short.y_private)
    assert short.private_fingerprint == with_declared_size(own, 9500) != own
    assert len(short.private_fingerprint) == FINGERPRINT_WORDS
    assert with_declared_size(own, 9501) != with_declared_size(own, 9500)


@pytest.mark.parametrize("model_batch", [True, False], ids=["model batch", "Opacus path"])
def test_runs_train_on_a_split_whose_count_is_not_the_declared_size(monkeypatch, model_batch):
    """Review of 850a7cd, finding 1: the folded key was once N appended as a ninth word, which every noise stream
    refused, so a run on a neighbour loaded through run.load (or with private_size set) failed before training. Both
    paths now train it, with the plan of N, and replay on the same data."""
    config = CONFIG.replace(noise_mode="sigma", noise_multiplier=1.0, epochs=0.05, private_size=9600)
    task = load_task(dataset="linreg", seed=0, public_fraction=0.05, train_limit=0, data_root="", device=CPU,
                     declared_size=9600)

    def run_on(t):
        monkeypatch.setattr(dpsgd_run, "load", lambda *args, **kwargs: t)
        return dpsgd_run.run(config, MemoryReporter("cpu"), model_batch=model_batch)

    first, again = run_on(task), run_on(replace(task))
    assert first["steps_per_model"] == 4 and first["sample_rate"] == 100 / 9600
    assert first["models"][0]["excess_risk"] == again["models"][0]["excess_risk"]  # the same keys replay
    neighbour = run_on(replace(task, x_private=task.x_private[1:], y_private=task.y_private[1:]))
    assert neighbour["steps_per_model"] == 4 and neighbour["sample_rate"] == first["sample_rate"]


def test_the_public_count_comes_from_the_documented_size(monkeypatch):
    """Review of 8b27325, finding C: the public part's count is published, so it is a function of the config: the
    documented training split's floor(public_fraction * n), not of the loaded file's length. Here the digits file
    is one record short: the public count (and the declared N) stay those of the documented data."""
    import privengine.dpsgd.data as data
    from privengine.dpsgd.config import public_examples

    whole = data._digits()
    for public_fraction in (0.05, 0.2, 0.37):
        config = CONFIG.replace(dataset="digits", model="linear", public_fraction=public_fraction)
        expected = public_examples("digits", 0, public_fraction)
        assert _load(config).n_public == expected
        monkeypatch.setattr(data, "_digits", lambda: (whole[0][1:], whole[1][1:]))
        assert _load(config).n_public == expected
        monkeypatch.undo()
