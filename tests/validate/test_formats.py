"""Each reader on a sample that follows its documented schema, and on malformed variants (exact messages)."""
from __future__ import annotations

import json
import math

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from inferplan.errors import InputError
from sim.validate.formats import detect, read_measured

# The illustrative files of shared/formats/serving-benchmark-logs.md §1.4 (vLLM V26) and §2.4 (SGLang S25).
VLLM_V26_DOC = {
    "date": "20260105-101530", "endpoint_type": "openai", "backend": "openai", "label": None,
    "model_id": "meta-llama/Llama-3.1-8B-Instruct", "tokenizer_id": "meta-llama/Llama-3.1-8B-Instruct",
    "num_prompts": 3, "request_rate": 2.0, "burstiness": 1.0, "max_concurrency": None,
    "duration": 2.91, "completed": 2, "failed": 1, "total_input_tokens": 812, "total_output_tokens": 7,
    "request_throughput": 0.687, "request_goodput": None, "output_throughput": 2.41, "total_token_throughput": 281.4,
    "input_lens": [500, 312, 77], "output_lens": [4, 3, 0], "ttfts": [0.120, 0.095, 0.0],
    "itls": [[0.021, 0.019, 0.020], [0.022, 0.020], []], "latencies": [0.180, 0.137, 0.0],
    "start_times": [80312.004, 80312.611, 80313.750], "queue_times": [0.0001, 0.0001, 0.0001],
    "generated_texts": [" The sky is", " Yes it", ""], "errors": ["", "", "Traceback (most recent call last): ..."],
    "max_output_tokens_per_s": 7.0, "max_concurrent_requests": 1, "rtfx": 0.0,
    "mean_ttft_ms": 107.5, "median_ttft_ms": 107.5, "std_ttft_ms": 12.5, "p99_ttft_ms": 119.75,
    "mean_tpot_ms": 20.5, "median_tpot_ms": 20.5, "std_tpot_ms": 0.5, "p99_tpot_ms": 20.99,
}
SGLANG_S25_DOC = ('{"backend": "sglang", "dataset_name": "random", "request_rate": Infinity, "max_concurrency": null, '
                  '"sharegpt_output_len": null, "random_input_len": 512, "random_output_len": 4, "random_range_ratio": 0.0, '
                  '"duration": 1.42, "completed": 2, "total_input_tokens": 1024, "total_output_tokens": 8, '
                  '"total_output_tokens_retokenized": 8, "request_throughput": 1.41, "input_throughput": 721.1, '
                  '"output_throughput": 5.63, "mean_ttft_ms": 110.0, "mean_tpot_ms": 20.33, '
                  '"input_lens": [512, 512], "output_lens": [4, 4], "ttfts": [0.100, 0.120], '
                  '"itls": [[0.020, 0.021, 0.020], [0.020, 0.020, 0.021]], "generated_texts": ["abcd", "efgh"], '
                  '"errors": ["", ""]}')
HEADER = "arrival_s,prompt_tokens,output_tokens,ttft_s,e2e_s\n"


def write(tmp_path, name, content):
    p = tmp_path / name
    p.write_text(content if isinstance(content, str) else json.dumps(content))
    return p


def message(path, fmt="auto") -> str:
    with pytest.raises(InputError) as err:
        read_measured(path, fmt)
    return str(err.value)


# -- vLLM ------------------------------------------------------------------------------------------------------
def test_vllm_v26_doc_example_is_read_per_the_definitions(tmp_path):
    m = read_measured(write(tmp_path, "v.json", VLLM_V26_DOC))
    assert (m.format, m.version, m.sent_requests, len(m)) == ("vllm", "V26", 3, 2)
    assert m.skipped == {"failed": 1}
    np.testing.assert_allclose(m.arrival_s, [0.0, 0.607])          # start_times, first send = 0
    np.testing.assert_allclose(m.e2e_s, [0.180, 0.137])            # `latencies`
    np.testing.assert_allclose(m.tpot_s, [(0.180 - 0.120) / 3, (0.137 - 0.095) / 2])  # first token excluded
    assert m.deployment["model_id"] == "meta-llama/Llama-3.1-8B-Instruct"
    assert "recomputed mean_ttft_ms matches the log (107.500)" in m.notes
    assert "recomputed mean_tpot_ms matches the log (20.500)" in m.notes


def test_vllm_v24_first_itl_repeating_ttft_is_dropped(tmp_path):
    v24 = {k: VLLM_V26_DOC[k] for k in ("date", "backend", "model_id", "num_prompts", "request_rate", "duration",
                                         "completed", "input_lens", "output_lens", "ttfts", "errors")}
    v24["itls"] = [[0.120, 0.021, 0.019, 0.020], [0.095, 0.022, 0.020], []]
    m = read_measured(write(tmp_path, "v24.json", v24))
    assert m.version == "V24" and m.arrival_source == "none" and m.arrival_s is None
    np.testing.assert_allclose(m.e2e_s, [0.180, 0.137])
    assert any("V24 completions quirk" in n for n in m.notes)


