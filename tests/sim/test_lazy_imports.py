"""A run that reads no trace file never imports pandas (about 0.3-0.5 s of every process's start-up)."""
import subprocess
import sys

CODE = """
import sys, tempfile
from sim.api import run_composed
from sim.compose import compose_config
from sim.report import print_summary
with tempfile.TemporaryDirectory() as tmp:
    summary, out = run_composed(compose_config(["scenario=smoke", "scenario.traffic.num_requests=50"]), tmp,
                                lambda f: None)
    print_summary(summary, out)
print("pandas" in sys.modules, "pyarrow.compute" in sys.modules)
"""


def test_smoke_run_imports_no_pandas():
    out = subprocess.run([sys.executable, "-c", CODE], capture_output=True, text=True, check=True)
    assert out.stdout.strip().splitlines()[-1] == "False False"
