"""Reproducible noise is keyed by the private data (issue 24, item 2).

Regression: the seeded noise streams were keyed by the seed and the configuration only, so retraining one
configuration on a neighbouring data set (a deletion or correction request; another data root while the stored
``data_root`` stays "") replayed every noise draw and Poisson batch, and the two outputs differed by a noise-free
function of the changed record (on linreg 'the outputs differ' identified 20 of 20 replaced records). Now every
mechanism passes :func:`privengine.randomness.data_fingerprint` of the private data it protects to
:func:`~privengine.randomness.noise_generator` (a required argument): the same data replays exactly, a
neighbouring data set draws independent noise.
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest
import torch

from privengine.randomness import FINGERPRINT_WORDS, data_fingerprint, noise_caveat, noise_generator

pytestmark = pytest.mark.filterwarnings("ignore:Full backward hook is firing")

CPU = torch.device("cpu")


class _Captured(Exception):
    """Raised by a wrapped noise_generator once the mechanism has built its generator: ends the run there."""


def _capturing(monkeypatch, module, *, stop: bool = True) -> list[tuple[tuple, dict, torch.Generator]]:
    """Wrap ``module.noise_generator``: record each call (key, keywords, the real generator it built); raise
    :class:`_Captured` after the first call if ``stop``."""
    real = noise_generator
    calls = []

    def wrapper(config, *key, **kw):
        generator = real(config, *key, **kw)
        calls.append((key, kw, generator))
        if stop:
            raise _Captured
        return generator

    monkeypatch.setattr(module, "noise_generator", wrapper)
    return calls


def _draw(generator: torch.Generator) -> torch.Tensor:
    return torch.randn(8, generator=generator, device=generator.device)


# --------------------------------------------------------------------------- the fingerprint and the key


def test_data_fingerprint_changes_with_one_record_and_only_then():
    gen = torch.Generator().manual_seed(0)
    x, y = torch.randn(100, 5, generator=gen), torch.randint(0, 10, (100,), generator=gen)
    words = data_fingerprint(x, y)
    assert len(words) == FINGERPRINT_WORDS and all(0 <= w < 2 ** 32 for w in words)
    assert data_fingerprint(x, y) == words  # recomputed
    assert data_fingerprint(x.clone(), y.clone()) == words  # the contents count, not the objects
    assert data_fingerprint(x.numpy(), y.numpy()) == words  # numpy or torch alike
    assert data_fingerprint(x.T.contiguous().T, y) == words  # the layout in memory does not count
    x_corrected, y_corrected = x.clone(), y.clone()
    x_corrected[37, 2] = x[37, 2] + 0.5
    y_corrected[37] = (y[37] + 1) % 10
    deleted = torch.arange(100) != 37
    others = {
        "one feature corrected": data_fingerprint(x_corrected, y),
        "one label corrected": data_fingerprint(x, y_corrected),
        "one record deleted": data_fingerprint(x[deleted], y[deleted]),
        "another dtype": data_fingerprint(x.double(), y),
        "another shape": data_fingerprint(x.reshape(50, 10), y),
        "another order of the arrays": data_fingerprint(y, x),
    }
    assert len(set(others.values()) | {words}) == len(others) + 1, others


def test_noise_generator_requires_the_private_data_key():
    from privengine.dpsgd.config import DPSGDConfig

    config = DPSGDConfig()
    with pytest.raises(TypeError):
        noise_generator(config, 0)  # the missing argument is the point
    for wrong in ((), None, (1, 2, 3, 4), tuple(range(FINGERPRINT_WORDS - 1)), (2 ** 32,) * FINGERPRINT_WORDS):
        with pytest.raises(TypeError, match="data_fingerprint"):
            noise_generator(config, 0, data=wrong)
        with pytest.raises(TypeError, match="data_fingerprint"):  # checked in secure mode too
            noise_generator(config.replace(secure_noise=True), 0, data=wrong)
    a, b = data_fingerprint(torch.zeros(3)), data_fingerprint(torch.tensor([0.0, 0.0, 1.0]))
    assert torch.equal(_draw(noise_generator(config, 0, data=a)), _draw(noise_generator(config, 0, data=a)))
    assert not torch.equal(_draw(noise_generator(config, 0, data=a)), _draw(noise_generator(config, 0, data=b)))


def test_the_reproducible_caveat_says_what_replays_and_what_is_not_protected():
    text = noise_caveat(secure=False)
    assert text.startswith("Noise source: reproducible")
    for needle in ("fingerprint (SHA-256) of its private data", "same configuration, seed and private data",
                   "neighbouring data set", "independent noise", "anyone holding the record and the private data",
                   "can regenerate the noise", "Turn on secure noise"):
        assert needle in text, needle


# --------------------------------------------------------------------------- DP-SGD


def _linreg():
    from privengine.dpsgd.data import load_task

    return load_task(dataset="linreg", seed=0, public_fraction=0.1, train_limit=0, data_root="", device=CPU)


def _neighbour(task, i: int = 0):
    """The private split with record ``i`` replaced by another record (a public one): a neighbouring data set."""
    x, y = task.x_private.clone(), task.y_private.clone()
    x[i], y[i] = task.x_public[0], task.y_public[0]
    return replace(task, x_private=x, y_private=y)


def test_dpsgd_on_a_neighbouring_data_set_draws_independent_noise_and_batches():
    """The reproduction: linreg, one configuration and seed, trained on a data set and on a neighbour (one record
    replaced). Before the fix the weights differed by the noise-free effect of one record (at most 2 C lr / B per
    step); now by fresh noise (about sqrt(2 d steps) sigma C lr / B). The same data still replays exactly."""
    from privengine.dpsgd.config import DPSGDConfig
    from privengine.dpsgd.training import Plan, Training, _loader

    sigma, lr, steps = 1.0, 0.5, 3
    config = DPSGDConfig(dataset="linreg", alphas=(0.0,), noise_mode="sigma", noise_multiplier=sigma, lr=lr,
                         n_seeds=1, accountant="rdp")
    task = _linreg()
    plan = Plan(noise_multiplier=sigma, sample_rate=config.batch_size / task.n_private, steps=steps,
                expected_batch_size=config.batch_size)

    def weights(t) -> torch.Tensor:
        training = Training(t, config, plan, alpha=0.0, seed=0, index=0, device=CPU)
        training.run(lambda: False, lambda *args: None)
        return torch.cat([p.detach().reshape(-1) for p in training.model.parameters()])

    def batches(t) -> list[list[int]]:
        return [list(map(int, b)) for b in _loader(t, config, plan, 0, 0).batch_sampler]

    same, neighbour = _linreg(), _neighbour(task)
    assert torch.equal(weights(task), weights(same)) and batches(task) == batches(same)  # a replay
    d = task.x_private.shape[1] + 1
    noise_free = 2 * config.max_grad_norm * lr / config.batch_size * steps  # one record's effect, at most (~0.03)
    fresh = math.sqrt(2 * d * steps) * sigma * config.max_grad_norm * lr / config.batch_size  # ~0.17
    difference = float((weights(task) - weights(neighbour)).norm())
    assert difference > max(0.5 * fresh, 3 * noise_free), (difference, fresh, noise_free)
    assert batches(task) != batches(neighbour)  # the Poisson batches are not replayed either


def test_dpsgd_every_noise_stream_is_keyed_by_the_private_split_only(monkeypatch):
    """The noise, the Poisson sampling (on the CPU, and a model batch's on a GPU) and the private normalisation's
    noise all get ``task.private_fingerprint``, the fingerprint of the private inputs and targets (not of the public
    or held-out parts)."""
    import privengine.dpsgd.training as training
    from privengine.dpsgd.config import DPSGDConfig
    from privengine.dpsgd.data import Task

    task = _linreg()
    assert task.private_fingerprint == data_fingerprint(task.x_private, task.y_private)
    assert task.private_fingerprint is task.private_fingerprint  # computed once per loaded task
    assert replace(task, x_public=task.x_public + 1).private_fingerprint == task.private_fingerprint
    assert _neighbour(task).private_fingerprint != task.private_fingerprint

    calls = _capturing(monkeypatch, training, stop=False)
    config = DPSGDConfig(dataset="linreg", alphas=(0.0,), noise_mode="sigma", noise_multiplier=1.0, n_seeds=1)
    plan = training.Plan(noise_multiplier=1.0, sample_rate=0.01, steps=1, expected_batch_size=config.batch_size)
    training.Training(task, config, plan, alpha=0.0, seed=0, index=0, device=CPU)
    training._loader(task, config, plan, 0, 0)
    training.private_sampler(task, config, plan, 0, 0, on_device=True)  # a model batch's masks on a GPU
    gen = torch.Generator().manual_seed(1)
    images = Task("images", torch.randn(40, 3, 4, 4, generator=gen), torch.zeros(40, dtype=torch.int64),
                  torch.randn(20, 3, 4, 4, generator=gen), torch.zeros(20, dtype=torch.int64), None, None, 10)
    training.fixed_normalizer(images, config.replace(dataset="digits", model="scatter_mlp", normalization="private"),
                         0, 0, CPU)
    streams = {key[-1]: kw["data"] for key, kw, _ in calls}
    assert streams == {training.STREAM_NOISE: task.private_fingerprint,
                       training.STREAM_SAMPLING: task.private_fingerprint,
                       training.STREAM_SAMPLING_ON_DEVICE: task.private_fingerprint,
                       training.STREAM_NORM: images.private_fingerprint}


# --------------------------------------------------------------------------- PATE


def _pate_data():
    from privengine.pate.data import load_pate_data

    return load_pate_data("synthetic")


def _pate_neighbour(data, i: int = 0):
    x, y = data.private_x.clone(), data.private_y.clone()
    x[i], y[i] = data.pool_x[0], data.pool_y[0]
    return replace(data, private_x=x, private_y=y)


def test_pate_data_fingerprint_is_the_teachers_private_data():
    data = _pate_data()
    assert data.private_fingerprint == data_fingerprint(data.private_x, data.private_y)
    assert data.private_fingerprint == _pate_data().private_fingerprint
    assert _pate_neighbour(data).private_fingerprint != data.private_fingerprint
    assert replace(data, pool_x=data.pool_x + 1).private_fingerprint == data.private_fingerprint  # public


def test_pate_aggregator_noise_depends_on_the_teachers_private_data(monkeypatch):
    import privengine.pate.run as pate_run
    from privengine.pate.config import PateConfig
    from tests.memory_reporter import MemoryReporter

    config = PateConfig(dataset="synthetic", teachers=10, teacher_epochs=1, queries=100, baseline=False)
    data = _pate_data()
    draws = []
    for loaded in (data, _pate_data(), _pate_neighbour(data)):
        calls = _capturing(monkeypatch, pate_run)
        monkeypatch.setattr(pate_run, "load_pate_data", lambda *args, loaded=loaded, **kw: loaded)
        with pytest.raises(_Captured):
            pate_run.run(config, MemoryReporter())
        ((key, kw, generator),) = calls
        assert key == (pate_run.NOISE_STREAM,) and kw["data"] == loaded.private_fingerprint
        draws.append(_draw(generator))
    assert torch.equal(draws[0], draws[1]) and not torch.equal(draws[0], draws[2])


def test_pate_sanitized_figure_depends_on_the_teachers_private_data():
    from privengine.pate.config import PateConfig
    from privengine.pate.privacy import analyse

    rng = np.random.default_rng(0)  # teachers that mostly agree: the released figure is not clipped
    votes = np.stack([rng.multinomial(100, rng.dirichlet(np.full(10, 0.05))) for _ in range(40)]).astype(float)
    answered = votes.max(axis=1) > 60
    config = PateConfig(aggregator="confident_gnmax", threshold=60.0, sigma1=30.0, sigma2=15.0, teachers=100,
                        ss_sigma=2.0)
    data = _pate_data()

    def figure(fingerprint) -> float:
        return analyse(votes, answered, config, n_private=60_000, data=fingerprint).sanitized.epsilon

    assert figure(data.private_fingerprint) == figure(_pate_data().private_fingerprint)
    assert figure(data.private_fingerprint) != figure(_pate_neighbour(data).private_fingerprint)


# --------------------------------------------------------------------------- DP-Bayes


def _dp_bayes_config():
    from privengine.dp_bayes.config import DpBayesConfig

    return DpBayesConfig().replace(n_records=500, vi_steps=200, warmup_steps=100, burn_in=200, steps=300)


def _records(config):
    from privengine.dp_bayes.data import synthetic_records

    return synthetic_records(config.model, n=config.n_records, coefficients=config.coefficients,
                             intercept=config.intercept, noise_sd=config.noise_sd, seed=config.data_seed)


def _records_neighbour(records):
    return records.replace_record(0, records.x[1], float(records.y[1]))


def test_dp_bayes_records_fingerprint_changes_with_one_record():
    config = _dp_bayes_config()
    records = _records(config)
    assert records.fingerprint == data_fingerprint(records.x, records.y) == _records(config).fingerprint
    assert _records_neighbour(records).fingerprint != records.fingerprint


def test_dp_bayes_exponential_noise_depends_on_the_private_records(monkeypatch):
    import privengine.dp_bayes.run as dp_run
    from tests.memory_reporter import MemoryReporter

    class Reporter(MemoryReporter):
        stop_was_requested = False

    config = _dp_bayes_config().replace(method="exponential")
    records = _records(config)
    draws = []
    for loaded in (records, _records(config), _records_neighbour(records)):
        calls = _capturing(monkeypatch, dp_run)
        monkeypatch.setattr(dp_run, "synthetic_records", lambda *args, loaded=loaded, **kw: loaded)
        with pytest.raises(_Captured):
            dp_run.run_exponential(config, Reporter())
        ((key, kw, generator),) = calls
        assert key == (dp_run.NOISE_STREAM,) and kw["data"] == loaded.fingerprint
        draws.append(_draw(generator))
    assert torch.equal(draws[0], draws[1]) and not torch.equal(draws[0], draws[2])


@pytest.mark.parametrize("method", ["ssp", "dpvi"])
def test_dp_bayes_ssp_and_dpvi_noise_depends_on_the_released_data_sets(monkeypatch, method):
    import privengine.dp_bayes.comparison as comparison
    from tests.memory_reporter import MemoryReporter

    config = _dp_bayes_config().replace(method=method)
    # the release functions get the stream's generator: return it instead of releasing
    monkeypatch.setattr(comparison.R, f"{method}_releases", lambda config, data, problems, generator, **kw: generator)

    def generator(data):
        return comparison._method_releases(config, method, data, [(0, 1.0)], MemoryReporter(), "test")

    data = comparison.datasets(config, 2)
    neighbour = [_records_neighbour(data[0]), data[1]]
    assert torch.equal(_draw(generator(data)), _draw(generator(comparison.datasets(config, 2))))
    assert not torch.equal(_draw(generator(data)), _draw(generator(neighbour)))


# --------------------------------------------------------------------------- split learning


def test_split_label_protection_noise_depends_on_the_training_data():
    from privengine.split_label import data as datasets
    from privengine.split_label.config import SplitLabelConfig
    from privengine.split_label.run import _Training, settings_of

    config = SplitLabelConfig(n_train=400, n_features=10, batch_size=100, bottom_widths=(8, 4),
                              protection="iso")
    data = datasets.load(config)
    y = data.y_train.clone()
    y[0] = 1.0 - y[0]  # one label corrected
    neighbour = replace(data, y_train=y)
    assert data.private_fingerprint == data_fingerprint(data.x_train, data.y_train)
    assert neighbour.private_fingerprint != data.private_fingerprint
    assert replace(data, x_test=data.x_test + 1).private_fingerprint == data.private_fingerprint

    def draw(d) -> torch.Tensor:
        return _draw(_Training(settings_of(config)[0], d, d, config, CPU, index=0).noise)

    assert torch.equal(draw(data), draw(datasets.load(config)))
    assert not torch.equal(draw(data), draw(neighbour))


def test_a_loaded_tasks_fingerprint_is_hashed_in_the_background_and_bound_to_its_tensors():
    """load_task hashes the private split in a thread (overlapping the calibration); the words are those of the
    split, and a task whose split is other tensors (a neighbour made with dataclasses.replace) hashes its own."""
    from privengine.dpsgd.data import load_task

    task = load_task(dataset="digits", seed=0, public_fraction=0.1, train_limit=0, data_root="", device=CPU)
    assert task.fingerprint_pending is not None and task.fingerprint_pending.of(task.x_private, task.y_private)
    assert task.private_fingerprint == data_fingerprint(task.x_private, task.y_private)
    neighbour = _neighbour(task)
    assert not neighbour.fingerprint_pending.of(neighbour.x_private, neighbour.y_private)
    assert neighbour.private_fingerprint == data_fingerprint(neighbour.x_private, neighbour.y_private)
    assert neighbour.private_fingerprint != task.private_fingerprint


def test_a_private_split_written_in_place_after_its_hash_is_hashed_again():
    """Issue 35, item 7: the background fingerprint was bound to the tensors' identity only, so a split edited in
    place after (or while) it was hashed kept the old words: its noise keys were those of other data. Now the
    tensors' in-place versions are recorded when the hash begins, and a changed split is hashed again."""
    from privengine.dpsgd.data import load_task

    task = load_task(dataset="digits", seed=0, public_fraction=0.1, train_limit=0, data_root="", device=CPU)
    before = task.fingerprint_pending.words.result()  # the background hash has finished
    task.x_private[0] += 1.0  # in place: the same tensor object
    assert task.private_fingerprint == data_fingerprint(task.x_private, task.y_private) != before
    task.y_private[1] = (task.y_private[1] + 1) % 10
    assert task.private_fingerprint == data_fingerprint(task.x_private, task.y_private)
    assert task.private_fingerprint == task.private_fingerprint  # hashed once per version, then reused


def test_a_knob_added_later_keeps_earlier_runs_keys_at_its_default():
    """DP-SGD's ``private_size`` (issue 35) is ``unkeyed_default``: at its default (0, the documented size, which
    computes exactly what a run computed before the knob existed) the config digest is the one of the config without
    it, so runs published before replay with the same noise; any declared value keys its own noise. (So is
    ``keep_model``, issue 38: on by default; and DP-Bayes' ``dataset`` and ``private_size`` and split learning's
    ``private_size``, issue 38 part 2: the synthetic and built-in data sets' runs keep their keys.)"""
    import hashlib
    import json

    from privengine.dpsgd.config import DPSGDConfig
    from privengine.randomness import config_digest

    from privengine.dp_bayes.config import DpBayesConfig
    from privengine.split_label.config import SplitLabelConfig

    # each config, the knobs added after its runs were first published (DP-Bayes' dataset and private_size and split
    # learning's private_size: issue 38, part 2), and a changed value of one of them that the config accepts
    later = [(DPSGDConfig(dataset="digits", model="linear"), ("private_size", "keep_model"), {"private_size": 1000}),
             (DpBayesConfig(), ("dataset", "private_size", "keep_model"), {"keep_model": False}),
             (DpBayesConfig(model="logistic", method="dpvi"), ("dataset", "private_size", "keep_model"),
              {"keep_model": False}),
             (SplitLabelConfig(), ("private_size", "keep_model"), {"keep_model": False})]
    for config, added, changed in later:
        before = {k: v for k, v in config.to_dict().items() if k not in ("secure_noise", *added)}
        digest = hashlib.sha256(json.dumps(before, sort_keys=True).encode()).digest()
        assert config_digest(config) == tuple(int.from_bytes(digest[i:i + 4], "little") for i in range(0, 16, 4))
        assert config_digest(config.replace(**changed)) != config_digest(config)


def test_a_split_of_inference_tensors_is_hashed_and_never_reused():
    """Inference tensors keep no version counter (review of 8b27325, finding D): loading under inference mode works,
    and their fingerprint is taken afresh at every use."""
    from privengine.dpsgd.data import load_task

    with torch.inference_mode():
        task = load_task(dataset="digits", seed=0, public_fraction=0.1, train_limit=0, data_root="", device=CPU)
    assert task.private_fingerprint == data_fingerprint(task.x_private, task.y_private)
    assert not task.fingerprint_pending.of(task.x_private, task.y_private)
