"""Traffic builders: each parses one traffic block and returns a plan, `plan(streams) -> Workload`.

Parsing validates the whole block before anything is generated; the plan then draws only from its own named
streams. The common keys (`request_class`, `priority`, `classes`, `transforms`, `num_requests`) are handled by
`build.py`; these builders read only their kind's keys:

- `arrival_traffic` (kinds in `arrivals.ARRIVALS`): the process's keys, `lengths`, and the optional prefix keys
  `shared_prefix_tokens`, `shared_prefix_name`, `hash_block_tokens`.
- `sessions_traffic`: see `sessions.py`.
- `servegen_traffic`: a ServeGen pool folder replayed client by client.
- `trace_traffic`: a per-request trace file through `loaders.LOADERS`.
"""
from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable

import numpy as np

from scenarios.arrivals import ARRIVALS
from scenarios.arrivals.client_windows import client_window_arrivals
from scenarios.config_reader import ConfigReader, kind_of
from scenarios.hashing import request_prefix_hashes
from scenarios.length_config import lengths_from_config, token_dist
from scenarios.loaders import LOADERS, load_trace
from scenarios.loaders.servegen import ServeGenLengths, load_servegen_pool
from scenarios.paths import resolve_path
from scenarios.rng import Streams
from scenarios.sessions import SessionSpec, ThinkTime, TurnCount, session_workload
from scenarios.workload import Workload

Plan = Callable[[Streams], Workload]


def _prefix(r: ConfigReader) -> tuple[int, str, int]:
    return (r.integer("shared_prefix_tokens", 0, minimum=0), r.string("shared_prefix_name", "system"),
            r.integer("hash_block_tokens", 512, minimum=1))


def _duration(duration_s: float) -> dict:
    """Metadata for the window length (absent for an open-ended, count-bounded process)."""
    return {"duration_s": float(duration_s)} if np.isfinite(duration_s) else {}


def arrival_traffic(r: ConfigReader, kind: str) -> Plan:
    """Arrivals from `ARRIVALS[kind]`, lengths from `lengths:`, optional shared-prefix hashes."""
    process = ARRIVALS[kind](r)
    if math.isfinite(process.duration_s):
        r.check_request_count("duration_s", process.mean_rate_per_s * process.duration_s)
    lengths = lengths_from_config(r.nested("lengths"))
    prefix_tokens, prefix_name, block = _prefix(r)

    def make(streams: Streams) -> Workload:
        arrival = process.sample(streams("arrivals"))
        prompt, output = lengths.sample(streams, arrival)
        hashes = None
        if prefix_tokens:
            salts = streams("hashes").integers(0, 2**63, arrival.shape[0], dtype=np.int64).view(np.uint64)
            hashes = request_prefix_hashes(prompt, salts, block, prefix_tokens, prefix_name)
        return Workload.from_columns(arrival, prompt, output, prefix_hashes=hashes, hash_block_tokens=block,
                                     source=process.describe, metadata=_duration(process.duration_s))
    return make


def closed_loop_traffic(r: ConfigReader, kind: str) -> Plan:
    """`clients` concurrent clients, each sending its next request when its previous one ends (completed or
    rejected), after `think_time_s` (default 0); `requests` in all; lengths from `lengths:`. The arrival times
    are made by the simulation (`sim/core/cluster.py` releases request i when a client frees and writes its arrival
    time then): the workload holds 0 for every request until released. The run ends when all have ended, or
    `drain_timeout_s` after the last request a client sent (`sim/core/run.py`)."""
    clients = r.integer("clients", minimum=1)
    n = r.request_count("requests")
    think_s = r.number("think_time_s", 0.0, minimum=0.0)
    lengths = lengths_from_config(r.nested("lengths"))

    def make(streams: Streams) -> Workload:
        prompt, output = lengths.sample(streams, np.zeros(n))
        arrival = np.zeros(n)
        wl = Workload.from_columns(arrival, prompt, output,
                                   source=f"closed_loop(clients={clients}, requests={n}, think_time_s={think_s:g})",
                                   metadata={"closed_loop": {"clients": clients, "think_time_s": think_s}})
        return wl
    return make


_TURNS = {
    "fixed": lambda r: TurnCount("fixed", r.integer("count", minimum=1)),
    "geometric": lambda r: TurnCount("geometric", r.number("mean", minimum=1.0), r.integer("max", 100, minimum=1)),
    "uniform": lambda r: TurnCount("uniform", r.integer("low", minimum=1), r.integer("high", minimum=1)),
}
_THINK = {
    "fixed": lambda r: ThinkTime("fixed", r.number("seconds", minimum=0.0)),
    "exponential": lambda r: ThinkTime("exponential", r.number("mean_s", positive=True)),
    "lognormal": lambda r: ThinkTime("lognormal", r.number("median_s", positive=True),
                                     r.number("p99_s", positive=True)),
}


