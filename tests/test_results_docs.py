"""Every results table that states an ε also states what the figure costs (issue 35, item 3).

The convention (docs/results/README.md): a markdown table in docs/results/*.md or README.md states an ε when a
header cell or the first cell of a row names one (the letter ε, or the word eps or epsilon). Such a table has
three labels, as header cells or, for a table laid out by rows, as first cells of rows:

- ``headline ε``: the ε of everything the run (or runs) that produced the figure released;
- ``ε per model``: the figure of one model trained with a recipe fixed in advance (the papers' convention);
- ``tuning cost``: the ε of composing every candidate tried on that split to choose the recipe.

A table whose ε is not the privacy figure of a published result (accountant check values, audits, attacks,
synthetic data) says why on the line directly above it: ``<!-- exempt: the reason -->``.

A document that names a preset of a scattering split (``fmnist-scatter-*``, ``mnist-scatter-*``) states what covers
everything published on that split, labelled ``Covered by (Fashion-MNIST's scattering split)`` or ``Covered by
(MNIST's scattering split)`` (issue 35, item 3): the composition that ``docs/results/tuning_cost.py`` prints.

The figures the documents cite from ``tuning_cost.py`` (tuning costs, covered-by figures, the compositions of runs:
the privacy ledger's composition of their events, issue 37) are the ones it printed, kept in
``docs/results/tuning_cost.txt`` with a digest of the sources that printed them (:data:`CITED`).
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCUMENTS = sorted((ROOT / "docs" / "results").glob("*.md")) + [ROOT / "README.md"]
REQUIRED = ("headline ε", "ε per model", "tuning cost")
NAMES_AN_EPSILON = re.compile(r"ε|\beps\b|\bepsilon\b", re.IGNORECASE)
SEPARATOR = re.compile(r"^\|?\s*:?-+:?\s*(\|\s*:?-+:?\s*)*\|?\s*$")
EXEMPTION = re.compile(r"^<!--\s*exempt:\s*(?P<reason>.*?)\s*-->$")
MIN_REASON_WORDS = 4
# A preset of a scattering split, and the label of that split's covered-by figure (it may wrap across lines)
SCATTERING_PRESET = re.compile(r"(?<![\w-])(?P<dataset>f?mnist)-scatter(?:-[a-z0-9]+)+")
SPLITS = {"fmnist": "Fashion-MNIST", "mnist": "MNIST"}


def covered_by_label(split: str) -> re.Pattern[str]:
    """The label of a split's covered-by figure, e.g. ``Covered by (MNIST's scattering split)``."""
    return re.compile(r"covered\s+by\s+\(" + re.escape(split) + r"'s\s+scattering\s+split\)", re.IGNORECASE)


def cells(line: str) -> list[str]:
    """The cells of a table row (``\\|`` inside a cell is not a column break)."""
    return [cell.strip() for cell in re.split(r"(?<!\\)\|", line.strip().strip("|"))]


def tables(text: str) -> list[tuple[int, str, list[list[str]], str | None]]:
    """``(line number, header line, rows, exemption reason or None)`` of every table outside fenced code."""
    lines, found, fenced, i = text.splitlines(), [], False, 0
    while i < len(lines):
        line = lines[i].strip()
        if line.startswith("```"):
            fenced = not fenced
        elif (not fenced and line.startswith("|") and i + 1 < len(lines)
              and SEPARATOR.match(lines[i + 1].strip())):
            end = i + 2
            while end < len(lines) and lines[end].strip().startswith("|"):
                end += 1
            above = EXEMPTION.match(lines[i - 1].strip()) if i > 0 else None
            found.append((i + 1, line, [cells(row) for row in [lines[i]] + lines[i + 2:end]],
                          above["reason"] if above else None))
            i = end
            continue
        i += 1
    return found


def missing_labels(rows: list[list[str]]) -> list[str]:
    """The required labels that a table stating an ε lacks ([] when it states none or has all three)."""
    labels = rows[0] + [row[0] for row in rows[1:] if row]
    if not any(NAMES_AN_EPSILON.search(label) for label in labels):
        return []
    return [name for name in REQUIRED if not any(name in label.lower() for label in labels)]


@pytest.mark.parametrize("path", DOCUMENTS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_results_table_with_an_epsilon_states_its_headline_per_model_figure_and_tuning_cost(path):
    problems = []
    for line, header, rows, reason in tables(path.read_text(encoding="utf-8")):
        if reason is not None:
            if len(reason.split()) < MIN_REASON_WORDS:
                problems.append(f"{path.name}:{line}: table {header!r} is exempt without a reason")
            continue
        problems += [f"{path.name}:{line}: table {header!r} states an ε but has no {name!r} column"
                     for name in missing_labels(rows)]
    assert not problems, "\n".join(problems)


def missing_covered_by(text: str) -> list[tuple[int, int, str, str]]:
    """``(line, column, preset, split)`` of the first preset named of each scattering split whose covered-by label
    the text lacks (1-based line and column)."""
    first: dict[str, tuple[int, int, str]] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        for match in SCATTERING_PRESET.finditer(line):
            first.setdefault(SPLITS[match["dataset"]], (number, match.start() + 1, match[0]))
    return [(line, column, preset, split) for split, (line, column, preset) in first.items()
            if not covered_by_label(split).search(text)]


@pytest.mark.parametrize("path", DOCUMENTS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_document_naming_a_scattering_preset_states_what_covers_its_split(path):
    problems = [f"{path.name}:{line}:{column}: names {preset!r}, on {split}'s scattering split, but states no "
                f"'Covered by ({split}'s scattering split)' figure (PYTHONPATH=. python docs/results/tuning_cost.py)"
                for line, column, preset, split in missing_covered_by(path.read_text(encoding="utf-8"))]
    assert not problems, "\n".join(problems)


def test_the_covered_by_check_finds_each_split_and_its_label():
    """Each split's presets need that split's label (which may wrap); a Fashion-MNIST preset is not an MNIST one;
    the label of one split does not stand for the other's."""
    text = "\n".join(["Ran `mnist-scatter-mlp-eps3` and", "then fmnist-scatter-eps3 and fmnist-scatter-shaped.",
                      "**Covered by (Fashion-MNIST's", "scattering split)**: ε 41.92."])
    assert missing_covered_by(text) == [(1, 6, "mnist-scatter-mlp-eps3", "MNIST")]
    assert missing_covered_by(text + "\nCovered by (MNIST's scattering split): none meaningful.") == []
    assert missing_covered_by("the presets `fmnist-scatter-*` and mnist-scatter.py") == []
    assert missing_covered_by("x fmnist-scatter-eps3") == [(1, 3, "fmnist-scatter-eps3", "Fashion-MNIST")]


