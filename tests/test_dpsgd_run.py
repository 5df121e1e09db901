"""DP-SGD runs end to end: epsilon equals Opacus' accountant, private training beats chance, stop, errors."""

from __future__ import annotations

import threading
import time

import pytest
import torch
from opacus.accountants import PRVAccountant, RDPAccountant

import privengine.dpsgd.mechanism  # noqa: F401  (registers dpsgd until privengine/mechanisms.py imports it)
from privengine.claims import claims_of
from privengine.dpsgd import metrics as M
from privengine.dpsgd.config import DPSGDConfig
from privengine.dpsgd.run import run
from privengine.errors import ConfigError
from privengine.jobs import JobManager
from tests.conftest import SHARED_DATA
from tests.memory_reporter import MemoryReporter

pytestmark = pytest.mark.filterwarnings("ignore:Full backward hook is firing")


def _run(device: str = "cpu", **changes):
    """Run one config (one seed unless ``n_seeds`` is given) with an in-memory reporter."""
    reporter = MemoryReporter(device)
    return run(DPSGDConfig().replace(**({"n_seeds": 1} | changes)), reporter), reporter


@pytest.fixture(scope="module")
def linreg_sweep():
    """The embedded linear regression: isotropic and alpha = 4, two seeds, sigma given, RDP accountant."""
    return _run(epochs=2.0, n_seeds=2, noise_mode="sigma", noise_multiplier=0.9, accountant="rdp")


def _opacus_epsilon(accountant, history, delta=1e-5) -> float:
    acc = accountant()
    acc.history = history
    return acc.get_epsilon(delta=delta)


def test_reported_epsilon_is_opacus_accountant_for_isotropic_and_anisotropic(linreg_sweep):
    summary, _ = linreg_sweep
    q, steps = summary["sample_rate"], summary["steps_per_model"]
    assert q == 100 / summary["private_size"] and steps == int(2.0 / q)
    assert summary["noise_multiplier"] == 0.9
    models = summary["models"]
    assert {m["alpha"] for m in models} == {0.0, 4.0} and all(m["steps"] == steps for m in models)
    each, together = claims_of(summary)
    assert each.epsilon == pytest.approx(_opacus_epsilon(RDPAccountant, [(0.9, q, steps)]), rel=1e-12)
    assert together.epsilon == pytest.approx(_opacus_epsilon(RDPAccountant, [(0.9, q, 4 * steps)]), rel=1e-12)
    for row in summary["comparison"]:  # alpha > 0 costs exactly what alpha = 0 costs
        assert row["epsilon"] == each.epsilon
    assert each.delta == 1e-5 and each.order is not None
    assert any("public" in c for c in each.caveats)


def test_private_linear_regression_beats_the_zero_predictor(linreg_sweep):
    summary, reporter = linreg_sweep
    null = summary["null_excess_risk"]
    for row in summary["comparison"]:
        assert row["n_seeds"] == 2 and len(row["values"]) == 2
        assert max(row["values"]) < 0.05 * null, row
    # live curves: one per (setting, seed) and metric, and the epsilon curve rising to the claim
    for setting in (M.ISOTROPIC, "alpha=4"):
        for seed in (0, 1):
            assert reporter.metrics[M.metric_key(M.EXCESS_RISK, setting, seed)]
            assert reporter.metrics[M.metric_key(M.TRAIN_LOSS, setting, seed)]
    energy = [v for _, v in reporter.metrics[M.metric_key(M.ENERGY, "alpha=4", 0)]]
    assert all(0.0 <= e <= 1.0 for e in energy) and M.metric_key(M.ENERGY, M.ISOTROPIC, 0) not in reporter.metrics
    eps_curve = [v for _, v in reporter.metrics[M.EPSILON]]
    assert eps_curve == sorted(eps_curve) and eps_curve[-1] == pytest.approx(claims_of(summary)[0].epsilon)
    assert reporter.artifacts["comparison"] == summary["comparison"]


@pytest.mark.slow
def test_prv_epsilon_and_calibration_to_a_target():
    summary, _ = _run(epochs=1.0, alphas=(0.5,), accountant="prv", target_epsilon=2.0)
    q, steps, sigma = summary["sample_rate"], summary["steps_per_model"], summary["noise_multiplier"]
    (claim,) = claims_of(summary)
    assert claim.epsilon == pytest.approx(_opacus_epsilon(PRVAccountant, [(sigma, q, steps)]), rel=1e-12)
    assert 1.98 <= claim.epsilon <= 2.0


@pytest.mark.slow
def test_projected_variant_beats_isotropic_on_the_low_rank_regression():
    summary, _ = _run(epochs=6.0, n_seeds=2, variant="projected", noise_mode="sigma")
    rows = {r["setting"]: r for r in summary["comparison"]}
    assert set(rows) == {M.ISOTROPIC, M.PROJECTED}
    assert rows[M.PROJECTED]["mean"] < 0.75 * rows[M.ISOTROPIC]["mean"]  # 0.51x here (independent noise per model)
    assert summary["best_setting"] == M.PROJECTED


