"""The privacy claims of a ``dp_bayes`` run: what is released, under which relation, and how honestly."""

from __future__ import annotations

from privengine.claims import PrivacyClaim

from .sanitizer import NEIGHBOURING_TEXT, sensitivity

EXACT_ONLY = "ε-DP for an exact draw only; the SGLD release is approximate and its δ is not bounded"
CONDITION = "exact draw only"  # the label and caveats say why: the SGLD release is approximate
ACCOUNTANT = ("exponential mechanism (McSherry & Talwar 2007): one exact draw of z from "
              "f(z) ∝ exp(ε U(z; x) / (2 Δ_U)) is ε-DP; k draws cost kε (basic composition)")


def _caveats(*, tau: float, delta_u: float, entropy_weight: float, step_size: float, steps: int,
             mc_samples: int, noise: str) -> tuple[str, ...]:
    return (
        "Approximate sampler: the draw comes from preconditioned SGLD "
        f"(step {step_size:g}, {steps} steps after burn-in, {mc_samples} Monte Carlo sample(s) per gradient), "
        "not from f exactly. A sampler whose output is within total-variation distance TV of f gives "
        "(ε, (1 + e^ε)·TV)-DP; TV is not bounded here, so the stated ε holds for an exact draw only. The chains "
        "start at the maximum of the sanitized utility, found from the private data: an exact draw does not "
        "depend on its start, a finite SGLD chain does.",
        f"Δ_U = {delta_u:g} rests on the sanitizer τ·tanh(loglik/τ) with τ = {tau:g}, which keeps each record's "
        f"term in (-τ, τ); the prior and the entropy term (weight w = {entropy_weight:g}) do not depend on the data.",
        "Only the released variational parameters z = (mean, log sd) are covered. The reference posterior, the "
        "non-private VI baseline, the SGLD trace, the utility curve and every error metric are computed from "
        "the raw data to evaluate the mechanism and are not private.",
        noise,
    )


def release_claim(*, epsilon: float, draws: int, tau: float, neighbouring: str, entropy_weight: float,
                  step_size: float, steps: int, mc_samples: int, noise: str) -> PrivacyClaim:
    """The (headline) claim of releasing ``draws`` independent draws at ``epsilon`` each.

    delta = 0 holds for exact draws only; the label says so, and never "pure DP": the
    release comes from finite SGLD, whose distance to the exact distribution is not bounded.
    """
    delta_u = sensitivity(tau, neighbouring)
    label = (EXACT_ONLY if draws == 1
             else f"{draws} draws at ε = {epsilon:g} each (kε); {EXACT_ONLY}")
    return PrivacyClaim(label, draws * epsilon, 0.0, ACCOUNTANT, NEIGHBOURING_TEXT[neighbouring], None,
                        _caveats(tau=tau, delta_u=delta_u, entropy_weight=entropy_weight, step_size=step_size,
                                 steps=steps, mc_samples=mc_samples, noise=noise), headline=True,
                        condition=CONDITION)


def sweep_claim(*, epsilons: tuple[float, ...], repeats: int, tau: float, neighbouring: str,
                entropy_weight: float, step_size: float, steps: int, mc_samples: int, noise: str) -> PrivacyClaim:
    """The claim of a sweep: its draws are for evaluation; publishing all of them would cost their sum."""
    delta_u = sensitivity(tau, neighbouring)
    total = repeats * sum(epsilons)
    return PrivacyClaim(
        f"sweep (evaluation only): total if every draw were published; {EXACT_ONLY}", total, 0.0, ACCOUNTANT,
        NEIGHBOURING_TEXT[neighbouring], None,
        (f"The sweep draws {repeats} release(s) at each ε in {', '.join(f'{e:g}' for e in epsilons)} from the "
         "same data to chart utility against ε; none is meant for publication. Each draw alone has its own ε.",)
        + _caveats(tau=tau, delta_u=delta_u, entropy_weight=entropy_weight, step_size=step_size, steps=steps,
                   mc_samples=mc_samples, noise=noise), headline=True, condition=CONDITION)
