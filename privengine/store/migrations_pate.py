"""The PATE data migrations: stored claims relabelled for what their figures are, by text, the labels and caveats
spelled here as PATE stored them then, so the store never imports the PATE package.

They are the store's only rewrites of claim text, kept as they are so that the stores they upgrade (written before
version 4, and before version 8) read as new runs do. No later migration rewrites text
(``tests/test_store_events_migration.py`` checks): what limits a stored figure is data, the claim's ``condition``
(which every view prints with its ε; :data:`MNIST_SANITIZER_TUNED` sets it with ``json_set``), and its label's
qualifier is written from that data by the code that states the claim (``privengine.pate.privacy``).

:data:`CONFIDENT_GNMAX_BEFORE_ISSUE_24` (migration 3 -> 4): Confident-GNMax runs stored before issue 24.

Those runs charged an unanswered query its threshold step only. Their data-dependent curve is the realised
(paper-style) figure, their data-independent curve the odometer over the answered queries, and their sanitized
figure rests on the realised RDP, which is not a bound. :data:`CONFIDENT_GNMAX_BEFORE_ISSUE_24` is the store's
migration 3 -> 4 (:data:`privengine.store.schema.MIGRATIONS`): it renames the two curves and rewrites the labels
and the caveat in the stored summaries by text (``replace()`` on the JSON).

:data:`MNIST_SANITIZER_TUNED` (migration 7 -> 8): the sanitizer's settings (beta, sigma_ss, the order's rule) were
chosen on MNIST teachers' votes, so the sanitized figure of an MNIST run is not covered (issue 35, item 4). Runs
stored before that was said keep their figure, now labelled, conditioned and caveated as a new MNIST run's is.
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

_MNIST_SANITIZED = ("SELECT id FROM runs WHERE mechanism = 'pate' AND json_extract(config, '$.dataset') = 'mnist' "
                    "AND json_extract(config, '$.aggregator') IN ('gnmax', 'confident_gnmax')")
_TUNED_LABEL = ("data-dependent, sanitized through smooth sensitivity (not covered: tuned on these votes; "
                "not publishable)")
_TUNED_CONDITION = "not covered: tuned on these votes"
_SANITIZED_CAVEAT = ("A data-dependent guarantee: it bounds the privacy loss for this private data set against its "
                     "neighbours, not for every data set (the a-priori headline does that). Unlike the raw figure it "
                     "may be published: the data-dependent RDP was released with Gaussian noise scaled to its smooth "
                     "sensitivity (Papernot et al. 2018, Sec. 4 and App. B), and that release's own cost is included "
                     "here and in the headline.")
_TUNED_CAVEAT = ("Not covered and not publishable on this data set: the sanitizer's settings (beta = 0.3/lam, "
                 "sigma_ss = lam and the rule that fixes lam) were chosen by comparing exact data-dependent epsilons "
                 "of MNIST teachers' votes, so they are a function of this private data that no accountant charges. "
                 "The figure is shown to compare with the paper; rely on the a-priori headline.")
_FIXED_BEFORE = "Fixed before the votes were seen, so the choices release nothing:"
_NOT_FIXED_BEFORE = ("Not fixed before votes of this data set were seen (chosen on MNIST teachers' votes, "
                     "docs/results/pate.md):")
_DEPENDENT_COVERS_SANITIZED = ("(the a-priori data-independent bound is, and so is the sanitized data-dependent "
                               "figure where the run publishes one)")
_DEPENDENT_TUNED = ("(the a-priori data-independent bound is; on this data set the sanitized figure is not, since its "
                    "settings were tuned on these votes)")
_UNPROTECTED_COVERS_SANITIZED = ("(A sanitized data-dependent epsilon, where the run publishes one, is covered: "
                                 "its release is charged.)")
_UNPROTECTED_TUNED = ("(The sanitized data-dependent epsilon is not covered on this data set either: its settings "
                      "were tuned on these votes.)")


def _literal(text: str) -> str:
    """``text`` as an SQL string literal (its quotes doubled)."""
    return "'" + text.replace("'", "''") + "'"


_SANITIZED_INDEX = (f"(SELECT key FROM json_each(runs.summary, '$.privacy') "
                    f"WHERE json_extract(value, '$.label') = {_literal(_TUNED_LABEL)})")

MNIST_SANITIZER_TUNED: tuple[str, ...] = tuple(
    f"UPDATE runs SET summary = replace(summary, {_literal(old)}, {_literal(new)}) WHERE id IN ({_MNIST_SANITIZED})"
    for old, new in ((f'"{_SANITIZED_LABEL}"', f'"{_TUNED_LABEL}"'), (_SANITIZED_CAVEAT, _TUNED_CAVEAT),
                     (_FIXED_BEFORE, _NOT_FIXED_BEFORE), (_DEPENDENT_COVERS_SANITIZED, _DEPENDENT_TUNED),
                     (_UNPROTECTED_COVERS_SANITIZED, _UNPROTECTED_TUNED))
) + (
    f"UPDATE runs SET summary = json_set(summary, '$.privacy[' || {_SANITIZED_INDEX} || '].condition', "
    f"{_literal(_TUNED_CONDITION)}) WHERE id IN ({_MNIST_SANITIZED}) AND {_SANITIZED_INDEX} IS NOT NULL",
)