def test_the_check_reads_tables_as_the_convention_says():
    """A table naming ε in a header or row label needs all three labels, in either place (the exemption above a
    table is read separately); tables in fenced code are not read."""
    text = "\n".join([
        "| task | ε | accuracy |", "|---|---|---|", "| a | 3 | 90 % |", "",
        "| target ε | 1 |", "|---|---|", "| headline ε | 1.0 |", "| ε per model | 1.0 |", "| tuning cost | 2 |", "",
        "| path | seconds |", "|---|---|", "| one model | 0.7 |", "",
        "```", "| ε | x |", "|---|---|", "```", "",
        "<!-- exempt: accountant check values, no data -->", "| σ | ε |", "|---|---|", "| 1 | 2 |",
    ])
    found = tables(text)
    assert [missing_labels(rows) for _, _, rows, _ in found] == [list(REQUIRED), [], [], list(REQUIRED)]
    assert [reason for *_, reason in found] == [None, None, None, "accountant check values, no data"]
    assert cells(r"| a \| b | c |") == [r"a \| b", "c"]


# ---- the figures cited from docs/results/tuning_cost.py are the ones it printed -----------------------------------

RECORD = ROOT / "docs" / "results" / "tuning_cost.txt"
PRINTED = re.compile(r"^(?P<title>\S.*?): \d+ (?:models|runs), ε = (?P<eps>\d+\.\d\d)(?: |$)")
N = r"(?P<eps>\d{1,3}(?: \d{3})+|\d+\.\d\d)"  # a cited figure: 18.19, or a rounded one with thousands, 110 658
FMNIST_1, FMNIST_2 = "Fashion-MNIST, first pass", "Fashion-MNIST, second pass"
FMNIST_CHOICE, FMNIST_ALL = "Fashion-MNIST: tuning cost of fmnist-scatter-eps3", "COVERED BY, Fashion-MNIST's"
MNIST_2, MNIST_4, MLP = "MNIST, second pass", "MNIST, fourth pass", "MNIST: tuning cost of mnist-scatter-mlp-eps3"
MNIST_ALL, MNIST_REST = "COVERED BY, MNIST's", "MNIST's scattering split: everything published on it but"
SHAPED = "headline of one run: "
# record title (a prefix of one printed line) -> the phrases that cite its figure (in any document, each found once or
# more; matched on the text with its line breaks as spaces)
CITED = {
    FMNIST_1: [rf"{N}: lr 2, 4 and 8 on seed 0, composed", rf"Fashion-MNIST runs \(the ledger's PLD: ε = {N}",
               rf"chosen among lr 2, 4, 8 \({N}\)", rf"as above \({N}\) \|"],
    FMNIST_2: [rf"composed \({N} for the runs to the second pass's choice",
               rf"\| {N} \(every run on the split to the choice",
               rf"ε = {N} for Fashion-MNIST \(the six", rf"chosen in this pass \({N}: every run",
               rf"\| tuning cost \| not stated \| {N} \(every run"],
    "Fashion-MNIST: tuning cost of the ε 1 recipe": [rf"\| {N}: every run on the split to this one, its own"],
    FMNIST_CHOICE: [rf"\| {N}: every run on the split to the fourth pass", rf"; {N} with every run to the fourth pass",
                    rf"composes to ε = {N} \(the ledger's PLD, δ = 1e-5;",
                    rf"\| {N} \(every run on the split to the fourth",
                    rf"\| {N}: every run on the split to its choice, 42 models", rf"costs ε {N} \(Fashion-MNIST, 42",
                    rf"\| tuning cost \(the recipe's: every run on the split to its choice, at ε 3\) \| {N}"],
    FMNIST_ALL: [rf"Covered by \(Fashion-MNIST's scattering split\)\*\*: ε =? ?{N}", rf"other runs of this file and "
                 rf"gpu.md's\) \| \| {N} \|", rf"is covered by ε {N} \(", rf"\| {N}: 179 models",
                 rf"covered-by figure, {N}\)", rf"covered by \*\*ε = {N}\*\*", rf"published on the split ε = {N} \(",
                 rf"a term of the split's {N};"],
    MNIST_2: [rf"the recipe is T&B's; {N} for every run", rf"and {N} for MNIST \(the four",
              rf"to the second pass: {N}\)"],
    "MNIST, third pass": [rf"ε = {N} \(the per-run ε is 3;"],
    MNIST_4: [rf"comparison that kept it: {N} \|", rf", {N} to the fourth pass's comparison",
              rf"\| {N}(?:: every run on the split to this pass| \(as above\))", rf"not in the {N}: not a candidate",
              rf"fourth pass\"\): ε = {N} for publishing"],
    MLP: [rf"with it,? (?:ε )?{N} by RDP", rf"compose to ε = {N} \(RDP, the same command"],
    "MNIST: the same without the σ 0.05 diagnostic": [
        rf"the 31 models trained with privacy before (?:the choice alone: |the choice compose to |it: ){N}",
        rf"at δ = 1e-5 to ε = {N}"],
    MNIST_ALL: [rf"composes to ε = {N} \(RDP;", rf"\(everything: {N} by RDP\)", rf"no meaningful ε \({N} by RDP"],
    MNIST_REST: [rf"composes to {N} \(the ledger's PLD\): a figure", rf"among them: {N} \|", rf"; {N} for the rest\)",
                 rf"\({N} for the other 34 models\)"],
    "the 15-run sweep on the H200 and on the 2-core CPU": [rf"compose to ε = {N} \(the ledger's PLD\), not",
                                                          rf"with the H200's sweep above ε = {N}"],
    f"{SHAPED}linreg, elliptical": [rf"\| linreg \(excess risk, 5 seeds, lower is better\) \| 3 \| {N} \|"],
    f"{SHAPED}linreg, projected": [rf"\| linreg, projected variant \(5 seeds\) \| 3 \| {N} \|"],
    f"{SHAPED}Fashion-MNIST, k 32, α 0, -0.5, -0.8, ε 3": [rf"\| Fashion-MNIST, k = 32 \| 3 \| {N} \|"],
    f"{SHAPED}Fashion-MNIST, k 128": [rf"\| Fashion-MNIST, k = 128 \| 3 \| {N} \|"],
    f"{SHAPED}Fashion-MNIST, k 32, α 0, -0.5, -0.8, ε 1": [rf"\| Fashion-MNIST, k = 32 \| 1 \| {N} \|"],
    f"{SHAPED}Fashion-MNIST, k 32, α 0, -0.5, -0.8, ε 0.5": [rf"\| Fashion-MNIST, k = 32 \| 0.5 \| {N} \|"],
    f"{SHAPED}Fashion-MNIST, k 32, α 0, -0.5, ε 0.5, seeds": [rf"lr 16 \+ EMA 0.9 \| 0.5 \| {N} \|"],
    "PATE's runs on MNIST's training images": [rf"compose a priori to ε = {N} \(",
                                               rf"membership.md's PATE runs, {N},"],
}


