"""Issue 39, item 1: a model batch on a GPU draws its Poisson masks on the device (privengine.dpsgd.sampling), from a
stream of its own (``STREAM_SAMPLING_ON_DEVICE``), with the law of the CPU's draws: each example of E_k (model k's
examples: all, or its inclusion row) joins model k's batch independently with probability floor(q 2^24) / 2^24 <= q
(privengine.poisson), independently across steps and models.

Where the masks are drawn is a function of the device type (``sampling.poisson_on_device``) and the draw happens on
its generator's device, so on this CPU-only machine the device path runs with CPU generators: the ``on_device``
fixture makes the model batch's choice say yes. The last test runs the real thing on CUDA where there is one.
"""

from __future__ import annotations

import math

import pytest
import torch

from privengine.dpsgd import model_batch, training
from privengine.dpsgd.config import DPSGDConfig
from privengine.dpsgd.data import load_task
from privengine.dpsgd.model_batch import Member, _Batch
from privengine.dpsgd.sampling import padded_index, poisson_on_device
from privengine.dpsgd.training import STREAM_SAMPLING, STREAM_SAMPLING_ON_DEVICE, Plan, private_sampler
from privengine.poisson import poisson_mask
from privengine.randomness import noise_generator

CPU = torch.device("cpu")
CONFIG = DPSGDConfig().replace(dataset="digits", model="linear", epochs=1.0, batch_size=64, noise_mode="sigma",
                               noise_multiplier=1.0, accountant="rdp", alphas=(0.0,))
KEYS = [(0, 0), (0, 1), (1, 2)]  # (seed, index): two models of one seed, one of another
Q = 0.2
ALPHA = 1e-6  # the chance that a bound below fails under the law


def _task(device: torch.device):
    return load_task(dataset="digits", seed=0, public_fraction=0.05, train_limit=0, data_root="", device=device,
                     features="pixels")


@pytest.fixture(scope="module")
def task():
    return _task(CPU)


@pytest.fixture
def on_device(monkeypatch):
    """The model batch draws its masks "on the device" on this CPU: its choice says yes for every device."""
    monkeypatch.setattr(model_batch, "poisson_on_device", lambda device: True)


def _plan(task, steps: int) -> Plan:
    return Plan(noise_multiplier=1.0, sample_rate=Q, steps=steps, expected_batch_size=round(Q * task.n_private))


def _batch(task, steps: int, inclusion: torch.Tensor | None = None, device: torch.device = CPU) -> _Batch:
    members = [Member(0.0, seed, index, lambda *a: None) for seed, index in KEYS]
    return _Batch(task, CONFIG, _plan(task, steps), members, device, inclusion=inclusion)


def _masks(idx: torch.Tensor, valid: torch.Tensor, n: int) -> torch.Tensor:
    """``(K, n)`` bool on the CPU: the batches a padded index holds (its valid slots)."""
    idx, valid = idx.cpu(), valid.cpu()
    masks = torch.zeros(idx.shape[0], n, dtype=torch.bool)
    rows = torch.arange(idx.shape[0])[:, None].expand_as(idx)
    masks[rows[valid], idx[valid]] = True
    return masks


def _hoeffding(trials: int, statistics: int = 1) -> float:
    """t such that ``statistics`` frequencies, each of ``trials`` independent Bernoulli(p), all lie within p +- t
    except with probability ALPHA: P(|X/N - p| >= t) <= 2 exp(-2 N t^2) (Hoeffding), times ``statistics`` (the union
    bound), = ALPHA for t = sqrt(ln(2 statistics / ALPHA) / (2 N))."""
    return math.sqrt(math.log(2 * statistics / ALPHA) / (2 * trials))


def test_the_choice_is_the_device_type():
    assert not poisson_on_device("cpu") and not poisson_on_device(CPU)
    assert poisson_on_device("cuda") and poisson_on_device(torch.device("cuda", 1)) and poisson_on_device("mps")