def test_ghost_clipping_and_physical_batches_match_per_example_hooks(monkeypatch):
    """The same Poisson batches and noise, so only the clipping route and batch splitting differ. Runs keep their
    noise apart by every knob; this test pins the streams to the knobs that do not choose the route."""
    import privengine.randomness as randomness

    digest = randomness.config_digest
    monkeypatch.setattr(randomness, "config_digest",
                        lambda config: digest(config.replace(grad_sample_mode="hooks", physical_batch_size=256)))
    common = dict(epochs=1.0, alphas=(0.0, 2.0), noise_mode="sigma")
    hooks, _ = _run(grad_sample_mode="hooks", **common)
    ghost_split, _ = _run(grad_sample_mode="ghost", physical_batch_size=32, **common)  # logical batch 100
    hooks_split, _ = _run(grad_sample_mode="hooks", physical_batch_size=32, **common)
    for a, b, c in zip(hooks["models"], ghost_split["models"], hooks_split["models"]):
        assert a[M.EXCESS_RISK] == pytest.approx(b[M.EXCESS_RISK], rel=1e-3)
        assert a[M.EXCESS_RISK] == pytest.approx(c[M.EXCESS_RISK], rel=1e-3)


@pytest.mark.slow
def test_private_cnn_on_digits_beats_chance():
    summary, _ = _run(dataset="digits", epochs=4.0, batch_size=64, lr=2.0, alphas=(0.0, 2.0), noise_mode="sigma",
                      noise_multiplier=1.0, subspace_rank=16)
    rows = {r["setting"]: r for r in summary["comparison"]}
    assert rows[M.ISOTROPIC]["mean"] > 0.6 and rows["alpha=2"]["mean"] > 0.3  # chance: 0.1
    assert 0 < claims_of(summary)[0].epsilon < 10


def test_stop_mid_run_returns_a_partial_summary_with_its_privacy_cost():
    reporter = MemoryReporter(stop_after_metrics=12)
    # the Opacus path, one model at a time (a stop in a model batch: tests/test_dpsgd_model_batch.py)
    summary = run(DPSGDConfig().replace(noise_mode="sigma", n_seeds=3), reporter, model_batch=False)
    assert summary["stopped"] and summary["models_trained"] == 1
    assert summary["stopped_during"].startswith("isotropic, seed 0 (model 1 of 6)")
    (model,) = summary["models"]
    assert 0 < model["steps"] < summary["steps_per_model"]
    (claim,) = claims_of(summary)
    q = summary["sample_rate"]
    assert claim.epsilon == pytest.approx(_opacus_epsilon(PRVAccountant, [(1.0, q, model["steps"])]), rel=1e-12)


def test_stop_through_the_job_manager(store):
    manager = JobManager(store)
    try:
        run_id = manager.submit("dpsgd", {"noise_mode": "sigma"})
        deadline = time.monotonic() + 60
        while store.metrics(run_id).empty and time.monotonic() < deadline:
            time.sleep(0.05)
        manager.stop(run_id)
        record = manager.wait(run_id, timeout=10)
    finally:
        manager.shutdown()
    assert record.state == "stopped"


@pytest.mark.parametrize("changes,field", [
    ({"model": "cnn"}, "model"),
    ({"variant": "projected", "alphas": (0.0, 1.0, 2.0)}, "alphas"),
    ({"alphas": (1.0, 1.0)}, "alphas"),
    ({"subspace_rank": 300, "public_batch": 100}, "subspace_rank"),
    ({"delta": 0.5}, "delta"),
    ({"batch_size": 20_000}, "batch_size"),                    # linreg: 9 500 private examples
    ({"dataset": "digits", "batch_size": 1400}, "batch_size"),  # 1 438 training digits, 1 367 private
    ({"epochs": 0.001}, "epochs"),                             # fewer than one step
])
def test_bad_configs_name_the_field(changes, field):
    with pytest.raises(ConfigError) as err:
        DPSGDConfig().replace(**changes)
    assert err.value.field == field


@pytest.mark.parametrize("changes,field", [
    ({"subspace_rank": 200, "public_fraction": 0.01}, "subspace_rank"),  # 100 public examples
    ({"noise_mode": "target_epsilon", "target_epsilon": 0.05, "epochs": 50.0}, "target_epsilon"),
])
def test_inputs_found_wrong_at_run_time_raise_config_errors(changes, field):
    with pytest.raises(ConfigError) as err:
        _run(**({"noise_mode": "sigma", "accountant": "rdp"} | changes))
    assert err.value.field == field


