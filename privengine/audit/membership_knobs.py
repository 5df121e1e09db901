"""The knobs of the membership attack on a run of each mechanism that has one, for the page and the CLI.

Here, above both membership audits (:mod:`.membership_job` for DP-SGD, :mod:`.membership_pate_job` for PATE), so
that neither they nor the catalogue that lists them (:mod:`privengine.mechanisms`) looks them up in the registry.
"""

from __future__ import annotations

from typing import Any

from .membership_job import MembershipAuditConfig, MembershipKnobs
from .membership_pate_job import PateMembershipConfig

KNOBS_OF_MECHANISM: dict[str, type[MembershipKnobs]] = {"dpsgd": MembershipAuditConfig, "pate": PateMembershipConfig}


def attack_knobs(mechanism: str, **values: Any) -> MembershipKnobs:
    """The knobs of the membership attack on a run of ``mechanism`` (a key of
    :data:`~.membership_job.AUDIT_OF_MECHANISM`), with ``values`` set and validated (ConfigError naming the
    field)."""
    return KNOBS_OF_MECHANISM[mechanism](**values).validate()
