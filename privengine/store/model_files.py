"""The models a run keeps, as files beside the database: ``HOME/models/RUN_ID/NAME.safetensors`` (the weights) and
``NAME.json`` (the architecture spec that rebuilds the network in plain PyTorch, :mod:`privengine.kept_models`).

Part of :class:`~.run_store.RunStore` (:class:`ModelFiles`); the store reads neither file, it only places, lists and
deletes them. Each file is written to a temporary name and renamed, so a reader never sees half a model.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path
from typing import Any, Mapping

MODELS_DIR = "models"
WEIGHTS_SUFFIX, SPEC_SUFFIX = ".safetensors", ".json"
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,80}$")


class ModelFiles:
    """A run's kept models; mixed into :class:`~.run_store.RunStore` (which has ``path``, the database file)."""

    path: Path

    def models_dir(self, run_id: str) -> Path:
        """``HOME/models/RUN_ID``, where run ``run_id`` keeps its models (HOME: the database's folder)."""
        return self.path.parent / MODELS_DIR / run_id

    def put_model(self, run_id: str, name: str, tensors: Mapping[str, Any], spec: Mapping[str, Any]) -> None:
        """Keep one model of run ``run_id``: ``tensors`` (name -> torch tensor, any device) as safetensors and
        ``spec`` (JSON-able) beside them; a model of that name is replaced. ValueError for a name that is not a
        plain file name (letters, digits, ``_.-``)."""
        from safetensors.torch import save_file  # imports torch: only a run that keeps a model pays for it

        if not _NAME.match(name):
            raise ValueError(f"a kept model's name must be letters, digits, '_', '.' or '-'; got {name!r}")
        folder = self.models_dir(run_id)
        folder.mkdir(parents=True, exist_ok=True)
        weights = {key: t.detach().to("cpu").contiguous() for key, t in tensors.items()}
        _replace(folder / f"{name}{WEIGHTS_SUFFIX}", lambda tmp: save_file(weights, str(tmp)))
        _replace(folder / f"{name}{SPEC_SUFFIX}",
                 lambda tmp: tmp.write_text(json.dumps(spec, indent=2, sort_keys=True), encoding="utf-8"))

    def kept_models(self, run_id: str) -> list[str]:
        """The names of the models run ``run_id`` kept (both files present), sorted; [] if none."""
        folder = self.models_dir(run_id)
        if not folder.is_dir():
            return []
        return sorted(p.name.removesuffix(SPEC_SUFFIX) for p in folder.glob(f"*{SPEC_SUFFIX}")
                      if (folder / f"{p.name.removesuffix(SPEC_SUFFIX)}{WEIGHTS_SUFFIX}").is_file())

    def delete_models(self, run_id: str) -> None:
        """Remove run ``run_id``'s kept models (nothing if it kept none)."""
        shutil.rmtree(self.models_dir(run_id), ignore_errors=True)


def _replace(target: Path, write) -> None:
    """``write(tmp)`` to a temporary file beside ``target``, then rename it onto ``target`` (atomic on POSIX)."""
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    try:
        write(tmp)
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)
