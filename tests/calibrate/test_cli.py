"""`python -m calibrate`: config mistakes are one line with the valid choices and exit 2; a small run works."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from calibrate.__main__ import main
from inferplan.specs import available

REPO = Path(__file__).resolve().parents[2]


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "calibrate", *args], cwd=REPO, capture_output=True, text=True,
                          timeout=120, check=False)


@pytest.mark.parametrize("args, field, choices", [
    (["hardware=nope"], "hardware: unknown hardware 'nope'", available("hardware")),
    (["hardware=cpu_local", "model=nope"], "model: unknown model 'nope'", available("model")),
    ([], "hardware: not given", available("hardware")),
    (["hardware=cpu_local", "colour=red"], "colour: unknown key", ["budget_s", "out_dir", "ops"]),
    (["hardware=cpu_local", "ops=[gemm,conv]"], "ops: unknown op 'conv'", ["gemm", "attn_decode"]),
    (["hardware=cpu_local", "budget_s=soon"], "budget_s: must be float", []),
    (["hardware=cpu_local", "grid=huge", "peaks=datasheet"], "grid: unknown grid 'huge'", ["tiny", "full"]),
])
def test_config_mistakes_are_one_line(args, field, choices, tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main([*args, f"out_dir={tmp_path}"])
    assert exit_info.value.code == 2
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and field in lines[0], captured.err
    assert all(c in lines[0] for c in choices)
    assert not captured.out and not any(tmp_path.iterdir())  # nothing written


def test_the_real_command_exits_2_without_a_traceback(tmp_path):
    res = cli("hardware=nope", f"out_dir={tmp_path}")
    assert res.returncode == 2 and "Traceback" not in res.stderr
    assert res.stderr.startswith("error: conf/hardware: hardware: unknown hardware 'nope' (fix: use one of: ")


def test_small_run_writes_its_files_and_table(tmp_path, capsys):
    out = tmp_path / "cal"
    code = main(["hardware=cpu_local", "grid=tiny", "ops=[elementwise]", "peaks=datasheet", "threads=1",
                 "progress=false", f"out_dir={out}", "hardware.usd_per_hour=0.2"])
    assert code == 0
    printed = capsys.readouterr().out
    assert "calibration of llama3_8b on cpu_local" in printed and "held-out" in printed
    assert {p.name for p in out.iterdir()} == {"measurements.parquet", "fit.json", "cpu_local.parquet",
                                                "hardware.yaml"}
    fit = json.loads((out / "fit.json").read_text())
    assert fit["config"]["hardware"].endswith("hardware.yaml") and fit["config"]["grid"] == "tiny"
    assert "usd_per_hour: 0.2" in (out / "hardware.yaml").read_text()  # the figures actually used


def test_help_lists_choices(capsys):
    assert main(["--help"]) == 0
    text = capsys.readouterr().out
    assert "hardware: a100_80gb" in text and "budget_s" in text


@pytest.mark.parametrize("args, start", [
    (["hardware=cpu_local", "colour=red"], "conf/calibrate.yaml: colour: unknown key (fix: valid keys: hardware, model, "),
    (["hardware=cpu_local", "ops=[gemm"], "conf/calibrate.yaml: hardware=cpu_local ops=[gemm: "),
    (["hardware=cpu_local", "+parallel={tp: 1"], "conf/calibrate.yaml: "),
])
def test_hydra_errors_take_the_simulators_path(args, start):
    """The one translation (inferplan/hydra_errors.py): unknown keys through `unknown_key`, the rest one line."""
    from calibrate.config import compose_config
    from calibrate.settings import CONFIG
    from inferplan.errors import InputError, unknown_key
    from sim.compose import compose_config as sim_compose

    with pytest.raises(InputError) as err:
        compose_config(args)
    message = str(err.value)
    assert message.startswith(start) and "\n" not in message and message.endswith(")"), message
    with pytest.raises(InputError) as sim_err:  # an unknown option reads the same in the simulator
        sim_compose(["scenario=nope"])
    assert str(sim_err.value).startswith("conf/scenario: scenario: unknown scenario 'nope' (fix: use one of: ")
    assert str(unknown_key(CONFIG, "colour", ["hardware"])) == f"{CONFIG}: colour: unknown key (fix: valid keys: hardware)"
