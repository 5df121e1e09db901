"""Thin wrapper over Opacus' accountants for DP-SGD, and the privacy claims of a run.

Every step of (anisotropic) DP-SGD is the Poisson-subsampled Gaussian mechanism
with noise multiplier sigma and sample rate q; Opacus' accountants keep a history
of ``(sigma, q, steps)`` and turn it into epsilon at a given delta:

- ``prv``: numerical composition of privacy loss random variables (Gopi, Lee &
  Wutschitz 2021); Opacus returns the upper end of its error interval.
- ``rdp``: Renyi DP of the subsampled Gaussian (Mironov, Talwar & Zhang 2019),
  converted at the best order of Opacus' default grid.
- ``gdp``: mu-GDP through the central limit theorem (Dong, Roth & Su 2019); an
  approximation that can underestimate epsilon.

>>> round(epsilon_of([(1.1, 256 / 60000, 14062)], accountant="rdp", delta=1e-5)[0], 3)
2.597
"""

from __future__ import annotations

import functools
import warnings

from opacus.accountants import create_accountant
from opacus.accountants.accountant import IAccountant
from opacus.accountants.utils import get_noise_multiplier

from privengine.claims import PrivacyClaim

History = list[tuple[float, float, int]]  # (noise multiplier, sample rate, steps), Opacus' format

ACCOUNTANT_NAMES = {
    "prv": "Opacus PRV accountant (Gopi, Lee & Wutschitz 2021)",
    "rdp": "Opacus RDP accountant (Mironov, Talwar & Zhang 2019)",
    "gdp": "Opacus GDP accountant (Dong, Roth & Su 2019; CLT approximation)",
}
NEIGHBOURING = "add or remove one private training example (Poisson-subsampled batches)"


def make_accountant(name: str) -> IAccountant:
    """A fresh Opacus accountant (``"prv"``, ``"rdp"`` or ``"gdp"``)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # GDP warns on creation; its caveat goes into the claim instead
        return create_accountant(mechanism=name)


def merge(histories: list[History]) -> History:
    """One history composing several: steps of equal ``(sigma, q)`` are added up (exact composition)."""
    steps: dict[tuple[float, float], int] = {}
    for history in histories:
        for sigma, q, n in history:
            steps[(sigma, q)] = steps.get((sigma, q), 0) + n
    return [(sigma, q, n) for (sigma, q), n in steps.items() if n > 0]


def epsilon_of(history: History, *, accountant: str, delta: float) -> tuple[float, float | None]:
    """``(epsilon, order)`` of a history under one accountant; order is the best RDP order (RDP only).

    An empty history (no step taken) spends nothing: ``(0.0, None)``. Results are
    cached (PRV takes up to a second on long histories).
    """
    return _epsilon(tuple(map(tuple, history)), accountant, delta)


@functools.lru_cache(maxsize=1024)
def _epsilon(history: tuple[tuple[float, float, int], ...], accountant: str, delta: float
             ) -> tuple[float, float | None]:
    if not history:
        return 0.0, None
    acc = make_accountant(accountant)
    if accountant == "gdp" and len(history) > 1:
        raise ValueError("the GDP accountant needs one constant (sigma, q); got several")
    acc.history = [tuple(h) for h in history]
    if accountant == "rdp":
        eps, order = acc.get_privacy_spent(delta=delta)
        return float(eps), float(order)
    return float(acc.get_epsilon(delta=delta)), None


def calibrate_noise_multiplier(*, target_epsilon: float, delta: float, sample_rate: float, steps: int,
                               accountant: str) -> float:
    """Opacus' ``get_noise_multiplier``: the sigma whose epsilon after ``steps`` is within 0.01 below the target."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return float(get_noise_multiplier(target_epsilon=target_epsilon, target_delta=delta,
                                          sample_rate=sample_rate, steps=steps, accountant=accountant))


def dpsgd_claims(*, histories: list[History], accountant: str, delta: float, n_private: int,
                 public_note: str, sampling: str, extra_caveats: tuple[str, ...] = ()) -> list[PrivacyClaim]:
    """The claims of a run that trained one model per history on the same private data.

    One claim per model (the largest epsilon of them, all equal unless the run was
    stopped), plus one for releasing all the run's models together (composition).
    """
    caveats = [public_note,
               "The training-loss and captured-energy curves are computed from private examples without "
               "noise: they are operator diagnostics and are not covered by this guarantee."]
    if sampling != "poisson":
        caveats.append("Batches were fixed-size slices of a shuffled pass, not Poisson samples: the accountant "
                       "assumes Poisson subsampling, so this epsilon is an estimate, not a proven bound.")
    if accountant == "gdp":
        caveats.append("The GDP accountant is a central-limit approximation and can underestimate epsilon.")
    if delta >= 1.0 / max(n_private, 1):
        caveats.append(f"delta = {delta:g} is not small against 1/n = {1.0 / n_private:.2g}: "
                       "an (eps, delta) guarantee with such a delta can allow releasing a whole record.")
    caveats.extend(extra_caveats)
    name = ACCOUNTANT_NAMES[accountant]
    per_model = [epsilon_of(h, accountant=accountant, delta=delta) for h in histories]
    eps, order = max(per_model, key=lambda eo: eo[0]) if per_model else (0.0, None)
    claims = [PrivacyClaim(label="each trained model", epsilon=eps, delta=delta, accountant=name,
                           neighbouring=NEIGHBOURING, order=order, caveats=tuple(caveats))]
    if len(histories) > 1:
        eps_all, order_all = epsilon_of(merge(histories), accountant=accountant, delta=delta)
        claims.append(PrivacyClaim(label=f"all {len(histories)} models of this run released together",
                                   epsilon=eps_all, delta=delta, accountant=name, neighbouring=NEIGHBOURING,
                                   order=order_all, caveats=tuple(caveats)))
    return claims