def _choice(r: ConfigReader, registry: dict):
    value = registry[kind_of(r, registry)](r)
    r.finish()
    if (value.kind == "uniform" and value.b < value.a) or (value.kind == "lognormal" and value.b <= value.a):
        raise r.error("(keys)", "the upper value is below the lower one", "raise `high` (or `p99_s` above `median_s`)")
    return value


def sessions_traffic(r: ConfigReader, kind: str) -> Plan:
    """Keys: `session_arrivals` (an arrival block), `turns`, `think_time_s`, `user_tokens`, `output_tokens`,
    optional `first_user_tokens`, `max_context_tokens`, `tpot_estimate_s`, and the prefix keys."""
    sa = r.nested("session_arrivals")
    process = ARRIVALS[kind_of(sa, ARRIVALS)](sa)
    sa.finish()
    first = r.nested("first_user_tokens", None)
    prefix_tokens, prefix_name, block = _prefix(r)
    spec = SessionSpec(
        session_arrivals=process, turns=_choice(r.nested("turns"), _TURNS),
        think_time=_choice(r.nested("think_time_s"), _THINK),
        user_tokens=token_dist(r.nested("user_tokens")), output_tokens=token_dist(r.nested("output_tokens")),
        first_user_tokens=None if first is None else token_dist(first), shared_prefix_tokens=prefix_tokens,
        shared_prefix_name=prefix_name, max_context_tokens=r.integer("max_context_tokens", None, minimum=1),
        tpot_estimate_s=r.number("tpot_estimate_s", 0.0, minimum=0.0), hash_block_tokens=block)
    return lambda streams: session_workload(spec, streams)


def servegen_traffic(r: ConfigReader, kind: str) -> Plan:
    """Keys: `path` (pool folder), optional `clients` (ids) or `top_clients` (k busiest), `start_s` (data time at
    t = 0, default 0), `duration_s` (default: to the end of the data), `rate_scale` (multiplies every client's rate,
    default 1), `lengths` (default: the pool's own length PMFs)."""
    path = resolve_path(r.string("path"), file=r.file, field=r.path("path"))
    clients, top = r.raw("clients", None), r.integer("top_clients", None, minimum=1)
    start, scale = r.number("start_s", 0.0, minimum=0.0), r.number("rate_scale", 1.0, positive=True)
    duration = r.number("duration_s", None, positive=True)
    custom = lengths_from_config(r.nested("lengths")) if r.has("lengths") else None
    pool = load_servegen_pool(path, clients=clients, top_clients=top, with_lengths=custom is None, file=r.file,
                              field=r.path("clients"))
    cw = dataclasses.replace(pool.windows, rate_per_s=pool.windows.rate_per_s * scale)
    end_of_data = float(cw.window_start_s[0]) + cw.span_s
    duration = end_of_data - start if duration is None else duration
    if start + duration > end_of_data + 1e-9 or duration <= 0:
        raise r.error("duration_s", f"start_s + duration_s = {start + duration:g} s is past the data's end "
                      f"({end_of_data:g} s)", "shorten the window")
    lengths = custom or ServeGenLengths(pool, start)

    def make(streams: Streams) -> Workload:
        arrival, client = client_window_arrivals(streams("arrivals"), cw, start, duration)
        if custom is None:
            prompt, output = lengths.sample(streams, arrival, client)  # each request from its own client's PMFs
        else:
            prompt, output = lengths.sample(streams, arrival)
        return Workload.from_columns(arrival, prompt, output, source=f"servegen:{path}",
                                     metadata={"duration_s": duration, "clients": list(cw.client_ids)})
    return make


_TRACE_OPTIONS = {
    "azure": lambda r: {},
    "mooncake": lambda r: {},
    "burstgpt": lambda r: {"models": r.raw("models", None), "log_types": r.raw("log_types", None),
                           "drop_failed": r.boolean("drop_failed", True)},
    "generic": lambda r: {"hash_block_tokens": r.integer("hash_block_tokens", 512, minimum=1)},
}


def trace_traffic(r: ConfigReader, kind: str) -> Plan:
    """Keys: `format` (azure, mooncake, burstgpt, generic), `path`, and the format's options (burstgpt:
    `models`, `log_types`, `drop_failed`; generic: `hash_block_tokens`)."""
    fmt = r.string("format", choices=list(LOADERS))
    path = resolve_path(r.string("path"), file=r.file, field=r.path("path"))
    options = _TRACE_OPTIONS[fmt](r)

    def make(streams: Streams) -> Workload:
        try:
            return load_trace(fmt, path, **options)
        except ValueError as err:  # (a broken Workload guarantee, e.g. a token count beyond int32)
            raise r.error("path", f"{path}: {err}", "fix or drop those rows of the trace") from None
    return make
