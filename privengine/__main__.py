"""``python -m privengine``: the command-line interface (see :mod:`privengine.cli`).

A reader that closes stdout early (``python -m privengine runs | head -1``) ends the command quietly: the
BrokenPipeError is caught here, stdout is pointed at the null device (Python flushes it once more at exit) and the
status is 141 = 128 + SIGPIPE, what a shell reports for a process a closed pipe ended.
"""

import os
import sys

from .cli import main

EXIT_BROKEN_PIPE = 128 + 13  # 13: SIGPIPE

try:
    status = main(restore_stdout=False)
    sys.stdout.flush()  # a reader that has gone raises here, not in the interpreter's exit
except BrokenPipeError:
    os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    status = EXIT_BROKEN_PIPE
sys.exit(status)
