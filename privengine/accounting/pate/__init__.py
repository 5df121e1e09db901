r"""Privacy accounting for PATE (Private Aggregation of Teacher Ensembles).

``votes`` is always an ``(n_queries, n_classes)`` array of teacher vote counts
(integers or floats, >= 0), one row per query that is charged; its number of
columns is the true number of classes ``m`` (a class nobody voted for is a zero
column, not a missing one). Every function is vectorised over queries x orders.

One module per concern, each with its math in its docstring; this package's
interface is the names below.

* :mod:`.common` -- the inputs every analysis accepts, the result it returns
  (:class:`PateAnalysis`) and the RDP orders it searches (:data:`GNMAX_ORDERS`).
* :mod:`.lnmax` -- LNMax with the moments accountant (Papernot et al. 2016):
  data-independent and data-dependent epsilon, and the smooth sensitivity of the latter.
* :mod:`.gnmax` -- GNMax and Confident-GNMax with data-dependent RDP (Papernot et al.
  2018, Thm 6), their data-independent figures and Confident-GNMax's a-priori bound.
* :mod:`.sensitivity` -- local-sensitivity bounds at distance ``d`` of that RDP, per
  query and summed over a run, and the beta-smooth sensitivity built from them (App. B).
* :mod:`.a_priori` -- what each aggregator releases per query as dp-accounting privacy events, the
  events of the a-priori claims (replace-one neighbours).
* :mod:`.gnss` -- publishing a run's data-dependent RDP through Gaussian noise scaled to
  its smooth sensitivity (GNSS): its RDP, and the shifted release that is an upper bound
  with a stated probability.

Public API: the three scalar functions :func:`lnmax_moments_epsilon`,
:func:`gnmax_epsilon`, :func:`confident_gnmax_epsilon` are thin wrappers of
:func:`lnmax_analysis`, :func:`gnmax_analysis`, :func:`confident_gnmax_analysis`,
which return a :class:`PateAnalysis` (eps, order, eps-vs-queries curves, ...).
:func:`lnmax_eps_curve`, :func:`gnmax_eps_curve`, :func:`confident_gnmax_eps_curve`
give eps as a function of the number of queries charged (answered; Confident-GNMax: every submitted one by default), and
:func:`lnmax_smooth_sensitivity` the smooth sensitivity of the LNMax
data-dependent eps; :func:`gnmax_events`, :func:`confident_gnmax_events` and :func:`lnmax_events` the
releases of a number of queries as privacy events. Bad inputs raise :class:`privengine.errors.ConfigError`.
"""

from .common import GNMAX_ORDERS, PateAnalysis
from .gnmax import (confident_gnmax_a_priori_epsilon, confident_gnmax_analysis, confident_gnmax_eps_curve,
                    confident_gnmax_epsilon, gnmax_analysis, gnmax_eps_curve, gnmax_epsilon)
from .gnss import gnss_rdp, gnss_rdp_at_orders, sanitize_rdp, shifted_gnss_sigma
from .lnmax import lnmax_analysis, lnmax_eps_curve, lnmax_moments_epsilon, lnmax_smooth_sensitivity
from .sensitivity import (confident_gnmax_summed_local_sensitivity_bounds, gnmax_local_sensitivity_bounds,
                          gnmax_summed_local_sensitivity_bounds, smooth_sensitivity,
                          threshold_local_sensitivity_bounds)

__all__ = [
    "GNMAX_ORDERS",
    "PateAnalysis",
    "lnmax_analysis",
    "lnmax_moments_epsilon",
    "lnmax_smooth_sensitivity",
    "lnmax_eps_curve",
    "gnmax_analysis",
    "gnmax_epsilon",
    "gnmax_eps_curve",
    "confident_gnmax_analysis",
    "confident_gnmax_epsilon",
    "confident_gnmax_eps_curve",
    "confident_gnmax_a_priori_epsilon",
    "gnmax_local_sensitivity_bounds",
    "threshold_local_sensitivity_bounds",
    "smooth_sensitivity",
    "gnss_rdp",
    "gnss_rdp_at_orders",
    "gnmax_summed_local_sensitivity_bounds",
    "confident_gnmax_summed_local_sensitivity_bounds",
    "shifted_gnss_sigma",
    "sanitize_rdp",
    "gnmax_events",
    "confident_gnmax_events",
    "lnmax_events",
]


def __getattr__(name: str):
    """The a-priori events (:mod:`.a_priori`) are loaded on first use (PEP 562): they import dp-accounting, which
    imports scipy.stats and scipy.signal, seconds that every CLI command paid through the PATE audit's import."""
    if name in ("confident_gnmax_events", "gnmax_events", "lnmax_events"):
        from . import a_priori

        return getattr(a_priori, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
