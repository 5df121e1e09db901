"""Histories of Poisson-subsampled Gaussian mechanisms, accounted by Opacus: epsilon, composition, calibration.

Every step of (anisotropic) DP-SGD, and of DP-Bayes' DP variational inference, is the
Poisson-subsampled Gaussian mechanism with noise multiplier sigma and sample rate q; a
Gaussian release computed on the whole data set is the same mechanism at q = 1 (DP-SGD's
private normalisation statistics). Opacus' accountants keep a history of ``(sigma, q, steps)``
and turn it into epsilon at a given delta:

- ``prv``: numerical composition of privacy loss random variables (Gopi, Lee &
  Wutschitz 2021); Opacus returns the upper end of its error interval.
- ``rdp``: Renyi DP of the subsampled Gaussian (Mironov, Talwar & Zhang 2019),
  converted at the best order of Opacus' default grid.
- ``gdp``: mu-GDP through the central limit theorem (Dong, Roth & Su 2019); an
  approximation that underestimates epsilon (independent PLD accounting gives
  2-10 % more on typical histories). It is never a run's accountant or headline:
  a run may show it beside the sound one, labelled as an approximation.

Independent mechanisms on the same data compose adaptively: :func:`merge` adds up their
histories. :func:`history_events` states a history as dp-accounting privacy events (what a claim
records, :mod:`privengine.accounting.events`), from which dp-accounting alone recomputes its
epsilon. :func:`calibrate_noise_multiplier` finds the sigma that meets a target epsilon after a
prefix, and :func:`check_prv_tractable` refuses a history before PRV would run out of memory.
Every mechanism, sweep and audit that accounts such histories imports them from here; the
claims a DP-SGD run states are :mod:`privengine.dpsgd.privacy`'s.

>>> round(epsilon_of([(1.1, 256 / 60000, 14062)], accountant="rdp", delta=1e-5)[0], 3)
2.597
"""

from __future__ import annotations

import functools
import math
import warnings
from typing import Callable

import numpy as np
from dp_accounting import dp_event
from opacus.accountants import PRVAccountant, create_accountant
from opacus.accountants.accountant import IAccountant
from opacus.accountants.analysis.prv import Domain, PoissonSubsampledGaussianPRV
from opacus.accountants.utils import MAX_SIGMA

from .opacus_names import PRV_EPS_ERROR
from .opacus_rdp import History, rdp_epsilon, safe_domain_size

# Opacus' PRV accountant discretises the privacy loss on a grid whose size explodes for small noise multipliers or
# long histories (sigma = 0.1, q = 0.07, 580 steps: 2.4e8 points, more than 24 GiB: the process was killed), and
# keeps several full-size arrays per distinct (sigma, q) entry. Measured with tracemalloc: about 67 bytes per grid
# point for one entry and 24 more per further entry (2 entries: 96, 8: 232, 20: 497). Histories whose estimate
# exceeds PRV_MAX_BYTES are refused before Opacus allocates anything.
PRV_BYTES_PER_POINT = 67
PRV_BYTES_PER_POINT_PER_EXTRA_ENTRY = 24
PRV_MAX_BYTES = 1e9
CALIBRATION_TOLERANCE = 0.01  # Opacus' default epsilon_tolerance of get_noise_multiplier


class IntractableAccounting(ValueError):
    """The PRV accountant would need too much memory for a history (see :func:`prv_memory_bytes`)."""


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


