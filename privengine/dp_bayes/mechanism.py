"""Registers differentially private Bayesian inference (``dp_bayes``)."""

from ..entries import EPSILON_AXIS, Axis, Frontier, Mechanism
from ..presets import Preset
from .config import DpBayesConfig

DP_BAYES = Mechanism(
    name="dp_bayes",
    title="DP Bayesian inference",
    config_cls=DpBayesConfig,
    run="privengine.dp_bayes.run:run",
    protects=(
        "The **records of a Bayesian regression** (one (x, y) pair per person). What is published is a "
        "mean-field Gaussian approximation of the posterior, z = (mean, log sd) per parameter, drawn by the "
        "exponential mechanism: changing one record (replace-one, or add/remove) changes the probability "
        "of any released z by at most a factor e^ε, against anyone who sees the release. This holds for an "
        "exact draw; the dashboard draws with SGLD, an approximate sampler, so the guarantee is approximate "
        "((ε, (1 + e^ε)·TV)-DP at an unknown total-variation distance TV). The reference posterior, the "
        "non-private VI baseline and the diagnostics shown are computed from the raw data and are not private. "
        "The ssp method publishes noisy sufficient statistics ((ε, δ)-DP, Gaussian mechanism over a stated data "
        "domain) and dpvi DP-SGD-trained variational parameters ((ε, δ)-DP, Opacus RDP accountant under add/remove; "
        "under replace-one calibrated to (ε/2, δ/(1 + e^(ε/2))) so that group privacy gives (ε, δ))."),
    description=(
        "Each record's log-likelihood l is sanitized to τ·tanh(l/τ), which bounds the sensitivity of the "
        "utility U(z) = E_q[Σ sanitized loglik + log prior] + w·H(q) (the ELBO for w = 1) by 2τ. One draw of z "
        "from f(z) ∝ exp(ε U(z) / (2Δ_U)) is ε-DP; it is sampled with preconditioned, vectorised SGLD and "
        "scored against the exact posterior (linear model) or an importance-sampled one (logistic model), "
        "next to non-private mean-field VI. The private mean typically lands about √(4τ/ε) posterior sds "
        "away, and the private sds can be wildly overconfident; a sweep charts both against ε. The method knob "
        "adds sufficient-statistics perturbation with a noise-aware posterior (ssp, linear model) and DP "
        "variational inference (dpvi, DP-SGD with Opacus), and `all` compares every method's error and 90 % "
        "coverage against ε."),
    smoke={"n_records": 500, "vi_steps": 200, "warmup_steps": 100, "burn_in": 200, "steps": 300},
    frontier=Frontier(privacy=EPSILON_AXIS,
                      utility=(Axis("private_mean_error_sd_rms", "private mean error (posterior sds)", "lower",
                                    covered=False),
                               Axis("private_kl", "KL(private ‖ reference)", "lower", covered=False)),
                      fixed=(("neighbouring", "runs under different neighbouring relations do not compose into one "
                                              "claim"),)),
    presets=(
        Preset("quick-demo", "One private release at ε = 1 on 1 000 records, next to the exact posterior and "
                             "non-private VI (about 10 s on two quiet CPU cores, up to about 25 s on a busy machine).",
               {"n_records": 1000, "vi_steps": 1000, "warmup_steps": 500, "burn_in": 1000, "steps": 3000}),
        Preset("seed-article", "The DP-Bayes article's setting: Y = 2 X1 - 3.5 X2 - 5 + N(0, 0.1^2), N = 4 000, "
                               "τ = 4, ε = 1, one draw (the seed's SGLD replaced by preconditioned SGLD).",
               {"n_records": 4000, "coefficients": [2.0, -3.5], "intercept": -5.0, "noise_sd": 0.1, "tau": 4.0,
                "epsilon": 1.0, "draws": 1}),
        Preset("ssp-eps1", "Sufficient-statistics perturbation at ε = 1, δ = 1e-5 on the seed's data (N = 4 000): "
                           "noisy rescaled X^T X, X^T y, y^T y and the noise-aware posterior, with coverage_90 over "
                           "50 more releases on fresh data sets (about 15 s).",
               {"method": "ssp", "epsilon": 1.0, "coverage_repeats": 50}),
        Preset("dpvi-eps1", "DP variational inference at ε = 1, δ = 1e-5 on the seed's data: DP-SGD on the ELBO "
                            "(Opacus, Poisson sampling q = 0.05, RDP accountant), coverage over 10 more releases.",
               {"method": "dpvi", "epsilon": 1.0, "coverage_repeats": 10}),
        Preset("method-comparison", "Every method side by side on the seed's data: error against the truth and 90 % "
                                    "coverage against ε in {0.3, 1, 3, 10}, 10 releases each, with the non-private "
                                    "posterior as reference (a few minutes on two CPU cores).",
               {"method": "all", "mode": "sweep", "sweep_epsilons": [0.3, 1.0, 3.0, 10.0], "sweep_repeats": 10,
                "steps": 3000, "burn_in": 1000, "vi_steps": 1000, "warmup_steps": 500}),
        Preset("ssp-coverage", "Calibration of SSP's noise-aware posterior: 50 releases (fresh data and noise) at "
                               "each ε in {0.3, 1, 3}; coverage_90 should lie in [0.85, 0.95].",
               {"method": "ssp", "mode": "sweep", "sweep_epsilons": [0.3, 1.0, 3.0], "sweep_repeats": 50}),
    ),
)
