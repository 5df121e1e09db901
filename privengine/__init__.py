"""privengine: an engine for exploring privacy-preserving machine learning.

The public surface: mechanism configs (:mod:`privengine.config`), the registry
of mechanisms, the run store, the job manager and the privacy claims every run
reports. ``privengine`` never imports Streamlit; the dashboard sits on top of it.
"""

from .claims import PrivacyClaim, claims_of
from .config import BaseConfig, RunConfig, knob
from .errors import ConfigError, PrivengineError, RunNotFoundError
from .registry import Mechanism, all_mechanisms, get, register
from .store import RunStore

__version__ = "0.1.0"

__all__ = [
    "BaseConfig", "ConfigError", "Mechanism", "PrivacyClaim", "PrivengineError", "RunConfig", "RunNotFoundError",
    "RunStore", "all_mechanisms", "claims_of", "get", "knob", "register",
]
