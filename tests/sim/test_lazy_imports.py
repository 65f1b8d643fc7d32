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


TRACE = """
import sys, tempfile
from pathlib import Path
from sim.api import run_composed
from sim.compose import compose_config
with tempfile.TemporaryDirectory() as tmp:
    trace = Path(tmp) / "t.csv"
    trace.write_text("arrival_s,prompt_tokens,output_tokens,request_class\\n" +
                     "".join(f"{i / 10},{100 + i},{20 + i % 7},{'ab'[i % 2]}\\n" for i in range(200)))
    cfg = compose_config(["scenario=smoke", "~scenario.traffic",
                          f"+scenario.traffic={{kind:trace,format:generic,path:'{trace}'}}"])
    summary, out = run_composed(cfg, Path(tmp) / "run", lambda f: None)
print(summary["requests"]["completed"], "pandas" in sys.modules)
"""


def test_a_run_on_a_well_formed_generic_csv_trace_imports_no_pandas():
    out = subprocess.run([sys.executable, "-c", TRACE], capture_output=True, text=True, check=True)
    assert out.stdout.strip().splitlines()[-1] == "200 False"