def test_the_padded_index_of_given_masks():
    """Each row's selected indices in increasing order, then index 0 (not valid); counts on the CPU."""
    masks = torch.tensor([[0, 1, 1, 0, 1], [0, 0, 0, 0, 0], [1, 1, 1, 1, 1], [0, 0, 0, 1, 0]], dtype=torch.bool)
    idx, valid, counts = padded_index(masks)
    assert idx.tolist() == [[1, 2, 4, 0, 0], [0, 0, 0, 0, 0], [0, 1, 2, 3, 4], [3, 0, 0, 0, 0]]
    assert valid.tolist() == [[True] * 3 + [False] * 2, [False] * 5, [True] * 5, [True] + [False] * 4]
    assert counts.tolist() == [3, 0, 5, 1] and counts.device == CPU and idx.dtype == counts.dtype == torch.int64
    idx, valid, counts = padded_index(torch.zeros(2, 4, dtype=torch.bool))  # every batch empty
    assert idx.shape == valid.shape == (2, 0) and counts.tolist() == [0, 0]


def test_the_device_path_draws_from_its_own_stream(task, on_device, monkeypatch):
    """The key: each model's sampling generator is STREAM_SAMPLING_ON_DEVICE of its (config, seed, index), keyed by
    the private split's fingerprint, on the task's device; that key is no other stream's; the CPU path's masks
    (STREAM_SAMPLING) are other draws; shuffled batches keep STREAM_SAMPLING on the CPU; secure noise draws unrecorded
    entropy on this path too."""
    streams = {name: key for name, key in vars(training).items() if name.startswith("STREAM_")}
    assert len(set(streams.values())) == len(streams) >= 8  # no two purposes share a key
    calls = []
    real = training.noise_generator

    def recording(config, *key, **kw):
        calls.append((key, kw))
        return real(config, *key, **kw)

    monkeypatch.setattr(training, "noise_generator", recording)  # private_sampler's
    batch = _batch(task, steps=4)
    assert calls == [((seed, index, STREAM_SAMPLING_ON_DEVICE), dict(data=task.private_fingerprint, device=CPU, on=CPU))
                     for seed, index in KEYS]
    assert all(s.generator.device == CPU for s in batch.sampling.samplers)

    plan = _plan(task, 4)
    cpu_path = [private_sampler(task, CONFIG, plan, seed, index) for seed, index in KEYS]
    device_path = batch.sampling.draw()
    assert not torch.equal(_masks(*device_path[:2], task.n_private), torch.stack([s.mask() for s in cpu_path]))

    calls.clear()
    private_sampler(task, CONFIG.replace(sampling="shuffle"), plan, 0, 0, on_device=True)
    assert calls[0][0] == (0, 0, STREAM_SAMPLING) and calls[0][1]["on"] == "cpu"

    secure = CONFIG.replace(secure_noise=True)
    twice = [private_sampler(task, secure, plan, 0, 0, on_device=True).mask() for _ in range(2)]
    assert not torch.equal(*twice)  # 1 in 2^(n_private * H(q)) to fail


def test_the_padded_index_holds_exactly_the_masks_of_the_device_stream(task, on_device):
    """idx / valid / counts against the masks drawn again from fresh generators of the same key: each model's
    selected examples in increasing order, padding index 0 and not valid, counts on the CPU, ``among`` applied."""
    n = task.n_private
    inclusion = torch.rand(len(KEYS), n, generator=torch.Generator().manual_seed(5)) < 0.6
    steps = 30
    batch = _batch(task, steps, inclusion)
    fresh = [noise_generator(CONFIG, seed, index, STREAM_SAMPLING_ON_DEVICE, data=task.private_fingerprint,
                             device=CPU) for seed, index in KEYS]
    padded = 0
    for _ in range(steps):
        idx, valid, counts = batch.sampling.draw()
        expected = torch.stack([poisson_mask(n, Q, g) for g in fresh]) & inclusion
        assert counts.device == CPU and counts.tolist() == expected.sum(1).tolist()
        assert idx.shape == valid.shape == (len(KEYS), int(counts.max()))
        for k in range(len(KEYS)):
            c = int(counts[k])
            assert idx[k, :c].tolist() == expected[k].nonzero().reshape(-1).tolist()
            assert valid[k].tolist() == [True] * c + [False] * (idx.shape[1] - c)
            assert not idx[k, c:].any()
        padded += bool((counts < idx.shape[1]).any())
    assert padded  # the steps covered padded batches


