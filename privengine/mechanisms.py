"""The catalogue: the mechanisms shipped with privengine and their audits, as registry entries (values), in the
order the app lists them. The registry registers them on its first use (:func:`privengine.registry.get`)."""

from __future__ import annotations

from .audit.dp_bayes_release import DP_BAYES_RELEASE_AUDIT
from .audit.dpsgd_one_run import DPSGD_ONE_RUN_AUDIT
from .audit.membership_job import DPSGD_MEMBERSHIP_AUDIT
from .audit.membership_pate_job import PATE_MEMBERSHIP_AUDIT
from .audit.pate_gnmax import PATE_GNMAX_AUDIT
from .dp_bayes.mechanism import DP_BAYES
from .dpsgd.mechanism import DPSGD
from .entries import Mechanism
from .pate.mechanism import PATE
from .split_label.mechanism import SPLIT_LABEL

SHIPPED: tuple[Mechanism, ...] = (PATE, SPLIT_LABEL, DP_BAYES, DPSGD, PATE_GNMAX_AUDIT, DPSGD_ONE_RUN_AUDIT,
                                  DP_BAYES_RELEASE_AUDIT, DPSGD_MEMBERSHIP_AUDIT, PATE_MEMBERSHIP_AUDIT)
