"""The benchmark clients that measured the rows, as traffic blocks: which lengths each request asks for.

Both clients are closed loops of the row's concurrency (each client sends its next request when its last one
ended), `rounds` requests per client, warm-ups awaited before the measured run (so it starts from an idle server
with all clients sending at once). They differ in the lengths:

* `inferencex`: InferenceX's `benchmark_serving.py` (the data README): `--random-range-ratio 0.8`, input and
  output lengths each uniform in [int(0.8 L), L], `--ignore-eos`.
* `fixed`: every request exactly ISL tokens in and OSL tokens out: a synthetic-token client with zero spread
  (for example genai-perf / AIPerf with `--synthetic-input-tokens-stddev 0 --output-tokens-stddev 0` and
  `max_tokens` = `min_tokens` = OSL; which client the gap-analysis rows used is not recorded).

Why two. The `silicon_data_source` column says where a row was measured: the InferenceX dumps (dated files,
`db-dump/...`) and AIConfigurator's own gap-analysis collection (`.../aic-auto-gap-analysis/data/<system>/
<engine>/<version>/...`; some of its rows name an `nvcr.io/nvidia/ai-dynamo/*-runtime` image). The data README
describes the InferenceX client only. The gap-analysis rows' client is not recorded; its lengths are inferred from
the rows themselves: on SGLang (prefill first, then every running request decodes in lock-step) a closed loop
whose requests all end on the same step sends its next round as one burst, so every round queues behind the
others' prefills (TTFT ~ half the prefill time of all clients' prompts, the same at every output length, and
TPOT carrying the other half). The measured SGLang Qwen3-32B rows show exactly that; the 0.8 range spreads the
ends of a round by 20% of the output and the simulated rounds fall apart.

`inferred` (the matrix's default) picks per row by what the row's source measured: `fixed` for the sources whose
rows' TPOT shows rounds kept together (`BURST_SOURCES`), `inferencex` for the rest. The evidence is TPOT, not TTFT:
under SGLang's prefill-first scheduler a request of a round kept together carries in its TPOT about half of the
round's prefills (the ones after its own, N/2 x the prefill over the output), a request of rounds spread out every
other stream's prefill once (N - 1). The H100 SGLang Qwen3-32B rows (`.../aic-auto-gap-analysis/data/h100_sxm/
sglang/...`) measure the first at every TP and output length (TP 4, 128 clients, 4096 in: 93.9 / 59.8 / 45.8 ms
at 128 / 256 / 512 out, about 30 ms of decode step plus 68 / 34 / 17 ms; spread out: 168 / 95 / 58 ms). The same
collection's vLLM and TensorRT-LLM rows measure TPOT within a few % of spread rounds at 32-128 clients, so they keep
InferenceX's client (which lengths they drew is not recorded).

`source` picks `fixed` for every gap-analysis row, `inferencex` for the rest: under it the simulated vLLM and
TensorRT-LLM (mixed prefill/decode iterations) hold their rounds together too, which their measured rows say the
real servers do not (docs/validation.md, "The rows' client").
"""
from __future__ import annotations

from sim.validate.silicon.table import SiliconRow

INFERENCEX_RANGE_RATIO = 0.8     # --random-range-ratio
CLIENTS = ("inferencex", "fixed")
CHOICES = ("inferred", *CLIENTS, "source")
GAP_ANALYSIS_MARK = "aic-auto-gap-analysis"
# Sources whose rows' TPOT shows every round kept together (the module's docstring): zero-spread lengths.
BURST_SOURCES = ("aic-auto-gap-analysis/data/h100_sxm/sglang/",)


def client_of(row: SiliconRow, choice: str) -> str:
    """The client that measured `row` under `choice` (a client name; `inferred`: by what its source's rows show;
    `source`: `fixed` for every gap-analysis row)."""
    if choice == "inferred":
        return "fixed" if any(mark in row.source for mark in BURST_SOURCES) else "inferencex"
    if choice != "source":
        return choice
    return "fixed" if GAP_ANALYSIS_MARK in row.source else "inferencex"


def collection_of(source: str) -> str:
    """Where a row was measured, from its `silicon_data_source`: `gap-analysis` (AIConfigurator's own collection),
    `inferencex` (the InferenceX dumps) or `unrecorded`."""
    if not source:
        return "unrecorded"
    return "gap-analysis" if GAP_ANALYSIS_MARK in source else "inferencex"


def traffic(row: SiliconRow, client: str, rounds: int) -> dict:
    """The closed-loop traffic block of `row` as `client` sent it: its clients, rounds x clients requests."""
    low_ratio = {"inferencex": INFERENCEX_RANGE_RATIO, "fixed": 1.0}[client]

    def uniform(length: int) -> dict:
        return {"kind": "uniform", "low_tokens": max(1, int(low_ratio * length)), "high_tokens": length}
    return {"kind": "closed_loop", "clients": row.clients, "requests": rounds * row.clients,
            "lengths": {"kind": "independent", "prompt": uniform(row.isl_tokens), "output": uniform(row.osl_tokens)}}
