"""The mechanisms shipped with privengine, and their audits, registered on first use of the registry."""

from __future__ import annotations

from .pate import mechanism as _pate  # noqa: F401
from .split_label import mechanism as _split_label  # noqa: F401
from .dp_bayes import mechanism as _dp_bayes  # noqa: F401
from .dpsgd import mechanism as _dpsgd  # noqa: F401
from .audit import pate_gnmax as _pate_gnmax_audit  # noqa: F401
from .audit import dpsgd_one_run as _dpsgd_one_run_audit  # noqa: F401
from .audit import dp_bayes_release as _dp_bayes_release_audit  # noqa: F401
from .audit import membership_job as _membership_audit  # noqa: F401
from .audit import membership_pate_job as _pate_membership_audit  # noqa: F401
