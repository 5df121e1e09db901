"""The DP-SGD one-run audit (privengine.audit.dpsgd_one_run): soundness over seeds for the isotropic, anisotropic
(canaries inside and outside span(U)) and elliptical mechanisms, power against a noise-free (broken, test-only)
mechanism, the shaped-noise ordering (outside canaries audit no higher than inside ones under the seed's
anisotropic noise), and the CLI. Tiny runs: linreg, 1000 canaries, about 40 steps each (a few seconds a model)."""

from __future__ import annotations

import io
import json

import numpy as np
import pytest
import torch

from privengine import registry
from privengine.audit import AuditResult
from privengine.audit.dpsgd_one_run import DpsgdOneRunAuditConfig, run
from privengine.cli import main
from privengine.dpsgd import optimizer as optimizer_module
from privengine.errors import ConfigError

SEEDS = range(3)
BASE = dict(noise_multiplier=1.0, epochs=4.0, subspace_rank=32, data="zero", accountant="rdp", canaries=1000,
            guesses=100)
SETTINGS = {
    "isotropic": dict(alphas=(0.0,), canary_space="random"),
    "anisotropic inside": dict(alphas=(4.0,), canary_space="inside"),
    "anisotropic outside": dict(alphas=(4.0,), canary_space="outside"),
    "elliptical": dict(alphas=(-0.5,), variant="elliptical", canary_space="outside"),
}


def audit(**changes) -> AuditResult:
    return run(DpsgdOneRunAuditConfig().replace(**{**BASE, **changes}))


@pytest.fixture(scope="module")
def results() -> dict[str, list[AuditResult]]:
    return {name: [audit(seed=s, **kw) for s in SEEDS] for name, kw in SETTINGS.items()}


@pytest.mark.slow
def test_sound_over_seeds_for_every_mechanism(results):
    flat = [r for rs in results.values() for r in rs]
    claim = flat[0].claimed_epsilon
    assert all(r.claimed_epsilon == pytest.approx(claim) for r in flat)  # same sigma, q, steps: same claim
    # stated failure probability 5 % per audit: P[Binomial(12, 0.05) >= 3] < 2 %
    assert sum(r.epsilon_lower > r.claimed_epsilon for r in flat) <= 2
    assert all(not r.refutes_claim for r in flat)  # in practice the bound sits far below the claim
    for r in flat:
        row = r.details["settings"][0]
        assert row["canaries"] == 1000 and row["guesses"] == 100 and 400 < row["included"] < 600
        assert r.counts["correct"] == row["correct"]
        assert {"claimed_epsilon", "claim", "audited_epsilon_lower", "confidence", "method"} <= set(r.to_dict())


@pytest.mark.slow
def test_the_audits_find_signal_and_the_elliptical_one_matches_isotropic(results):
    def separation(name):
        return np.mean([r.details["settings"][0]["score_separation"] for r in results[name]])

    q_sqrt_t = results["isotropic"][0].details["sample_rate"] * np.sqrt(results["isotropic"][0].details["steps"])
    # linear-score separation q sqrt(T) / sigma of one canary with sigma = 1 (data zero, no cross-talk)
    assert separation("isotropic") == pytest.approx(q_sqrt_t, rel=0.35)
    # whitened, the elliptical mechanism is isotropic DP-SGD: outside canaries (S-norm C) separate alike
    assert separation("elliptical") == pytest.approx(separation("isotropic"), rel=0.35)
    assert np.mean([r.epsilon_lower for r in results["isotropic"]]) > 0.3


@pytest.mark.slow  # as every test of the module's results (a 6 s fixture)
def test_anisotropic_outside_canaries_audit_no_higher_than_inside(results):
    inside = [r.epsilon_lower for r in results["anisotropic inside"]]
    outside = [r.epsilon_lower for r in results["anisotropic outside"]]
    assert np.mean(outside) <= np.mean(inside)
    sep_in = np.mean([r.details["settings"][0]["score_separation"] for r in results["anisotropic inside"]])
    sep_out = np.mean([r.details["settings"][0]["score_separation"] for r in results["anisotropic outside"]])
    assert sep_out < sep_in  # outside span(U) the canaries see (1 + alpha) times the noise variance


def test_power_without_noise_the_bound_is_far_above_the_claim(monkeypatch):
    import opacus.optimizers.optimizer as opacus_optimizer

    def zeros_like_noise(std, reference, generator=None, secure_mode=False):
        return torch.zeros_like(reference)

    def zero_shaped_noise(basis, alpha, std, n, generator=None):
        return torch.zeros(n, basis.shape[0], dtype=basis.dtype, device=basis.device)

    monkeypatch.setattr(opacus_optimizer, "_generate_noise", zeros_like_noise)
    monkeypatch.setattr(optimizer_module, "sample_anisotropic", zero_shaped_noise)
    for kw in (dict(alphas=(0.0,), canary_space="random"), dict(alphas=(4.0,), canary_space="outside")):
        result = audit(noise_multiplier=8.0, epochs=8.0, seed=0, **kw)  # the claim of sigma = 8; no noise
        assert result.claimed_epsilon < 0.6
        assert result.epsilon_lower > 2.5 and result.refutes_claim


def test_registry_config_rules_and_cli():
    assert registry.get("dpsgd-one-run") in registry.audits_for("dpsgd")
    with pytest.raises(ConfigError) as err:
        DpsgdOneRunAuditConfig(canaries=10, guesses=20).validate()
    assert err.value.field == "guesses"
    with pytest.raises(ConfigError):  # a negative alpha needs the elliptical variant (the run's own rule)
        DpsgdOneRunAuditConfig(alphas=(-0.5,)).validate()
    out, err_stream = io.StringIO(), io.StringIO()
    code = main(["audit", "dpsgd-one-run", "--alphas", "0,4", "--canary-space", "outside", "--canaries", "200",
                 "--guesses", "40", "--epochs", "1", "--noise-multiplier", "1", "--accountant", "rdp",
                 "--data", "zero", "--json"], stdout=out, stderr=err_stream)
    assert code == 0, err_stream.getvalue()
    data = json.loads(out.getvalue())
    data.pop("run_id")
    assert data["audit"] == "dpsgd-one-run" and [r["alpha"] for r in data["details"]["settings"]] == [0.0, 4.0]
    assert data["audited_epsilon_lower"] <= data["claimed_epsilon"]
    assert AuditResult.from_dict(data).to_dict() == data
