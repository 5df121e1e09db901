"""A run's kept models out of the tool: ``python -m privengine export ID --format model --output DIR`` and the run
page's download (the same folder as a zip, :func:`model_zip`).

The folder holds, for each model the run kept (:mod:`privengine.store.model_files`), ``NAME.safetensors`` and
``NAME.json`` (what :mod:`privengine.kept_models.loader` rebuilds in plain PyTorch), and the model card twice:
``model_card.json`` (:func:`model_card`) and a short ``MODEL_CARD.md`` (:func:`card_markdown`).
"""

from __future__ import annotations

import io
import json
import zipfile
from pathlib import Path
from typing import Any

from privengine.claims import claims_of, headline_of, union_caveats
from privengine.errors import ConfigError
from privengine.jsonable import to_jsonable
from privengine.store import RunStore
from privengine.store.model_files import SPEC_SUFFIX, WEIGHTS_SUFFIX

from .command import run_command

CARD_JSON, CARD_MARKDOWN = "model_card.json", "MODEL_CARD.md"
HEADLINE_METRICS = ("test_", "student_accuracy", "excess_risk")  # the metrics the markdown card shows, when present
COVERED = ("The model is covered by the run's headline claim (every model a run trains is); its metrics are measured "
           "on held-out data the claim does not protect, and figures the claims' caveats name as uncovered (a "
           "training loss, say) are published without privacy.")
NOT_COVERED = ("This run states no differential-privacy claim: no (ε, δ) covers the model or its metrics (split "
               "learning's label protections state a label-leakage bound instead: label_leakage_bound).")


def kept_names(store: RunStore, run_id: str) -> list[str]:
    """The models run ``run_id`` kept; RunNotFoundError for an unknown id, ConfigError naming ``ID`` when it kept
    none (and why, when its config says so)."""
    run = store.get_run(run_id)
    names = store.kept_models(run.id)
    if not names:
        why = ("its keep_model knob was off" if run.config.get("keep_model") is False
               else f"it is {run.state}" if run.state != "finished"
               else f"{run.mechanism} runs keep no model, or it finished before models were kept")
        raise ConfigError("ID", f"must be a run that kept a model; run {run.id} kept none ({why})")
    return names


def model_card(store: RunStore, run_id: str) -> dict[str, Any]:
    """The card of a run's kept models: the run, its recipe (config and the command that reruns it), its data
    source (never its fingerprint, the key of the run's noise), each model's metrics and spec summary, every privacy
    claim with its events, and the caveats."""
    run = store.get_run(run_id)
    specs = {name: _spec(store, run.id, name) for name in kept_names(store, run.id)}
    claims = claims_of(run.summary)
    headline = headline_of(run.summary)
    reproduction = run_command(run.mechanism, run.config)
    leakage = (run.summary or {}).get("label_leakage_bound")  # split learning: its bound, not an (ε, δ)
    return to_jsonable({
        "run": {"id": run.id, "name": run.name, "mechanism": run.mechanism, "state": run.state,
                "created_at": run.created_at, "finished_at": run.finished_at, "device": run.device},
        "recipe": {"config": run.config, "command": reproduction.command, "command_notes": list(reproduction.notes)},
        "data": {"source": store.data_source_of(run.id)},  # no fingerprint: privengine/kept_models/spec.py
        "models": [{"name": name, "default": bool(spec.get("default")), "kind": spec.get("kind"),
                    "task": spec.get("task"), "input": spec.get("input"), "preprocessing": spec.get("preprocessing"),
                    "classes": spec.get("classes"), "about": spec.get("model"), "metrics": spec.get("metrics")}
                   for name, spec in specs.items()],
        "summary_metrics": {k: v for k, v in (run.summary or {}).items()
                            if isinstance(v, (int, float)) and not isinstance(v, bool)},
        "privacy": {"headline": None if headline is None else headline.to_dict(),
                    "claims": [c.to_dict() for c in claims], "label_leakage_bound": leakage},
        "caveats": [COVERED if headline else NOT_COVERED, *union_caveats(claims),
                    *((leakage or {}).get("caveats") or ())],
    })


