"""`inferplan.process.finish`: an exit that skips the interpreter's teardown but keeps what an exit must do."""
from __future__ import annotations

import subprocess
import sys

PROGRAM = """
import atexit, logging, sys
from inferplan.process import finish
atexit.register(lambda: print("atexit ran"))
logging.basicConfig(stream=sys.stderr)
logging.getLogger("x").warning("logged")
print("buffered", end=" ")
finish(3)
print("never")
"""


def test_finish_runs_atexit_flushes_streams_and_logs_and_exits_with_its_status():
    done = subprocess.run([sys.executable, "-c", PROGRAM], capture_output=True, text=True, timeout=60)
    assert done.returncode == 3
    assert done.stdout == "buffered atexit ran\n"
    assert "logged" in done.stderr
