"""Ending a program that holds a large simulation without the interpreter's teardown.

At a normal exit CPython frees every module and every object still referenced, one at a time: after a
40,000-request run that is 0.3-0.4 s of a 4 s process (bench/vidur_workload.py), spent after the results are
written. `finish()` does what matters of an exit (atexit handlers, logging handlers, the standard streams flushed)
and ends the process with `os._exit`, which frees the memory all at once. Only for a program's last step, and only
in a process that started no threads or child processes (a launcher's pool is shut down by the interpreter's own
exit, which this skips): nothing may run after it.
"""
from __future__ import annotations

import atexit
import logging
import os
import sys
from typing import NoReturn


def finish(code: int = 0) -> NoReturn:
    """Exit with status `code` now: atexit handlers run, logs and standard streams are flushed, no teardown."""
    atexit._run_exitfuncs()
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # (a closed pipe or stream: nothing more can be written to it anyway)
            pass
    os._exit(code)
