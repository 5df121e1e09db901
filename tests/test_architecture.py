"""The layers of docs/ARCHITECTURE.md, checked on the source: every module under privengine/ is parsed with ``ast``
and its imports (module-level and inside functions alike) are the arrows of the picture.

- A mechanism package (a package ``privengine/<name>/`` with a ``mechanism.py`` that ``privengine/mechanisms.py``
  registers) imports no other mechanism package, and nothing above it (sweeps, reports, figures, audits, jobs,
  the CLI, the module that registers every mechanism); what two mechanisms share lives in a lower layer.
- The foundation (accounting, features, the registry and the modules a mechanism builds on) imports nothing
  above it and no mechanism.
- ``privengine`` never imports Streamlit, ``ui`` or ``pages``.
- No module is over 500 lines unless its docstring says why (:data:`LONG_REASON`).
- No import cycle, among the engine's, the UI's and the pages' modules, module-level or inside a function.
- No module imports another module's private name (``from x import _name``); dunders like ``__version__`` are public.
- Inside the front end: ``ui`` imports no page, and a page no other page.
"""

from __future__ import annotations

import ast
import graphlib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "privengine"
MAX_LINES = 500
LONG_REASON = "Longer than 500 lines because"

# Above the mechanisms: they use mechanisms (or every mechanism, through the registry), never the reverse.
ABOVE_MECHANISMS = ("privengine.explore", "privengine.report", "privengine.figures", "privengine.audit",
                    "privengine.ledger", "privengine.jobs", "privengine.cli", "privengine.cli_fields",
                    "privengine.__main__", "privengine.mechanisms")
# Under the mechanisms: what a mechanism, a sweep or an audit builds on (with the package's own __init__).
FOUNDATION = ("privengine.accounting", "privengine.features", "privengine.errors", "privengine.jsonable",
              "privengine.config", "privengine.claims", "privengine.presets", "privengine.randomness",
              "privengine.poisson",
              "privengine.device", "privengine.cuda_graphs", "privengine.schedules", "privengine.data",
              "privengine.data_catalogue",
              "privengine.store", "privengine.reporter", "privengine.registry", "privengine.entries",
              "privengine.datasets", "privengine.kept_models")
FRONT_ENDS = ("streamlit", "ui", "pages", "app")
# The one arrow up from the foundation, with its reason: on first use the registry imports the module that
# registers the shipped mechanisms (by name, at run time, as it imports $PRIVENGINE_PLUGINS); none of its names.
ALLOWED = {("privengine.registry", "privengine.mechanisms")}


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}
FRONT_END_MODULES = {_module_name(p): p for p in sorted([ROOT / "app.py", *(ROOT / "ui").rglob("*.py"),
                                                          *(ROOT / "pages").glob("*.py")])}
EVERY_MODULE = MODULES | FRONT_END_MODULES


def _import_statements(name: str, *, top_level: bool = False):
    """``(module, imported names)`` of every import statement of ``name`` (``top_level``: only its own statements,
    not those inside a function or a block), the module absolute; ``import a.b`` gives ``("a.b", ())``."""
    path = EVERY_MODULE[name]
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    tree = ast.parse(path.read_text(), str(path))
    for node in (tree.body if top_level else ast.walk(tree)):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, ()
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[:len(package.split(".")) - node.level + 1]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module
            yield module, tuple(alias.name for alias in node.names)


def _imports(name: str, *, top_level: bool = False) -> set[str]:
    """Every module ``name`` imports (``top_level``: see :func:`_import_statements`), absolute; ``from a import b``
    counts as ``a.b`` when that is a module, else as ``a`` (a package whose submodules alone are imported is not
    itself an arrow: importing a submodule runs its package's ``__init__`` first in any case)."""
    found = set()
    for module, names in _import_statements(name, top_level=top_level):
        submodules = {f"{module}.{n}" for n in names if f"{module}.{n}" in EVERY_MODULE}
        found.update(submodules)
        if not names or len(submodules) < len(names):
            found.add(module)
    return found


def _import_graph() -> dict[str, set[str]]:
    """module -> the modules of this project it imports (every import, in functions too), itself left out."""
    return {name: {t for t in _imports(name) if t in EVERY_MODULE and t != name} for name in EVERY_MODULE}


def _a_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of imports in ``graph`` (its modules in order, the first repeated last), or None if it has none:
    the standard library's ``graphlib`` finds it while sorting the modules."""
    try:
        graphlib.TopologicalSorter(graph).prepare()
    except graphlib.CycleError as cycle:
        return cycle.args[1]
    return None


