"""A test-only mechanism that writes to stdout every way a library can (issue 28: ``--json`` output stays JSON).

During its run it prints, logs to a handler on stdout, writes to file descriptor 1 directly and starts a child
process that inherits it, the ways Ray's driver messages, C libraries and worker processes reach stdout.
Subprocesses get it through ``PRIVENGINE_PLUGINS=tests.chatty_mechanism``.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from dataclasses import dataclass

from privengine import registry
from privengine.claims import PrivacyClaim
from privengine.config import RunConfig, knob


@dataclass(frozen=True)
class ChattyConfig(RunConfig):
    steps: int = knob(2, low=1, high=10, help="Number of steps.")


def run_chatty(config: ChattyConfig, reporter) -> dict:
    logger = logging.getLogger("chatty")
    logger.addHandler(logging.StreamHandler(sys.stdout))
    for step in range(config.steps):
        print(f"chatty print {step}")
        logger.warning("chatty log %d", step)
        os.write(1, f"chatty fd-1 write {step}\n".encode())
        reporter.metric(step, loss=1.0 / (step + 1))
    subprocess.run([sys.executable, "-c", "print('chatty child process')"], check=True)
    claim = PrivacyClaim("chatty", 1.0, 1e-5, "none (test only)", "add/remove one example", headline=True)
    return {"steps_done": config.steps, "privacy": [claim.to_dict()]}


CHATTY = registry.register(registry.Mechanism(
    name="chatty", title="Chatty (tests only)", config_cls=ChattyConfig, run=run_chatty,
    protects="nothing: a test double", description="Writes to stdout.", smoke={"steps": 1}), replace=True)
