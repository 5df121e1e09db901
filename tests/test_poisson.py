"""The Poisson sampler's law (privengine/poisson.py): each record is included with probability floor(q 2^24) / 2^24,
never above the q the accountant is given, on the CPU bit for bit from the uniforms torch.rand draws."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings, strategies as st

from privengine.poisson import PoissonSampler, inclusion_rate, inclusion_threshold, poisson_mask

LEVELS = 2 ** 24


@settings(max_examples=300, deadline=None)
@given(st.floats(2.0 ** -24, 1.0))
def test_the_rate_is_the_largest_multiple_of_two_to_minus_24_not_above_q(q):
    m = inclusion_threshold(q)
    assert m / LEVELS <= q < (m + 1) / LEVELS  # exact: every number here is a double without rounding
    assert inclusion_rate(q) == m / LEVELS


def test_rates_on_the_grid_are_kept_and_the_ends_are_exact():
    assert inclusion_rate(1.0) == 1.0 and inclusion_rate(0.0) == 0.0
    assert inclusion_rate(0.25) == 0.25 and inclusion_rate(2.0 ** -24) == 2.0 ** -24
    q = 256 / 60_000  # not on the grid; float32(q) is above q: the draw torch.rand(n) < q included too many
    assert float(torch.tensor(q, dtype=torch.float32)) > q
    assert inclusion_rate(q) < q


@pytest.mark.parametrize("q", [-0.1, 1.5, math.nan, 2.0 ** -25, 1e-12])
def test_a_rate_the_sampler_cannot_draw_is_refused(q):
    with pytest.raises(ValueError, match="sampling rate"):
        inclusion_threshold(q)


@pytest.mark.parametrize("q", [256 / 60_000, 0.05, 1 / 3, 0.999])
def test_on_the_cpu_the_mask_is_torch_rand_s_uniforms_below_the_rate(q):
    """The mask is {i : u_i < floor(q 2^24) 2^-24} for the uniforms torch.rand draws from the same generator state
    (Opacus' draw): the same 24 bits, compared with the rate on the grid instead of float32(q). float32 holds
    m 2^-24 exactly, so the reference comparison is exact."""
    n, seed = 100_000, 7
    ours = poisson_mask(n, q, torch.Generator().manual_seed(seed))
    uniforms = torch.rand(n, generator=torch.Generator().manual_seed(seed))
    assert torch.equal(ours, uniforms < torch.tensor(inclusion_rate(q), dtype=torch.float32))
    # and the generator moved on as Opacus' draw moves it: the next draws agree too
    g_ours, g_rand = torch.Generator().manual_seed(seed), torch.Generator().manual_seed(seed)
    poisson_mask(n, q, g_ours), torch.rand(n, generator=g_rand)
    assert torch.equal(poisson_mask(10, 0.5, g_ours), torch.rand(10, generator=g_rand) < 0.5)


def test_a_uniform_at_the_threshold_is_left_out():
    """Record 0's uniform integer k: included for q = (k + 1) 2^-24 and above, left out for q = k 2^-24 and for
    q = (k + 1/2) 2^-24 (where float32(q) may round up to (k + 1) 2^-24 and torch.rand(n) < q included it)."""
    n, seed = 1000, 11
    k = int(torch.randint(0, LEVELS, (n,), generator=torch.Generator().manual_seed(seed), dtype=torch.int32)[0])
    for q, included in (((k + 1) / LEVELS, True), (k / LEVELS, False), ((k + 0.5) / LEVELS, False)):
        assert bool(poisson_mask(n, q, torch.Generator().manual_seed(seed))[0]) is included, q


def test_the_inclusion_frequency_matches_the_rate():
    """Over 4 million Bernoulli draws the frequency is within 6 standard deviations of floor(q 2^24) / 2^24."""
    q, n, reps = 0.3, 1 << 20, 4
    g = torch.Generator().manual_seed(3)
    hits = sum(int(poisson_mask(n, q, g).sum()) for _ in range(reps))
    p, total = inclusion_rate(q), n * reps
    assert abs(hits - p * total) <= 6 * math.sqrt(total * p * (1 - p))


def test_the_batch_sampler_yields_each_step_s_mask_and_refuses_a_rate_below_the_grid():
    sampler = PoissonSampler(num_samples=500, sample_rate=0.1, generator=torch.Generator().manual_seed(1), steps=3,
                             among=torch.arange(500) % 2 == 0)
    reference = torch.Generator().manual_seed(1)
    batches = list(sampler)
    assert len(batches) == len(sampler) == 3
    for batch in batches:
        expected = (poisson_mask(500, 0.1, reference) & (torch.arange(500) % 2 == 0)).nonzero().reshape(-1).tolist()
        assert batch == expected
    with pytest.raises(ValueError, match="2\\^-24"):
        PoissonSampler(num_samples=10, sample_rate=1e-9, generator=torch.Generator(), steps=1)


def test_the_batch_sampler_leaves_out_an_example_whose_uniform_is_the_threshold():
    """Through the sampler every mechanism uses: q set so that example 0's uniform integer k is the threshold m
    (q = (k + 1/2) 2^-24, where the former torch.rand(n) < float32(q) included it) leaves it out of the first batch,
    and q = (k + 1) 2^-24 takes it in."""
    n, seed = 400, 12
    k = int(torch.randint(0, LEVELS, (n,), generator=torch.Generator().manual_seed(seed), dtype=torch.int32)[0])
    for q, included in (((k + 0.5) / LEVELS, False), ((k + 1) / LEVELS, True)):
        sampler = PoissonSampler(num_samples=n, sample_rate=q, generator=torch.Generator().manual_seed(seed), steps=1)
        assert (0 in next(iter(sampler))) is included, q


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device on this machine")
def test_on_cuda_the_uniform_integers_cover_the_grid_and_the_rate_holds():
    g = torch.Generator(device="cuda").manual_seed(5)
    n, q = 1 << 24, 0.3
    uniforms = torch.randint(0, LEVELS, (n,), generator=g, device="cuda", dtype=torch.int32)
    assert int(uniforms.min()) >= 0 and int(uniforms.max()) < LEVELS
    mask = poisson_mask(n, q, g)
    assert mask.device.type == "cuda"
    p = inclusion_rate(q)
    assert abs(int(mask.sum()) - p * n) <= 6 * math.sqrt(n * p * (1 - p))


def test_a_config_whose_rate_the_sampler_cannot_draw_is_refused_naming_its_field():
    """Before anything runs: DP-SGD's q = batch_size / declared private size, and DPVI's rate, at least 2^-24 (the
    limit is the sampler's own: the config layer keeps it torch-free)."""
    from privengine.config import MIN_SAMPLE_RATE
    from privengine.dp_bayes.config import DpBayesConfig
    from privengine.dpsgd.config import DPSGDConfig
    from privengine.errors import ConfigError

    assert MIN_SAMPLE_RATE == 1 / LEVELS and inclusion_rate(MIN_SAMPLE_RATE) == MIN_SAMPLE_RATE
    with pytest.raises(ConfigError, match="2\\^-24") as refused:
        DPSGDConfig.from_dict({"private_size": 100_000_000, "batch_size": 1})
    assert refused.value.field == "batch_size"
    DPSGDConfig.from_dict({"private_size": 100_000_000, "batch_size": 1, "sampling": "shuffle"})  # no rate to draw
    DPSGDConfig.from_dict({"private_size": 2 ** 24, "batch_size": 1})  # q = 2^-24 exactly: drawable
    with pytest.raises(ConfigError) as refused:
        DpBayesConfig.from_dict({"dpvi_sample_rate": 1e-8})
    assert refused.value.field == "dpvi_sample_rate"
