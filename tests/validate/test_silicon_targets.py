"""`python -m sim.validate.silicon.targets` on a few shipped rows: the four steps, the fits it scores the held-out
matrix with (the same as `fit` run by hand on each base), the targets' figures recomputed from its own rows, and
bad input in one line."""
from __future__ import annotations

import json

import pytest

from sim.validate.silicon import fit
from sim.validate.silicon.metrics import grouped, partition, summarize
from sim.validate.silicon.runner import read_records
from sim.validate.silicon.targets import TARGETS, frontend_path, main

# Two models per engine (each is scored with the other's fit), the quickest rows of each.
IDS = ["qwen_qwen3_32b_qwen_qwen3_32b_h100_sxm_vllm_agg_1024x128_c16_tp4_epnone_5",
       "2026_04_06_minimax_m2_5_h100_sxm_vllm_fp8_agg_1024x1024_c8_tp4_ep4_1344",
       "qwen_qwen3_32b_qwen_qwen3_32b_h100_sxm_trtllm_agg_2048x128_c8_tp2_epnone_46",
       "2026_04_06_gpt_oss_120b_h200_sxm_trtllm_fp4_agg_1024x1024_c4_tp4_ep4_987",
       "qwen_qwen3_32b_qwen_qwen3_32b_h100_sxm_sglang_agg_1024x128_c16_tp8_epnone_3",
       "2026_03_25_glm_5_h200_sxm_sglang_fp8_agg_1024x1024_c8_tp8_0_ep1_0_510"]


@pytest.fixture(scope="module")
def scored(tmp_path_factory):
    out = tmp_path_factory.mktemp("targets")
    main([f"ids={','.join(IDS)}", f"out={out}"])
    return out


def test_each_engine_is_fitted_on_the_base_its_delay_path_needs_and_scored_without_its_own_model(scored, tmp_path):
    doc = json.loads((scored / "fit.json").read_text())
    assert set(doc["engines"]) == {"vllm", "trtllm", "sglang"}
    for engine, base in doc["bases"].items():
        at_entry = frontend_path(engine) == "entry"
        assert base == ("in_sample, refined" if at_entry else "no_frontend")
        # The same fit by hand (`python -m sim.validate.silicon.fit base=<that step>/rows.csv [refine=true]`).
        step = "in_sample" if at_entry else "no_frontend"
        by_hand = tmp_path / f"{engine}.json"
        fit.main([f"base={scored / step / 'rows.csv'}", f"engines={engine}", f"out={by_hand}",
                  *(["refine=true"] if at_entry else [])])
        hand = json.loads(by_hand.read_text())["engines"][engine]
        assert doc["engines"][engine]["presets"] == hand["presets"]
        assert doc["engines"][engine]["decode_off"] == hand["decode_off"] == fit.decode_off(
            read_records(scored / step / "rows.csv")).get(engine, 0)
        # One fit per serving preset; every model held out once, by the preset that served it.
        held = [m for p in hand["presets"].values() for m in p["held_out_each"]]
        assert sorted(held) == sorted(hand["models"]) and len(hand["models"]) == 2
    assert frontend_path("sglang") == "entry" and frontend_path("vllm") == "first_token"


def test_the_targets_are_the_held_out_matrix_figures(scored):
    doc = json.loads((scored / "targets.json").read_text())
    for step in ("in_sample", "held_out"):
        recs = [r for r in read_records(scored / step / "rows.csv") if r["status"] == "simulated"]
        overall = summarize(recs)
        over = [p for p, s in grouped(recs, partition).items() if s["ttft"]["median_abs_pct"] > 30.0]
        s = doc[step]
        assert s["simulated"] == len(recs) == len(IDS) and s["simulated_pct"] == 100.0
        assert s["ttft_median_abs_pct"] == round(overall["ttft"]["median_abs_pct"], 2)
        assert s["tpot_median_abs_pct"] == round(overall["tpot"]["median_abs_pct"], 2)
        assert s["partitions_over_30"] == sorted(over) and s["partitions_ttft_over_30"] == len(over)
        # what each of those partitions' rows show (misses.py), in the same order
        assert [m["partition"] for m in doc["misses"][step]] == sorted(over)
        # Per engine and model: two models per engine here, one row each.
        by_model = grouped(recs, lambda r: f"{r['engine']} {r['model']}")
        assert list(s["by_model"]) == list(by_model) and len(by_model) == 6
        for key, fig in s["by_model"].items():
            assert fig["rows"] == 1 and fig["ttft_median_abs_pct"] == round(
                by_model[key]["ttft"]["median_abs_pct"], 1)
        # By collection: the three Qwen3-32B rows are AIConfigurator's gap-analysis ones, the others InferenceX's.
        gap = [r for r in recs if r["model"] == "Qwen3-32B"]
        assert {k: v["rows"] for k, v in s["by_collection"].items()} == {"gap-analysis": 3, "inferencex": 3}
        assert s["by_collection"]["gap-analysis"]["ttft_median_abs_pct"] == round(
            summarize(gap)["ttft"]["median_abs_pct"], 1)
    # The held-out matrix ran with other coefficients than the presets': its TTFTs differ from in-sample ones.
    ins = {r["id"]: r["sim_ttft_p50_s"] for r in read_records(scored / "in_sample" / "rows.csv")}
    held = {r["id"]: r["sim_ttft_p50_s"] for r in read_records(scored / "held_out" / "rows.csv")}
    assert sum(ins[i] != held[i] for i in IDS) >= len(IDS) - 1
    fits = json.loads((scored / "fit.json").read_text())
    assert doc["decode_off"] == {e: f["decode_off"] for e, f in fits["engines"].items()}
    for verdict, (figure, bound, sense) in zip(doc["targets"], TARGETS):
        value = doc["held_out"][figure]
        assert verdict["figure"] == figure and verdict["value"] == value
        assert verdict["met"] == (value <= bound if sense == "<=" else value >= bound)


@pytest.mark.parametrize("argv, message", [
    (["jobs=0"], "command line: jobs: must be a whole number >= 1, got '0'"),
    (["rounds=3"], "command line: rounds=3: unknown argument"),
    (["ids=nope"], "command line: ids: no H100/H200 row 'nope' in the table"),
])
def test_bad_input_is_one_line_and_exit_2(argv, message, capsys, tmp_path):
    with pytest.raises(SystemExit) as exc:
        main([*argv, f"out={tmp_path}"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_a_figure_just_beyond_its_target_is_not_met():
    """The figures are judged to two decimals: a held-out TTFT of 15.04% is beyond the 15% target (it used to be
    rounded to 15.0 first and read as met)."""
    from sim.validate.silicon.targets import verdicts
    held = {"ttft_median_abs_pct": 15.04, "tpot_median_abs_pct": 8.0, "partitions_ttft_over_30": 0,
            "simulated_pct": 79.99}
    met = {v["figure"]: v["met"] for v in verdicts(held)}
    assert met == {"ttft_median_abs_pct": False, "tpot_median_abs_pct": True, "partitions_ttft_over_30": True,
                   "simulated_pct": False}