def history_events(history: History) -> dp_event.DpEvent:
    """The dp-accounting event of a history of ``(sigma, q, steps)`` segments, in order.

    A segment is ``steps`` compositions of the Poisson-subsampled Gaussian mechanism,
    ``SelfComposedDpEvent(PoissonSampledDpEvent(q, GaussianDpEvent(sigma)), steps)``; at q = 1 (a release
    computed on the whole data set, e.g. DP-SGD's private normalisation statistics) the Gaussian itself,
    ``SelfComposedDpEvent(GaussianDpEvent(sigma), steps)`` (Poisson sampling with probability 1 is no sampling).
    Several segments: their ``ComposedDpEvent``; one: its event alone; none with steps: ``NoOpDpEvent``. sigma is
    Opacus' noise multiplier, the noise's standard deviation over the clipping norm C, which is the L2 sensitivity
    of a clipped sum under adding or removing one record: dp-accounting's ``noise_multiplier`` under
    ``ADD_OR_REMOVE_ONE``.

    >>> event = history_events([(8.0, 1.0, 1), (0.82, 0.0105, 950)])
    >>> [(type(part.event).__name__, part.count) for part in event.events]
    [('GaussianDpEvent', 1), ('PoissonSampledDpEvent', 950)]
    """
    segments = []
    for sigma, q, steps in history:
        if not 0 < q <= 1:
            raise ValueError(f"a history's sample rate q must be in (0, 1]; got {q}")
        if steps < 0 or steps != int(steps):
            raise ValueError(f"a history's steps must be a whole number >= 0; got {steps}")
        if sigma < 0:
            raise ValueError(f"a history's noise multiplier sigma must be >= 0; got {sigma}")
        if steps:
            step = dp_event.GaussianDpEvent(sigma)
            step = step if q == 1 else dp_event.PoissonSampledDpEvent(q, step)
            segments.append(dp_event.SelfComposedDpEvent(step, int(steps)))
    if not segments:
        return dp_event.NoOpDpEvent()
    return segments[0] if len(segments) == 1 else dp_event.ComposedDpEvent(segments)


def epsilon_of(history: History, *, accountant: str, delta: float) -> tuple[float, float | None]:
    """``(epsilon, order)`` of a history under one accountant; order is the best RDP order (RDP only).

    An empty history (no step taken) spends nothing: ``(0.0, None)``. Results are
    cached (PRV takes up to a second on long histories). IntractableAccounting for a PRV
    history that would need too much memory (tiny noise multipliers, very long histories).
    """
    return _epsilon(tuple(map(tuple, history)), accountant, delta)


def prv_grid_points(history: History, delta: float) -> float:
    """Number of points of the grid Opacus' PRV accountant discretises ``history`` on, computed without building it.

    As in Opacus' ``PRVAccountant.get_epsilon`` (defaults eps_error = 0.01, delta_error = delta / 1000): the
    domain is [-L, L] with L Gopi et al.'s safe domain size (Opacus' ``compute_safe_domain_size``, as
    :func:`.opacus_rdp.safe_domain_size` computes it) and the mesh
    is eps_error / sqrt(N log(12 / delta_error) / 2), N the total number of steps; points = 2 L / mesh.
    """
    history = [h for h in history if h[2] > 0]
    if not history:
        return 0.0
    delta_error = delta / 1000
    with warnings.catch_warnings():  # Opacus' "optimal order is the smallest/largest alpha": expected for L's bounds
        warnings.filterwarnings("ignore", "Optimal order is the", UserWarning)
        half_width = safe_domain_size(history, PRV_EPS_ERROR, delta_error)
    total_steps = sum(steps for _, _, steps in history)
    return _grid_points(half_width, _prv_mesh(total_steps, PRV_EPS_ERROR, delta_error))


def _prv_mesh(total_steps: int, eps_error: float, delta_error: float) -> float:
    """Opacus' PRV mesh, eps_error / sqrt(N log(12 / delta_error) / 2) for N steps in all (its expression verbatim)."""
    return eps_error / np.sqrt(total_steps * np.log(12 / delta_error) / 2)


def _grid_points(half_width: float, mesh: float) -> float:
    """Points of a grid of step ``mesh`` over [-L, L], L = ``half_width``: 2 L / mesh."""
    return float(2 * half_width / mesh)


def prv_memory_bytes(history: History, delta: float) -> float:
    """Estimated peak memory of Opacus' PRV accountant on ``history``: grid points x bytes per point, the latter
    growing with the number of (sigma, q) entries (see PRV_BYTES_PER_POINT)."""
    return _memory_bytes(history, prv_grid_points(history, delta))


def _memory_bytes(history: History, grid_points: float) -> float:
    """``grid_points`` x (PRV_BYTES_PER_POINT + PRV_BYTES_PER_POINT_PER_EXTRA_ENTRY x (E - 1)), E the number of
    entries of ``history`` with steps; 0 when it has none."""
    entries = sum(1 for _, _, steps in history if steps > 0)
    if not entries:
        return 0.0
    per_point = PRV_BYTES_PER_POINT + PRV_BYTES_PER_POINT_PER_EXTRA_ENTRY * (entries - 1)
    return grid_points * per_point