def _within(module: str, prefixes) -> bool:
    return any(module == p or module.startswith(p + ".") for p in prefixes)


def _in_foundation(module: str) -> bool:
    return module == "privengine" or _within(module, FOUNDATION)


def _mechanism_packages() -> set[str]:
    return {f"privengine.{p.parent.name}" for p in PACKAGE.glob("*/mechanism.py")}


def test_the_mechanism_packages_are_the_registered_ones():
    registered = {module.rpartition(".")[0] for module in _imports("privengine.mechanisms")
                  if module.endswith(".mechanism")}
    assert registered == _mechanism_packages()
    assert {"privengine.dpsgd", "privengine.pate", "privengine.split_label", "privengine.dp_bayes"} <= registered


@pytest.mark.parametrize("package", sorted(_mechanism_packages()))
def test_a_mechanism_imports_no_other_mechanism_and_nothing_above_it(package):
    others = _mechanism_packages() - {package}
    arrows = sorted((name, target) for name in MODULES if _within(name, [package]) for target in _imports(name)
                    if _within(target, others) or _within(target, ABOVE_MECHANISMS) or _within(target, FRONT_ENDS))
    assert not arrows, f"{package} reaches into another mechanism or a higher layer: {arrows}"


def test_the_foundation_imports_nothing_above_it():
    above = ABOVE_MECHANISMS + tuple(sorted(_mechanism_packages())) + FRONT_ENDS
    arrows = sorted((name, target) for name in MODULES if _in_foundation(name) for target in _imports(name)
                    if _within(target, above) and (name, target) not in ALLOWED)
    assert not arrows, f"arrows from the foundation up: {arrows}"


def test_the_allowed_arrow_is_a_lazy_import():
    """The registry's one arrow up is taken inside a function (on first use), never when the registry is imported."""
    for name, target in ALLOWED:
        assert target in _imports(name) and target not in _imports(name, top_level=True)


def test_the_engine_never_imports_a_front_end():
    arrows = sorted((name, target) for name in MODULES for target in _imports(name) if _within(target, FRONT_ENDS))
    assert not arrows


def test_every_module_is_in_one_layer():
    """A new top-level module must be placed in the picture (and here) before it is used."""
    mechanisms = _mechanism_packages()
    unplaced = [name for name in MODULES
                if not (_in_foundation(name) or _within(name, ABOVE_MECHANISMS) or _within(name, mechanisms))]
    assert not unplaced


def test_no_module_over_500_lines_without_its_reason():
    too_long = []
    for name, path in MODULES.items():
        lines = len(path.read_text().splitlines())
        docstring = ast.get_docstring(ast.parse(path.read_text())) or ""
        if lines > MAX_LINES and LONG_REASON not in " ".join(docstring.split()):
            too_long.append((name, lines))
    assert not too_long, f"split these or state at their top why not ({LONG_REASON} ...): {too_long}"


def test_the_cycle_finder_finds_a_cycle_through_a_function_level_import():
    cycle = _a_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set()})
    assert set(cycle) == {"a", "b", "c"} and len(cycle) == 4 and cycle[0] == cycle[-1]
    assert _a_cycle({"a": {"b"}, "b": set()}) is None


def test_no_import_cycle_in_the_engine_the_ui_or_the_pages():
    """Every import counts, also those inside a function (a cycle hidden there still ties the modules together and
    makes their load order matter): issue 36 found four, through the registry's plugin load, the UI's links and
    shell, two figure modules and the Ray executor."""
    cycle = _a_cycle(_import_graph())
    assert cycle is None, f"an import cycle: {' -> '.join(cycle)}"


def test_no_module_borrows_another_modules_private_name():
    """Between this project's modules (a library's private names, which Opacus' optimizer hooks need, are the
    library's matter and pinned by its version)."""
    borrowed = sorted((name, module, imported) for name in EVERY_MODULE
                      for module, names in _import_statements(name) if module != name and module in EVERY_MODULE
                      for imported in names if imported.startswith("_") and not imported.startswith("__"))
    assert not borrowed, f"give these a public name (or keep them in their module): {borrowed}"


def test_the_front_end_layers():
    """``ui`` builds the pages' parts and imports no page; a page script imports no other page."""
    pages = {name for name in FRONT_END_MODULES if name.startswith("pages.")}
    arrows = sorted((name, target) for name in FRONT_END_MODULES if name.startswith(("ui.", "pages."))
                    for target in _imports(name) if target in pages and target != name)
    assert not arrows