def test_the_device_masks_follow_the_poisson_law(task, on_device):
    """Over T steps: no excluded example is ever drawn; each included example's frequency is q (every one, and all
    together); pairs are independent (joint frequency q^2): two examples of one model, one example in two models of
    one seed, one example at two steps. Each check is a Hoeffding bound (:func:`_hoeffding`) on frequencies of
    Bernoulli(p) indicators that are independent under the law: disjoint pairs only, so no indicator shares a
    draw with another."""
    n, steps = task.n_private, 3000
    half = torch.arange(n) < n // 2
    inclusion = torch.stack([torch.ones(n, dtype=torch.bool), half,
                             torch.rand(n, generator=torch.Generator().manual_seed(7)) < 0.7])
    batch = _batch(task, steps, inclusion)
    drawn = torch.stack([_masks(*batch.sampling.draw()[:2], n) for _ in range(steps)])  # (T, K, n)

    assert not drawn[:, ~inclusion].any()  # among: restricted to E_k
    frequency = drawn.sum(0)[inclusion] / steps  # each included example's, over the T steps
    m = int(inclusion.sum())
    assert (frequency - Q).abs().max() <= _hoeffding(steps, m)
    assert abs(float(frequency.mean()) - Q) <= _hoeffding(steps * m)

    def joint(a: torch.Tensor, b: torch.Tensor) -> None:  # a, b: indicators of disjoint draws, paired up
        assert abs(int((a & b).sum()) / a.numel() - Q ** 2) <= _hoeffding(a.numel())

    model0 = drawn[:, 0]
    pairs = n // 2 * 2
    joint(model0[:, 0:pairs:2], model0[:, 1:pairs:2])  # neighbouring examples
    matching = torch.randperm(n, generator=torch.Generator().manual_seed(11))[:pairs].reshape(-1, 2)
    joint(model0[:, matching[:, 0]], model0[:, matching[:, 1]])  # a random matching of the examples
    joint(drawn[:, 0, half], drawn[:, 1, half])  # the same example in two models of one seed
    joint(model0[0:steps:2], model0[1:steps:2])  # the same example at consecutive steps


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device on this machine")
def test_on_cuda_the_masks_come_from_the_device_generator():
    """A model batch on CUDA: its samplers' generators are CUDA generators of STREAM_SAMPLING_ON_DEVICE, the padded
    index is built there and holds the masks drawn again from a fresh CUDA generator of that key (``among``, an
    inclusion row on the CPU, applied there); the batch trains."""
    cuda = torch.device("cuda")
    task = _task(cuda)
    n, steps = task.n_private, 5
    trained = _batch(task, steps, device=cuda)
    results = trained.run(lambda: False)
    assert all(r.steps_done == steps and not r.stopped for r in results)
    assert all(torch.isfinite(p).all() for p in trained.optimizer.params)

    inclusion = torch.rand(len(KEYS), n, generator=torch.Generator().manual_seed(5)) < 0.6
    batch = _batch(task, steps, inclusion, device=cuda)
    assert all(s.generator.device.type == "cuda" for s in batch.sampling.samplers)
    fresh = [noise_generator(CONFIG, seed, index, STREAM_SAMPLING_ON_DEVICE, data=task.private_fingerprint,
                             device=cuda) for seed, index in KEYS]
    for _ in range(steps):
        idx, valid, counts = batch.sampling.draw()
        assert idx.device.type == valid.device.type == "cuda" and counts.device == CPU
        expected = torch.stack([poisson_mask(n, Q, g) for g in fresh]).cpu() & inclusion
        assert torch.equal(_masks(idx, valid, n), expected) and counts.tolist() == expected.sum(1).tolist()
        for k in range(len(KEYS)):
            assert idx[k, :int(counts[k])].cpu().tolist() == expected[k].nonzero().reshape(-1).tolist()
