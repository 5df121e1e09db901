"""Parameter exploration: sweeps over knobs and seeds, privacy-utility frontiers, a sweep's composed claim.

No Streamlit here; the Explore page and the CLI's ``sweep`` commands are thin layers over it.
"""

from .frontier import pareto, run_values
from .spec import Point, SweepSpec, expand, run_configs, suggest_values

__all__ = ["Point", "SweepSpec", "expand", "pareto", "run_configs", "run_values", "suggest_values"]