def printed() -> dict[str, float]:
    """What tuning_cost.py printed (its record), title -> ε; the record must be the output of the current sources."""
    sys.path.insert(0, str(ROOT / "docs" / "results"))
    try:
        import tuning_cost
    finally:
        sys.path.remove(str(ROOT / "docs" / "results"))
    header, *lines = RECORD.read_text(encoding="utf-8").splitlines()
    assert header == f"{tuning_cost.RECORD_HEADER} {tuning_cost.source_digest()}", (
        "docs/results/tuning_cost.txt is not the output of the current tuning_cost.py and pate_tuning_cost.py: "
        "rerun PYTHONPATH=. python docs/results/tuning_cost.py and update the figures the documents cite")
    return {m["title"]: float(m["eps"]) for m in map(PRINTED.match, lines) if m}


def matches(figure: float, cited: str) -> bool:
    """A cited figure is the printed one to its two decimals, or rounded to a whole number when written without."""
    return cited == f"{figure:.2f}" if "." in cited else int(cited.replace(" ", "")) == round(figure)


def test_the_documents_cite_the_figures_tuning_cost_py_printed():
    figures, texts = printed(), {p.name: " ".join(p.read_text(encoding="utf-8").split()) for p in DOCUMENTS}
    problems = []
    for prefix, phrases in CITED.items():
        titles = [t for t in figures if t.startswith(prefix)]
        assert len(titles) == 1, f"{prefix!r} names {len(titles)} of the printed compositions, not one"
        title = titles[0]
        for phrase in phrases:
            found = [(name, m["eps"]) for name, text in texts.items() for m in re.finditer(phrase, text)]
            problems += [f"no document cites {prefix!r} as {phrase!r}"] if not found else [
                f"{name} cites {cited} for {title!r}; tuning_cost.py printed {figures[title]:.2f}"
                for name, cited in found if not matches(figures[title], cited)]
    assert not problems, "\n".join(problems)