def test_vllm_shipped_sample(samples):
    m = read_measured(samples / "synthetic_vllm_v26.json")
    assert (m.version, m.sent_requests, len(m), m.skipped) == ("V26", 201, 200, {"failed": 1})
    assert m.deployment["hardware"] == "a100_80gb" and m.deployment["max_num_seqs"] == "256"


def test_vllm_appended_results_pick_the_last_with_lists(tmp_path):
    first = dict(VLLM_V26_DOC, input_lens=[100, 100, 100])
    no_lists = {k: v for k, v in VLLM_V26_DOC.items() if k not in ("input_lens", "output_lens", "ttfts", "itls")}
    p = write(tmp_path, "a.json", json.dumps(first) + "\n" + json.dumps(VLLM_V26_DOC) + "\n" + json.dumps(no_lists) + "\n")
    m = read_measured(p)
    assert list(m.prompt_tokens) == [500, 312]
    assert any("holds 3 results" in n for n in m.notes)
    assert list(read_measured(p, "vllm", 0).prompt_tokens) == [100, 100]
    assert "run: index 5 out of range: the file holds 3 runs" in message_run(p, 5)


def message_run(path, run) -> str:
    with pytest.raises(InputError) as err:
        read_measured(path, "vllm", run)
    return str(err.value)


@pytest.mark.parametrize("change, expected", [
    (lambda d: d.pop("ttfts"), "v.json: ttfts: missing (fix: add the `ttfts` list)"),
    (lambda d: d["input_lens"].__setitem__(1, -5), "v.json: input_lens[1]: is negative: -5 (fix: lengths and times must be >= 0)"),
    (lambda d: d["output_lens"].__setitem__(0, "abc"), "v.json: output_lens[0]: is not a number: 'abc' (fix: give a number)"),
    (lambda d: d["itls"].__setitem__(0, 0.02), "v.json: itls[0]: is not a list (float) (fix: give one list of gaps (s) per request)"),
    (lambda d: d["ttfts"].pop(), "v.json: ttfts: has 2 entries, expected 3 (one per request) (fix: give the lists exactly as the client wrote them)"),
    (lambda d: d.pop("model_id"), "v.json: model_id: missing: not a vLLM benchmark result"),
    (lambda d: [d.pop(k) for k in ("input_lens", "output_lens", "ttfts", "itls", "start_times")],
     "v.json: input_lens: per-request lists missing (V26 writes them only with --save-detailed) (fix: rerun the "
     "benchmark with --save-result --save-detailed)"),
    (lambda d: d.__setitem__("errors", ["x", "y", "z"]), "v.json: requests: no successful request"),
])
def test_vllm_malformed(tmp_path, change, expected):
    d = json.loads(json.dumps(VLLM_V26_DOC))
    change(d)
    assert expected in message(write(tmp_path, "v.json", d), "vllm")


def test_empty_file(tmp_path):
    assert message(write(tmp_path, "v.json", "  \n")).endswith(
        "v.json: file: is empty (fix: give the benchmark result file (vLLM JSON, SGLang JSONL, CSV or Parquet))")


def test_unrecognised_json(tmp_path):
    assert "x.json: file: not a recognised benchmark log" in message(write(tmp_path, "x.json", {"foo": 1}))


def test_invalid_json_line(tmp_path):
    assert "b.json: line 2: is not valid JSON" in message(write(tmp_path, "b.json", '{"a": 1}\n{"b": \n'))


# -- SGLang ----------------------------------------------------------------------------------------------------
def test_sglang_doc_example_with_infinity_rate(tmp_path):
    p = write(tmp_path, "s.jsonl", SGLANG_S25_DOC + "\n")
    assert detect(p) == "sglang"
    m = read_measured(p)
    assert (m.format, m.version, len(m), m.arrival_source) == ("sglang", "S25", 2, "none")
    assert math.isinf(m.client["request_rate"])
    np.testing.assert_allclose(m.e2e_s, [0.161, 0.181])  # ttft + sum(itls)
    np.testing.assert_allclose(m.tpot_s, [0.061 / 3, 0.061 / 3])
    assert "recomputed mean_ttft_ms matches the log (110.000)" in m.notes


def test_sglang_shipped_sample(samples):
    m = read_measured(samples / "synthetic_sglang_s25.jsonl")
    assert (m.version, m.sent_requests, len(m), m.skipped) == ("S25", 201, 200, {"failed": 1})


