"""Conversion of run outputs (numpy arrays and scalars, tensors, dataclasses) to plain JSON values."""

from __future__ import annotations

import dataclasses
import math
from typing import Any


def to_jsonable(value: Any) -> Any:
    """Return ``value`` as nested dicts, lists, str, int, float, bool and None.

    numpy arrays and torch tensors become lists, their scalars Python numbers,
    dataclasses dicts; NaN and infinities become None (JSON has no spelling for them).
    """
    if value is None or isinstance(value, (bool, str, int)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {str(k): to_jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [to_jsonable(v) for v in value]
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return to_jsonable(dataclasses.asdict(value))
    if hasattr(value, "detach") and hasattr(value, "cpu"):  # a torch tensor
        return to_jsonable(value.detach().cpu().tolist())
    if hasattr(value, "tolist"):  # numpy arrays and scalars
        return to_jsonable(value.tolist())
    raise TypeError(f"cannot store a {type(value).__name__} as JSON")