@pytest.mark.slow
@pytest.mark.skipif(not (SHARED_DATA / "MNIST").exists(), reason="MNIST files are not in ../shared/data")
def test_mnist_cnn_trains_privately():
    summary, _ = _run(dataset="mnist", data_root=str(SHARED_DATA), train_limit=3000, epochs=1.0, batch_size=100,
                      lr=2.0, alphas=(0.0,), noise_mode="sigma", noise_multiplier=1.0)
    assert summary["private_size"] + summary["n_public"] == 3000
    assert summary["comparison"][0]["mean"] > 0.3  # chance: 0.1, after only ~29 noisy steps


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device on this machine")
def test_runs_on_cuda():
    summary, _ = _run(device="cuda", epochs=1.0, noise_mode="sigma")
    assert summary["models_trained"] == 2 and not summary["stopped"]


def test_stop_during_sigma_calibration_returns_promptly(monkeypatch):
    """The run returns while the calibration is still going (no wall-clock threshold: the calibration here never
    ends until the test releases it)."""
    import privengine.dpsgd.planning as planning_module

    release, calibrated = threading.Event(), threading.Event()

    def endless_calibration(**_):
        release.wait(120)
        calibrated.set()
        return 1.0

    monkeypatch.setattr(planning_module, "calibrate_noise_multiplier", endless_calibration)
    reporter = MemoryReporter()
    reporter.should_stop = lambda: True  # a stop is already requested when the calibration starts
    summary = run(DPSGDConfig().replace(accountant="prv"), reporter)
    assert not calibrated.is_set()  # returned without waiting for it
    release.set()
    assert summary["stopped"] and summary["models_trained"] == 0 and "privacy" not in summary
    assert summary["stopped_during"] == "calibrating sigma"


@pytest.mark.slow
def test_scattering_models_train_privately_on_digits(private_home):
    """scatter_linear on the digits' scattering (cached under $PRIVENGINE_HOME/cache) beats chance at eps 3."""
    summary, reporter = _run(dataset="digits", model="scatter_linear", epochs=3.0, batch_size=64, lr=2.0,
                             alphas=(0.0,), noise_mode="target_epsilon", target_epsilon=3.0)
    assert summary["best_test_acc"] > 0.6  # chance: 0.1
    assert (private_home / "cache" / "scattering").is_dir()
    cnn, _ = _run(dataset="digits", model="scatter_cnn", epochs=1.0, batch_size=64, lr=1.0, alphas=(0.0,),
                  noise_mode="sigma")
    assert cnn["models_trained"] == 1 and 0.0 <= cnn["best_test_acc"] <= 1.0
    with pytest.raises(ConfigError, match="`model` must not be a scattering model for the linreg dataset"):
        DPSGDConfig(model="scatter_linear").validate()


def test_auto_physical_batch_keeps_per_example_blocks_small_on_cpu():
    from privengine.dpsgd.models import build_model
    from privengine.dpsgd.training import AUTO_BLOCK_BYTES, physical_batch_size

    model = build_model("scatter_linear", input_shape=(81, 7, 7), n_outputs=10, generator=torch.Generator())
    largest = max(p.numel() for p in model.parameters())
    size = physical_batch_size(DPSGDConfig(batch_size=8192), model)
    assert size * largest * 4 <= AUTO_BLOCK_BYTES < 2 * size * largest * 4 and size & (size - 1) == 0
    assert physical_batch_size(DPSGDConfig(batch_size=8192, physical_batch_size=300), model) == 300
    small = build_model("linear", input_shape=(64,), n_outputs=10, generator=torch.Generator())
    assert physical_batch_size(DPSGDConfig(batch_size=100), small) == 64  # never above the logical batch


@pytest.mark.parametrize("batch_size", [16, 39, 64, 256, 900])
def test_auto_physical_batch_on_a_gpu_takes_almost_every_poisson_batch_in_one_pass(batch_size):
    """Batch sizes are Binomial(N, q) with mean B = Nq, nearly Poisson(B) for a small q (the heavier tail): the
    physical batch leaves fewer than 1e-4 of them to a second pass, is a multiple of 64, and shrinks to fit the
    per-example gradients' memory."""
    from scipy.stats import poisson

    from privengine.dpsgd.training import AUTO_GPU_BLOCK_BYTES, gpu_physical_batch

    size = gpu_physical_batch(batch_size, n_params=10_000)
    assert size % 64 == 0 and size >= batch_size
    assert poisson.sf(size, batch_size) < 1e-4
    huge = AUTO_GPU_BLOCK_BYTES // (4 * 64 * 3)  # parameters: only three blocks of 64 fit
    assert gpu_physical_batch(batch_size, n_params=huge) == min(192, size)


def test_auto_physical_batch_on_a_gpu_is_capped_for_large_logical_batches():
    from privengine.dpsgd.training import AUTO_GPU_MAX_PHYSICAL, gpu_physical_batch

    assert gpu_physical_batch(8192, n_params=10_000) == AUTO_GPU_MAX_PHYSICAL
    assert gpu_physical_batch(8192, n_params=10**9) == 64  # nothing fits: the smallest block
