"""The PATE data migration: Confident-GNMax runs stored before issue 24 renamed for what their figures are.

Those runs charged an unanswered query its threshold step only. Their data-dependent curve is the realised
(paper-style) figure, their data-independent curve the odometer over the answered queries, and their sanitized
figure rests on the realised RDP, which is not a bound. :data:`CONFIDENT_GNMAX_BEFORE_ISSUE_24` is the store's
migration 3 -> 4 (:data:`privengine.store.schema.MIGRATIONS`): it renames the two curves and rewrites the labels
and the caveat in the stored summaries by text (``replace()`` on the JSON), the labels spelled here as PATE
stored them then, so the store never imports the PATE package.
"""

from __future__ import annotations

_OLD_CONFIDENT = ("SELECT id FROM runs WHERE mechanism = 'pate' "
                  "AND json_extract(config, '$.aggregator') = 'confident_gnmax'")
_SANITIZED_LABEL = "data-dependent, sanitized through smooth sensitivity (publishable)"
_DATA_DEPENDENT_LABEL = "data-dependent (not publishable)"
_OLD_DATA_DEPENDENT_LABEL = ("realised data-dependent figure, no GNMax step for unanswered queries (stored before "
                             "that was fixed): not a bound; not publishable")
_SANITIZED_MAY_BE_PUBLISHED = "Unlike the raw figure it may be published"  # in the sanitized claim's caveat
_OLD_SANITIZED_CAVEAT = ("Stored before issue 24: released from a realised RDP that leaves out unanswered queries, "
                         "so it is not a bound and must not be published")
_OLD_SANITIZED_LABEL = ("data-dependent, sanitized from a realised RDP that leaves out the GNMax step of unanswered "
                        "queries (stored before that was fixed): not a bound, do not publish")

CONFIDENT_GNMAX_BEFORE_ISSUE_24: tuple[str, ...] = (
    f"UPDATE metrics SET name = 'eps_realised' WHERE name = 'eps_data_dependent' AND run_id IN ({_OLD_CONFIDENT})",
    f"UPDATE metrics SET name = 'eps_odometer' WHERE name = 'eps_data_independent' AND run_id IN ({_OLD_CONFIDENT})",
    f"UPDATE runs SET summary = replace(summary, '\"{_SANITIZED_LABEL}\"', '\"{_OLD_SANITIZED_LABEL}\"') "
    f"WHERE id IN ({_OLD_CONFIDENT})",
    f"UPDATE runs SET summary = replace(summary, '\"{_DATA_DEPENDENT_LABEL}\"', '\"{_OLD_DATA_DEPENDENT_LABEL}\"') "
    f"WHERE id IN ({_OLD_CONFIDENT})",
    f"UPDATE runs SET summary = replace(summary, '{_SANITIZED_MAY_BE_PUBLISHED}', '{_OLD_SANITIZED_CAVEAT}') "
    f"WHERE id IN ({_OLD_CONFIDENT})",
    "UPDATE runs SET summary = json_set(summary, '$.sanitized_epsilon.not_a_bound', json('true')) "
    f"WHERE id IN ({_OLD_CONFIDENT}) AND json_extract(summary, '$.sanitized_epsilon') IS NOT NULL",
)
