"""The catalogue: the mechanisms shipped with privengine and their audits, as registry entries (values), in the
order the app lists them, each with what it charges its privacy ledger: the private data source its runs read
(``data_source``), the claim covering a launch's whole planned release (``planned_claim``) and the parts of the
source it uses as public or held-out data (``public_rows``, DP-SGD's, PATE's and DP-Bayes'), the outputs it
publishes without privacy (``unprotected_outputs``: DP-SGD's, PATE's and DP-Bayes') and the other sources it releases on
(``other_sources``: DP-Bayes' evaluation data sets), the functions of its package's ``charge`` module (for audits,
the sources of :mod:`privengine.audit.sources`; an audit plans no claim).
The registry registers them on its first use (:func:`privengine.registry.get`)."""

from __future__ import annotations

from dataclasses import replace

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

_AUDITS = "privengine.audit.sources"
# the packages whose runs use part of their source as public or held-out data
_PUBLIC_PARTS = ("pate", "dpsgd", "dp_bayes")
_UNPROTECTED = ("pate", "dp_bayes", "dpsgd")  # ... whose runs publish outputs of their private data without privacy
_OTHER_SOURCES = ("dp_bayes",)  # ... whose runs release on data sets that are other runs' sources
SHIPPED: tuple[Mechanism, ...] = tuple(
    replace(entry, data_source=f"privengine.{package}.charge:data_source",
            planned_claim=f"privengine.{package}.charge:planned_claim",
            public_rows=f"privengine.{package}.charge:public_rows" if package in _PUBLIC_PARTS else None,
            unprotected_outputs=f"privengine.{package}.charge:unprotected_outputs" if package in _UNPROTECTED else None,
            other_sources=f"privengine.{package}.charge:other_sources" if package in _OTHER_SOURCES else None)
    for entry, package in ((PATE, "pate"), (SPLIT_LABEL, "split_label"), (DP_BAYES, "dp_bayes"), (DPSGD, "dpsgd"))
) + tuple(replace(entry, data_source=f"{_AUDITS}:{source}") for entry, source in (
    (PATE_GNMAX_AUDIT, "no_source"), (DPSGD_ONE_RUN_AUDIT, "one_run_source"), (DP_BAYES_RELEASE_AUDIT, "no_source"),
    (DPSGD_MEMBERSHIP_AUDIT, "dpsgd_membership_source"), (PATE_MEMBERSHIP_AUDIT, "pate_membership_source")))