def check_prv_tractable(history: History, delta: float) -> None:
    """IntractableAccounting (naming the RDP accountant's epsilon instead) if PRV would need too much memory."""
    _refuse_if_intractable(history, delta, prv_grid_points(history, delta))


def _refuse_if_intractable(history: History, delta: float, grid_points: float) -> None:
    """IntractableAccounting if PRV's memory estimate on a grid of ``grid_points`` points exceeds PRV_MAX_BYTES;
    the message gives the RDP accountant's epsilon instead."""
    needed = _memory_bytes(history, grid_points)
    if needed > PRV_MAX_BYTES:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # "optimal order is the smallest alpha": expected at such noise
            rdp_eps, _ = epsilon_of(history, accountant="rdp", delta=delta)
        raise IntractableAccounting(
            f"the PRV accountant would need about {needed / 1e9:.2g} GB of memory (a grid of "
            f"{grid_points:.2g} points; at most {PRV_MAX_BYTES / 1e9:g} GB is allowed): too many "
            f"steps or models, or too little noise; the RDP accountant gives epsilon = {rdp_eps:.4g} at "
            f"delta = {delta:g}")


class _CheckedPRVAccountant(PRVAccountant):
    """Opacus' PRV accountant that computes Gopi et al.'s safe domain size L once and refuses an intractable
    history from it (as :func:`check_prv_tractable` would) before it discretises anything.

    Why a subclass: L (Opacus' ``compute_safe_domain_size``, an RDP bound over many orders) is the costly part of
    a short history's epsilon, and Opacus computes it inside ``get_epsilon`` with no way to pass it in, so checking
    the grid size first computed it twice. This overrides Opacus' private ``_get_domain`` (what ``_get_dprv`` calls
    with the history's PRVs and steps before truncating and discretising them); its body is Opacus' own: the
    domain [-L, L] aligned to the mesh eps_error / sqrt(N log(12 / delta_error) / 2), N the total steps, from the
    same arguments, with L from :func:`.opacus_rdp.safe_domain_size` (Opacus' function to the bit, each (sigma, q)'s
    one-step RDP computed once per process), so the epsilon is Opacus' to the bit. The grid it checks, 2 L / mesh, is
    :func:`prv_grid_points`'s whenever every entry has steps (Opacus keeps an entry without steps in L, where
    :func:`prv_grid_points` drops it: then the grid checked is the one Opacus really builds).
    """

    def __init__(self, delta: float):
        super().__init__()
        self.delta = delta
        self.domain_checked = False  # set by _get_domain (see _check_opacus_calls_the_override)

    def _get_domain(self, prvs: list[PoissonSubsampledGaussianPRV], num_self_compositions: list[int],
                    eps_error: float, delta_error: float) -> Domain:
        half_width = safe_domain_size([(prv.noise_multiplier, prv.sample_rate, steps)
                                       for prv, steps in zip(prvs, num_self_compositions)], eps_error, delta_error)
        mesh = _prv_mesh(sum(num_self_compositions), eps_error, delta_error)
        _refuse_if_intractable(self.history, self.delta, _grid_points(half_width, mesh))
        self.domain_checked = True
        return Domain.create_aligned(-half_width, half_width, mesh)


@functools.cache
def _check_opacus_calls_the_override() -> None:
    """Once per process, before any PRV epsilon: Opacus' ``get_epsilon`` must build its domain through
    ``_get_domain``, where :class:`_CheckedPRVAccountant` runs the memory check; an Opacus that stopped doing so
    would discretise an intractable history unchecked, so then every PRV epsilon is refused, before any grid is
    built. The probe is a one-step history (a grid of about 3 200 points, 0.2 MB)."""
    probe = _CheckedPRVAccountant(1e-5)
    probe.history = [(1.0, 0.01, 1)]
    probe.get_epsilon(delta=1e-5, eps_error=PRV_EPS_ERROR)
    if not probe.domain_checked:
        raise RuntimeError("this version of Opacus' PRVAccountant.get_epsilon no longer builds its domain through "
                           "_get_domain, where privengine's PRV memory check runs: install Opacus 1.6 (what this "
                           "release was tested with) or update _CheckedPRVAccountant")


