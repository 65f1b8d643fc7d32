"""Trace loaders: the heads of the real traces, the shipped samples, and malformed files with exact messages."""
from __future__ import annotations

import json
import time

import numpy as np
import pytest

from inferplan.errors import InputError
from scenarios.loaders import (load_azure, load_burstgpt, load_generic, load_mooncake, load_servegen_pool,
                               save_workload)
from scenarios.loaders.servegen import ServeGenLengths
from scenarios.paths import DATA_ROOT
from scenarios.rng import Streams
from scenarios.workload import Workload

AZURE_HEADER = "TIMESTAMP,ContextTokens,GeneratedTokens\n"
BURST_HEADER = "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n"
DATA_TRACES = DATA_ROOT / "traces"


# -- real traces (the shipped copies, and full external ones) and samples ----------------------------------------
def _trace(request, where: str, relative: str):
    """The shipped copy (`data`, gzipped) or the full external one (`shared`, skipped when absent) of a trace."""
    if where == "data":
        return DATA_TRACES / f"{relative}.gz"
    return request.getfixturevalue("real_trace")(relative)


@pytest.mark.parametrize("where", ["data", pytest.param("shared", marks=pytest.mark.shared_trace)])
@pytest.mark.parametrize("name,rows,span_s,mean_in,mean_out", [
    ("AzureLLMInferenceTrace_code.csv", 8819, 3435.95, 2048, 28),
    ("AzureLLMInferenceTrace_conv.csv", 19366, 3501.72, 1155, 211),
])
def test_azure_real(request, where, name, rows, span_s, mean_in, mean_out):
    path = _trace(request, where, f"azure-llm-2023/{name}")
    start = time.perf_counter()
    wl = load_azure(path)
    assert time.perf_counter() - start < 1.0
    assert len(wl) == rows and wl.arrival_s[0] == 0.0
    assert wl.arrival_s[-1] == pytest.approx(span_s, abs=0.01)  # README: 18:15:46.68 → 19:14:08.40 for conv
    assert wl.prompt_tokens.mean() == pytest.approx(mean_in, rel=0.001)
    assert wl.output_tokens.mean() == pytest.approx(mean_out, rel=0.01)


def test_azure_sample_matches_real_head(samples):
    sample = load_azure(samples / "azure_conv_head200.csv")
    assert len(sample) == 200
    assert sample.arrival_s[1] == pytest.approx(4.3145790)  # 18:15:50.9951690 − 18:15:46.6805900
    assert sample.prompt_tokens[:2].tolist() == [374, 396] and sample.output_tokens[:2].tolist() == [44, 109]


@pytest.mark.parametrize("where,name,rows,mean_in", [
    ("data", "conversation_trace.jsonl", 12031, 12035),
    pytest.param("shared", "conversation_trace.jsonl", 12031, 12035, marks=pytest.mark.shared_trace),
    pytest.param("shared", "synthetic_trace.jsonl", 3993, 15325, marks=pytest.mark.shared_trace)])
