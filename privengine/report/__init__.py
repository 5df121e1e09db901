"""Reports: a run, a sweep or a comparison of runs as one self-contained HTML file that opens offline.

``build`` takes a run id or a unique prefix of one, a sweep id, or run ids joined by commas:

>>> from privengine import RunStore
>>> report = build(RunStore(), "3f2a")  # doctest: +SKIP
>>> report.write()  # doctest: +SKIP
PosixPath('report-3f2a9c01bd.html')

Modules: :mod:`.build` (what a report holds, read from the store), :mod:`.html` (the document, escaped
text and inlined plotly), :mod:`.command` (the command line that reproduces a run or sweep), :mod:`.ledger` (the
privacy ledger of the data sources the runs read, in every report).
"""

from .build import Report, build, filename, resolve
from .command import Reproduction, run_command, sweep_command

__all__ = ["Report", "Reproduction", "build", "filename", "resolve", "run_command", "sweep_command"]