@functools.lru_cache(maxsize=1024)
def _epsilon(history: tuple[tuple[float, float, int], ...], accountant: str, delta: float
             ) -> tuple[float, float | None]:
    if not history:
        return 0.0, None
    if accountant == "rdp":  # Opacus' RDPAccountant.get_privacy_spent, from the one-step RDP kept per (sigma, q)
        return rdp_epsilon(list(history), delta)
    if accountant == "prv":
        _check_opacus_calls_the_override()
        acc = _CheckedPRVAccountant(delta)
    else:
        acc = make_accountant(accountant)
    if accountant == "gdp" and len(history) > 1:
        raise ValueError("the GDP accountant needs one constant (sigma, q); got several")
    acc.history = [tuple(h) for h in history]
    with warnings.catch_warnings():  # PRV evaluates log(1 - q), -inf at q = 1 (a full-data Gaussian step)
        warnings.filterwarnings("ignore", "divide by zero encountered in log", RuntimeWarning)
        return float(acc.get_epsilon(delta=delta, eps_error=PRV_EPS_ERROR)), None


def calibrate_noise_multiplier(*, target_epsilon: float, delta: float, sample_rate: float, steps: int,
                               accountant: str, prefix: History = (),
                               on_probe: Callable[[float, float], None] | None = None) -> float:
    """The sigma whose epsilon after ``prefix`` then ``steps`` steps at ``sample_rate`` is within 0.01 below the target.

    The search of Opacus' ``get_noise_multiplier``, step for step (sigma_high doubled from 10 until epsilon <=
    target, then bisection from sigma_low = 0 until target - epsilon <= 0.01; the last sigma_high is returned),
    so without a prefix it returns Opacus' sigma. Written here over :func:`epsilon_of` because Opacus calibrates
    a single mechanism only (a prefix such as private normalisation statistics, charged before the first step,
    must compose) and because Opacus' PRV probes are unguarded: a probe that PRV would need too much memory for
    (IntractableAccounting) counts as above the target, which only moves the search to more noise; the sigma
    returned always has a computed epsilon (below the target by more than the tolerance when the sigmas that
    would come closer are all ones PRV cannot account: then the smallest accountable one). ValueError if the
    prefix alone spends the target or no sigma up to Opacus' MAX_SIGMA reaches it.

    ``on_probe(sigma, epsilon)``, if given, is told each probe of the search as it is computed (epsilon inf for one
    PRV cannot account), for progress only: it changes nothing of the search (an exception it raises ends the search
    and reaches the caller: how ``PlanSearch.cancel`` in privengine/dpsgd/planning.py ends a search nobody will wait
    for).
    """
    prefix = list(prefix)

    def eps(sigma: float) -> float:
        try:
            value = epsilon_of(prefix + [(sigma, sample_rate, steps)], accountant=accountant, delta=delta)[0]
        except IntractableAccounting:
            value = math.inf
        if on_probe is not None:
            on_probe(sigma, value)
        return value

    if prefix and epsilon_of(prefix, accountant=accountant, delta=delta)[0] >= target_epsilon:
        raise ValueError("the steps before training alone spend the target epsilon")
    sigma_low, sigma_high, eps_high = 0.0, 10.0, math.inf
    while eps_high > target_epsilon:
        sigma_high *= 2
        eps_high = eps(sigma_high)
        if sigma_high > MAX_SIGMA:
            raise ValueError("The privacy budget is too low.")
    while target_epsilon - eps_high > CALIBRATION_TOLERANCE:
        if sigma_high - sigma_low <= 1e-9 * sigma_high:  # every sigma below sigma_high is one PRV cannot account
            break
        sigma = (sigma_low + sigma_high) / 2
        eps_sigma = eps(sigma)
        if eps_sigma < target_epsilon:
            sigma_high, eps_high = sigma, eps_sigma
        else:
            sigma_low = sigma
    return sigma_high