def card_markdown(card: dict[str, Any]) -> str:
    """A short human-readable card: what the model is, how it was made, what it claims and what it does not."""
    run, headline = card["run"], card["privacy"]["headline"]
    lines = [f"# Model card: run {run['id']} ({run['mechanism']})", ""]
    if headline:
        lines += [f"**Privacy (headline):** ε = {headline['epsilon']:.3g}, δ = {headline['delta']:g} "
                  f"[{headline['label']}], {headline['accountant']}; neighbouring data sets: "
                  f"{headline['neighbouring']}.", ""]
    else:
        lines += ["**Privacy:** this run states no claim.", ""]
    lines += ["## Recipe", "", f"`{card['recipe']['command']}`", "",
              "## Data", "", f"- source: {card['data']['source'] or 'not recorded'}",
              "", "## Models", ""]
    for model in card["models"]:
        numbers = {k: v for k, v in (model["metrics"] or {}).items() if isinstance(v, float)}
        shown = [k for k in numbers if k.startswith(HEADLINE_METRICS)] or list(numbers)[:3]
        metrics = ", ".join(f"{k} {numbers[k]:.4g}" for k in shown)
        lines.append(f"- `{model['name']}`{' (default)' if model['default'] else ''}: {model['task']}, input "
                     f"{model['input']['shape']}; {metrics or 'no metrics'}")
    lines += ["", "Load: `python -m privengine predict --model DIR --data FILE [--name NAME] [--json]`, or "
              "`privengine/kept_models/loader.py` alone (plain PyTorch).", "", "## Every claim", ""]
    lines += [f"- {c['label']}: ε = {c['epsilon']:.3g}, δ = {c['delta']:g} ({c['accountant']}; "
              f"{len(c.get('events') or [])} event(s) in model_card.json)" for c in card["privacy"]["claims"]]
    if not card["privacy"]["claims"]:
        lines.append("- none")
    lines += ["", "## Caveats", ""] + [f"- {c}" for c in card["caveats"]]
    return "\n".join(lines) + "\n"


def export_files(store: RunStore, run_id: str) -> dict[str, bytes]:
    """The export of run ``run_id``'s kept models: file name -> content (every model's two files, both cards)."""
    card = model_card(store, run_id)
    folder = store.models_dir(card["run"]["id"])
    files = {f"{m['name']}{suffix}": (folder / f"{m['name']}{suffix}").read_bytes()
             for m in card["models"] for suffix in (WEIGHTS_SUFFIX, SPEC_SUFFIX)}
    files[CARD_JSON] = json.dumps(card, indent=2, sort_keys=True).encode()
    files[CARD_MARKDOWN] = card_markdown(card).encode()
    return files


def export_model(store: RunStore, run_id: str, output: str | Path) -> Path:
    """Write :func:`export_files` into ``output`` (created; ConfigError naming ``--output`` if it exists and is not
    an empty folder); return it."""
    out = Path(output)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise ConfigError("--output", f"must be a new or empty folder; {out} "
                                      f"{'is not a folder' if not out.is_dir() else 'is not empty'}")
    files = export_files(store, run_id)
    out.mkdir(parents=True, exist_ok=True)
    for name, content in files.items():
        (out / name).write_bytes(content)
    return out


def model_zip(store: RunStore, run_id: str) -> bytes:
    """:func:`export_files` as the bytes of a zip file (the run page's download), under a folder ``model-ID/``."""
    run = store.get_run(run_id)
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for name, content in export_files(store, run.id).items():
            archive.writestr(f"model-{run.id}/{name}", content)
    return buffer.getvalue()


def _spec(store: RunStore, run_id: str, name: str) -> dict[str, Any]:
    return json.loads((store.models_dir(run_id) / f"{name}{SPEC_SUFFIX}").read_text(encoding="utf-8"))