def test_mooncake_real(request, where, name, rows, mean_in):
    path = _trace(request, where, f"mooncake/{name}")
    start = time.perf_counter()
    wl = load_mooncake(path)
    assert time.perf_counter() - start < 1.0
    assert len(wl) == rows and wl.hash_block_tokens == 512
    assert wl.prompt_tokens.mean() == pytest.approx(mean_in, rel=0.001)
    ids = np.concatenate(wl.prefix_hashes)
    lengths = np.array([len(h) for h in wl.prefix_hashes])
    assert np.array_equal(lengths, -(-wl.prompt_tokens // 512))  # one id per (possibly partial) 512-token block
    if name.startswith("conversation"):
        assert 1 - np.unique(ids).size / ids.size == pytest.approx(0.37, abs=0.01)  # README block reuse


def test_mooncake_sample(samples):
    wl = load_mooncake(samples / "mooncake_conversation_head200.jsonl")
    assert len(wl) == 200 and wl.prompt_tokens[0] == 6758 and wl.prefix_hashes[0].tolist() == list(range(14))
    assert wl.request(1).prefix_hashes[:2] == (0, 14)
    assert len(load_mooncake(samples / "mooncake_synthetic_head200.jsonl")) == 200


def _shared(*values):
    return pytest.param("shared", *values, marks=pytest.mark.shared_trace)


@pytest.mark.parametrize("where,pool,clients,mean_rate", [("data", "reason/deepseek-r1", 73, 16.0),
                                                          _shared("reason/deepseek-r1", 73, 16.0),
                                                          _shared("multimodal/mm-image", 35, 9.5),
                                                          _shared("language/m-large", 162, 195.8),
                                                          _shared("language/m-mid", 109, 1790),
                                                          _shared("language/m-small", 43, 1174)])
def test_servegen_real(request, where, pool, clients, mean_rate):
    folder = DATA_TRACES / "servegen" / pool if where == "data" else request.getfixturevalue("real_trace")(
        f"servegen/{pool}")
    p = load_servegen_pool(folder, with_lengths=False)
    assert len(p.windows.client_ids) == clients and p.windows.window_s == 600.0
    assert p.windows.window_start_s.size in (144, 2016)  # 1 day (reason, multimodal) or 14 days (language)
    assert p.aggregate_rate()[1].mean() == pytest.approx(mean_rate, rel=0.01)  # README aggregate mean


@pytest.mark.shared_trace
def test_servegen_real_language_pool_and_its_one_dataset(real_trace):
    folder = real_trace("servegen/language/m-large")
    p = load_servegen_pool(folder, clients=[61], top_clients=None)
    assert p.windows.rate_per_s.shape == (1, 2016)
    assert p.length_window_start_s.size == 56  # 14 days of 6-hour windows
    with pytest.raises(InputError, match=r"chunk-0-dataset\.json: file: is missing"):
        load_servegen_pool(folder, clients=[0])


def test_servegen_samples_and_lengths(samples):
    p = load_servegen_pool(samples / "servegen_deepseek_r1")
    assert p.windows.client_ids == ("41", "46") and p.windows.rate_per_s.shape == (2, 144)
    lengths = ServeGenLengths(p)
    t = np.linspace(0, 86_399, 5000)
    prompt, output = lengths.sample(Streams(0), t)
    assert prompt.min() >= 1 and output.min() >= 1
    assert np.array_equal(lengths.sample(Streams(0), t)[0], prompt)
    mm = load_servegen_pool(samples / "servegen_mm_image")
    assert len(mm.prompt_pmfs[0][0]) >= 2  # multimodal: text + image (+ audio/video) tokens summed
    top = load_servegen_pool(samples / "servegen_deepseek_r1", top_clients=1, with_lengths=False)
    assert top.windows.client_ids == ("41",)  # the busier one (6,384 vs 2,421 requests a day)


# -- generic format ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("suffix", [".csv", ".parquet"])
def test_generic_round_trip(tmp_path, suffix):
    wl = Workload.from_columns([0.0, 1.5, 1.5], [10, 20, 30], [1, 2, 3], request_class=[0, 1, 0],
                               class_names=("chat", "batch"), priority=[2, 0, 2], session_id=[7, -1, 7],
                               prefix_hashes=[np.array([5, 6]), np.array([], dtype=np.int64), np.array([5, 6, 9])])
    back = load_generic(save_workload(wl, tmp_path / f"w{suffix}"))
    for col in ("arrival_s", "prompt_tokens", "output_tokens", "priority", "session_id"):
        assert np.array_equal(getattr(back, col), getattr(wl, col)), col
    assert [back.class_names[i] for i in back.request_class] == ["chat", "batch", "chat"]
    assert [h.tolist() for h in back.prefix_hashes] == [[5, 6], [], [5, 6, 9]]


def test_generic_sorts_rows(write):
    wl = load_generic(write("g.csv", "arrival_s,prompt_tokens,output_tokens\n2.0,5,5\n1.0,6,6\n"))
    assert wl.arrival_s.tolist() == [1.0, 2.0] and wl.prompt_tokens.tolist() == [6, 5]


GENERIC_ROWS = ("arrival_s,prompt_tokens,output_tokens,request_class,priority,session_id,prefix_hashes\n"
                "0.30000000000000004,12,3, chat,1,7,5 6\n1e-3,7.0,1,,0,-1,\n2.5,0,4,code ,-2,7,5 6 9\n"
                "2.5,9,0,default,0,3,1\n")


@pytest.mark.parametrize("suffix", [".csv", ".parquet"])
def test_generic_typed_and_text_paths_read_a_well_formed_file_the_same(tmp_path, suffix):
    """pyarrow's typed read (no pandas) is the path of a well-formed file; it gives what the text path gives."""
    from scenarios.loaders import generic

    path = tmp_path / "g.csv"
    path.write_text(GENERIC_ROWS)
    table = None
    if suffix == ".parquet":
        import pandas as pd
        import pyarrow as pa
        import pyarrow.parquet as pq
        df = pd.read_csv(path, dtype={"request_class": str, "prefix_hashes": str}, keep_default_na=False)
        pq.write_table(pa.Table.from_pandas(df, preserve_index=False), path := tmp_path / "g.parquet")
        table = generic._parquet(path)
    typed, text = generic._typed_columns(path, table), generic._text_columns(path, table)
    assert typed is not None and typed.keys() == text.keys()
    for name, value in text.items():
        if name == "request_class":
            assert typed[name][0].tolist() == value[0].tolist() and typed[name][1] == value[1] == ("chat", "default", "code")
        elif name == "prefix_hashes":
            assert typed[name] == value
        else:
            assert typed[name].dtype == value.dtype and np.array_equal(typed[name], value), name
    wl = load_generic(path)
    assert wl.prompt_tokens.tolist() == [7, 12, 1, 9] and wl.output_tokens.tolist() == [1, 3, 4, 1]


@pytest.mark.parametrize("rows", ["1,,5\n", "1,5.5,5\n", "-1,5,5\n", "1,5\n", "1,5,5,9\n"])
def test_generic_typed_path_leaves_what_is_not_plainly_well_formed_to_the_text_path(tmp_path, rows):
    """Padding, empty or bad cells, ragged rows: the typed read steps aside, and the text path accepts the file as
    pandas does or names the line and fix."""
    from scenarios.loaders import generic

    path = tmp_path / "g.csv"
    path.write_text("arrival_s,prompt_tokens,output_tokens\n0,1,1\n" + rows)
    assert generic._typed_columns(path, None) is None


# -- BurstGPT (synthetic files of the documented schema) -----------------------------------------------------
def test_burstgpt(write):
    p = write("b.csv", BURST_HEADER + "5,ChatGPT,100,20,120,Conversation log\n6,GPT-4,50,0,50,API log\n"
              "9.5,GPT-4,70,30,100,API log\n")
    wl = load_burstgpt(p)
    assert wl.arrival_s.tolist() == [0.0, 4.5] and wl.metadata["failed_rows"] == 1
    assert load_burstgpt(p, drop_failed=False).output_tokens.tolist() == [20, 1, 30]
    assert len(load_burstgpt(p, models=["GPT-4"])) == 1
    with pytest.raises(InputError, match=r"no request is left .* \(fix: models present: ChatGPT, GPT-4\)"):
        load_burstgpt(p, models=["Claude"])


# -- malformed files: exact messages -------------------------------------------------------------------------
def test_missing_column(write):
    p = write("a.csv", "TIMESTAMP,ContextTokens\n2023-11-16 18:17:03.98,5\n")
    with pytest.raises(InputError) as err:
        load_azure(p)
    assert str(err.value) == (f"{p}: header: missing column 'GeneratedTokens' (found: TIMESTAMP, ContextTokens) "
                              "(fix: the header must contain TIMESTAMP,ContextTokens,GeneratedTokens)")


def test_negative_length(write):
    p = write("a.csv", AZURE_HEADER + "2023-11-16 18:17:03.98,5,3\n2023-11-16 18:17:04.00,-5,3\n")
    with pytest.raises(InputError) as err:
        load_azure(p)
    assert str(err.value) == (f"{p}: line 3, column ContextTokens: -5 is negative "
                              "(fix: ContextTokens must be >= 0; fix or drop the row)")


def test_non_numeric_length(write):
    p = write("a.csv", AZURE_HEADER + "2023-11-16 18:17:03.98,5,three\n")
    with pytest.raises(InputError) as err:
        load_azure(p)
    assert str(err.value) == (f"{p}: line 2, column GeneratedTokens: 'three' is not a number "
                              "(fix: write a number in GeneratedTokens)")


def test_bad_timestamp_and_unsorted(write):
    p = write("a.csv", AZURE_HEADER + "yesterday,5,3\n")
    with pytest.raises(InputError, match=r"line 2, column TIMESTAMP: 'yesterday' is not a date-time"):
        load_azure(p)
    p = write("b.csv", AZURE_HEADER + "2023-11-16 18:17:05,5,3\n2023-11-16 18:17:04,5,3\n")
    with pytest.raises(InputError) as err:
        load_azure(p)
    assert str(err.value) == (f"{p}: line 3, column TIMESTAMP: goes back in time (2023-11-16 18:17:04 after "
                              "2023-11-16 18:17:05) (fix: sort the rows by TIMESTAMP)")


def test_equal_timestamps_are_fine(write):
    p = write("a.csv", AZURE_HEADER + "2023-11-16 18:17:05,5,3\n2023-11-16 18:17:05,6,3\n")
    assert load_azure(p).arrival_s.tolist() == [0.0, 0.0]


@pytest.mark.parametrize("text,problem", [("", "file: is empty"), (AZURE_HEADER, "file: has a header but no requests")])
def test_empty_csv(write, text, problem):
    p = write("a.csv", text)
    with pytest.raises(InputError, match=f"^{p}: {problem} "):
        load_azure(p)


def test_zero_lengths_are_raised_and_counted(write):
    wl = load_azure(write("a.csv", AZURE_HEADER + "2023-11-16 18:17:05,0,3\n"))
    assert wl.prompt_tokens.tolist() == [1] and wl.metadata["raised_zero_lengths"] == 1


def _jsonl(rows):
    return "".join(json.dumps(r) + "\n" for r in rows)


GOOD = {"timestamp": 0, "input_length": 600, "output_length": 5, "hash_ids": [1, 2]}


@pytest.mark.parametrize("bad,message", [
    ({**GOOD, "input_length": -3}, "line 2, field input_length: -3 is negative (fix: input_length must be >= 0)"),
    ({**GOOD, "output_length": "5"}, "line 2, field output_length: '5' is not a number"),
    ({k: v for k, v in GOOD.items() if k != "hash_ids"}, "line 2, field hash_ids: is missing"),
    ({**GOOD, "hash_ids": [1, "x"]}, "line 2, field hash_ids: is not a list of integers"),
    ({**GOOD, "input_length": 10.5}, "line 2, field input_length: 10.5 is not a whole number of tokens"),
])
def test_mooncake_malformed(write, bad, message):
    p = write("m.jsonl", _jsonl([GOOD, bad]))
    with pytest.raises(InputError) as err:
        load_mooncake(p)
    assert str(err.value).startswith(f"{p}: {message}")


def test_mooncake_unsorted_bad_json_and_empty(write):
    p = write("m.jsonl", _jsonl([{**GOOD, "timestamp": 5}, GOOD]))
    with pytest.raises(InputError, match=r"line 2, column timestamp: goes back in time \(0 after 5\)"):
        load_mooncake(p)
    p = write("n.jsonl", _jsonl([GOOD]) + "{not json\n")
    with pytest.raises(InputError, match=r"line 2, field \(line\): is not valid JSON"):
        load_mooncake(p)
    p = write("e.jsonl", "\n")
    with pytest.raises(InputError, match=r"file: is empty"):
        load_mooncake(p)


def _servegen(write, trace_lines, dataset=None, cid="1"):
    p = write(f"pool/chunk-{cid}-trace.csv", "".join(line + "\n" for line in trace_lines))
    if dataset is not None:
        write(f"pool/chunk-{cid}-dataset.json", json.dumps(dataset))
    return p.parent


def test_servegen_malformed_traces(write):
    folder = _servegen(write, ["0,1.0,1.0,Gamma,1.0,1.0", "600,1.0,1.0,Poisson,1.0,1.0"])
    with pytest.raises(InputError, match=r"chunk-1-trace\.csv: line 2, column pattern: unknown pattern 'Poisson'"):
        load_servegen_pool(folder, with_lengths=False)
    folder = _servegen(write, ["0,1.0,1.0,Gamma,1.0,1.0", "0,1.0,1.0,Gamma,1.0,1.0"], cid="2")
    with pytest.raises(InputError, match=r"chunk-2-trace\.csv: line 2, column window_start_s: repeats"):
        load_servegen_pool(folder, clients=["2"], with_lengths=False)
    folder = _servegen(write, ["0,-1.0,1.0,Gamma,1.0,1.0"], cid="3")
    with pytest.raises(InputError, match=r"line 1, column rate_req_per_s: -1.0 is negative"):
        load_servegen_pool(folder, clients=["3"], with_lengths=False)
    folder = _servegen(write, ["0,1.0,1.0,Weibull,0.001,1.0"], cid="4")
    with pytest.raises(InputError, match=r"line 1, column p1: Weibull shape 0.001 is below 0.02"):
        load_servegen_pool(folder, clients=["4"], with_lengths=False)
    with pytest.raises(InputError, match=r"client '9' is not in .* \(fix: choose from: 1, 2, 3, 4\)"):
        load_servegen_pool(folder, clients=[9], with_lengths=False)


def test_servegen_dataset_is_parsed_without_eval(write, tmp_path):
    marker = tmp_path / "pwned"
    evil = {"0": {"input_tokens": f"__import__('pathlib').Path('{marker}').touch()", "output_tokens": "{5: 1.0}"}}
    folder = _servegen(write, ["0,1.0,1.0,Gamma,1.0,1.0"], evil)
    with pytest.raises(InputError, match=r"window 0, field input_tokens: is not a Python dict literal"):
        load_servegen_pool(folder)
    assert not marker.exists()


def test_servegen_dataset_fills_empty_windows_from_nearest(write):
    data = {"0": {"input_tokens": "{100: 1.0}", "output_tokens": "{7: 1.0}"},
            "21600": {"input_tokens": "{}", "output_tokens": "{}"}}
    folder = _servegen(write, ["0,1.0,1.0,Gamma,1.0,1.0"], data)
    pool = load_servegen_pool(folder)
    prompt, output = ServeGenLengths(pool).sample(Streams(0), np.array([10.0, 30_000.0]))
    assert prompt.tolist() == [100, 100] and output.tolist() == [7, 7]


def test_token_count_beyond_int32_is_a_one_line_input_error(tmp_path):
    """Token counts are stored as int32 (scenarios/workload.py): a larger one is refused, not wrapped, and a trace
    holding one names the trace's path field and the fix."""
    with pytest.raises(ValueError, match="prompt_tokens above 2,147,483,647 tokens"):
        Workload.from_columns([0.0], [3_000_000_000], [5])
    from scenarios.config_reader import ConfigReader
    from scenarios.generators import trace_traffic
    path = tmp_path / "big.csv"
    path.write_text("arrival_s,prompt_tokens,output_tokens\n0,3000000000,5\n")
    plan = trace_traffic(ConfigReader({"format": "generic", "path": str(path)}, file="t.yaml", where="traffic"),
                         "trace")
    with pytest.raises(InputError, match=r"traffic\.path: .*big\.csv: prompt_tokens above 2,147,483,647 tokens "
                                         r"\(fix: fix or drop those rows of the trace\)"):
        plan(Streams(0))
