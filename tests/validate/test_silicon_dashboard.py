"""The dashboard's Calibration page shows a silicon matrix folder: its counts, chart and partition table."""
from __future__ import annotations

from pathlib import Path

from streamlit.testing.v1 import AppTest

from sim.validate.silicon.__main__ import main

APP = Path(__file__).resolve().parents[2] / "dashboard" / "streamlit_app.py"
ROW = "qwen_qwen3_32b_qwen_qwen3_32b_h100_sxm_trtllm_agg_1024x128_c8_tp1_epnone_1"


def test_calibration_page_shows_the_matrix(tmp_path, monkeypatch, capsys):
    runs = tmp_path / "runs"
    out = runs / "validate" / "silicon" / "one"
    main([f"ids={ROW}", f"out={out}"])
    capsys.readouterr()
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("INFERPLAN_RUNS_DIR", str(runs))
    at = AppTest.from_file(str(APP), default_timeout=60).run()
    at.switch_page("views/calibration_page.py").run()
    assert not at.exception, [e.value for e in at.exception]
    assert "Validation matrix on measured silicon" in [s.value for s in at.subheader]
    assert any("1 rows simulated, 0 failed, 0 not expressible." in c.value for c in at.caption), \
        [c.value for c in at.caption]
    table = at.dataframe[-1].value
    assert list(table["partition"]) == ["h100_sxm trtllm Qwen3-32B 1024x128", "overall"]
    assert len(at.get("vega_lite_chart")) == 1
