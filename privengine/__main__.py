"""``python -m privengine``: the command-line interface (see :mod:`privengine.cli`)."""

import sys

from .cli import main

sys.exit(main(restore_stdout=False))