@pytest.mark.parametrize("change, expected", [
    (lambda d: [d.pop(k) for k in ("input_lens", "output_lens", "ttfts", "itls", "errors", "generated_texts")],
     "s.jsonl: input_lens: per-request lists missing (bench_serving writes them only with --output-details; S24 "
     "never does) (fix: rerun bench_serving with --output-file ... --output-details)"),
    (lambda d: d["output_lens"].__setitem__(1, -1), "s.jsonl: output_lens[1]: is negative: -1"),
    (lambda d: d["ttfts"].__setitem__(0, "fast"), "s.jsonl: ttfts[0]: is not a number: 'fast' (fix: give a number)"),
    (lambda d: d["itls"][1].__setitem__(0, None), "s.jsonl: itls[1][0]: is not a number: None (fix: give a number)"),
    (lambda d: d.pop("ttfts"), "s.jsonl: ttfts: missing (fix: add the `ttfts` list)"),
])
def test_sglang_malformed(tmp_path, change, expected):
    d = json.loads(SGLANG_S25_DOC)
    change(d)
    assert expected in message(write(tmp_path, "s.jsonl", json.dumps(d) + "\n"), "sglang")


def test_sglang_server_info_gives_deployment_hints(tmp_path):
    d = json.loads(SGLANG_S25_DOC)
    d["server_info"] = {"tp_size": 2, "max_running_requests": 128, "chunked_prefill_size": 4096,
                        "model_path": "meta-llama/Llama-3.1-8B-Instruct"}
    m = read_measured(write(tmp_path, "s.jsonl", json.dumps(d) + "\n"))
    assert m.version == "S25+"
    assert m.deployment == {"tp": 2, "max_num_seqs": 128, "chunked_prefill_size": 4096,
                            "model_id": "meta-llama/Llama-3.1-8B-Instruct"}


# -- generic table ---------------------------------------------------------------------------------------------
def test_table_csv_and_parquet_agree(tmp_path, samples):
    csv_run = read_measured(samples / "synthetic_generic.csv")
    assert (csv_run.format, csv_run.version, len(csv_run), csv_run.arrival_source) == ("table", "csv", 200, "log")
    cols = {k: getattr(csv_run, k) for k in ("arrival_s", "prompt_tokens", "output_tokens", "ttft_s", "e2e_s")}
    pq.write_table(pa.table(cols), tmp_path / "t.parquet")
    pq_run = read_measured(tmp_path / "t.parquet")
    assert pq_run.version == "parquet"
    np.testing.assert_array_equal(pq_run.tpot_s, csv_run.tpot_s)


def test_table_own_tpot_is_kept(tmp_path):
    p = write(tmp_path, "t.csv", "arrival_s,prompt_tokens,output_tokens,ttft_s,e2e_s,tpot_s\n0,10,5,0.1,0.5,0.2\n"
                                 "1,10,1,0.1,0.1,\n")
    m = read_measured(p)
    assert m.tpot_s[0] == 0.2 and math.isnan(m.tpot_s[1])


@pytest.mark.parametrize("content, expected", [
    ("a,b\n1,2\n", "t.csv: arrival_s: missing column (fix: columns: arrival_s, prompt_tokens, output_tokens, ttft_s, "
                   "e2e_s (optional tpot_s); see docs/validation.md)"),
    (HEADER, "t.csv: rows: the table has a header but no rows (fix: add one row per successful request)"),
    (HEADER + "0,10,5,0.1,0.5\n1,-3,5,0.1,0.5\n", "t.csv: prompt_tokens (line 3): is negative: '-3' (fix: lengths and times must be >= 0)"),
    (HEADER + "0,10,5,0.1,0.5\n1,3,5,x,0.5\n", "t.csv: ttft_s (line 3): is not a number: 'x' (fix: give a number)"),
    (HEADER + "0,10.5,5,0.1,0.5\n", "t.csv: prompt_tokens (line 2): is not a whole number of tokens: '10.5' (fix: give an integer)"),
    (HEADER + "0,10,5,0.1,0.05\n", "t.csv: e2e_s (line 2): 0.05 s is shorter than ttft_s 0.1 s"),
    (HEADER + "0,10,5,0.1\n", "t.csv: line 2: has 4 cells, the header has 5 (fix: give one cell per column)"),
    ("", "t.csv: file: is empty"),
])
def test_table_malformed(tmp_path, content, expected):
    assert expected in message(write(tmp_path, "t.csv", content))


def test_parquet_null_cell(tmp_path):
    pq.write_table(pa.table({"arrival_s": [0.0, 1.0], "prompt_tokens": [10, None], "output_tokens": [5, 5],
                             "ttft_s": [0.1, 0.1], "e2e_s": [0.5, 0.5]}), tmp_path / "t.parquet")
    assert "t.parquet: prompt_tokens (row 1): is not a number: None (fix: give a number)" in message(tmp_path / "t.parquet")


def test_unknown_format_name(tmp_path):
    assert message(write(tmp_path, "t.csv", HEADER), "nope") == (
        "command line: format: unknown format 'nope' (fix: use one of: auto, vllm, sglang, table)")
