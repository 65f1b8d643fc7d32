"""The `lengths:` block of a traffic config, and the per-side token-distribution blocks it contains.

Length kinds (`LENGTHS`):

- `fixed`: `prompt_tokens`, `output_tokens`.
- `lognormal`: `prompt` and `output`, each a lognormal block (`mean_tokens` + `sigma`, `median_tokens` +
  `p99_tokens`, or `median_tokens` + `sigma`; optional `max_tokens`); or the same keys flat with a `prompt_` /
  `output_` prefix (`prompt_median_tokens: 512`, `prompt_sigma: 1.0`, ...).
- `independent`: `prompt` and `output`, each any token-distribution block with its own `kind`.
- `empirical`: `format` (a trace format: azure, mooncake, burstgpt, generic) and `path`: resamples the trace's
  (prompt, output) pairs jointly.
- `servegen`: `path` (a ServeGen pool folder), optional `clients` / `top_clients`, optional `time_offset_s` (the
  data's time of day at simulated t = 0): per-6-hour-window length PMFs, pooled over clients by volume.

Every kind also takes `max_prompt_tokens` and `max_output_tokens` (clip above). Token-distribution kinds
(`TOKEN_DISTS`): `fixed` (`tokens`), `lognormal`, `uniform` (`low_tokens`, `high_tokens`), `pmf` (`values`,
`probs`); see `lengths.py` for their parameters.
"""
from __future__ import annotations

import math

from scenarios import lengths as L
from scenarios.config_reader import ConfigReader, kind_of
from scenarios.loaders import LOADERS, load_trace
from scenarios.loaders.servegen import ServeGenLengths, load_servegen_pool
from scenarios.paths import resolve_path


LOGNORMAL_KEYS = ("mean_tokens", "median_tokens", "p99_tokens", "sigma", "max_tokens")


def _lognormal(r: ConfigReader) -> L.LogNormal:
    """One of three pairs: `mean_tokens` + `sigma`, `median_tokens` + `p99_tokens`, `median_tokens` + `sigma`."""
    mean, median = r.number("mean_tokens", None, positive=True), r.number("median_tokens", None, positive=True)
    p99, sigma = r.number("p99_tokens", None, positive=True), r.number("sigma", None, positive=True)
    max_tokens = r.integer("max_tokens", None, minimum=1)
    given = {k for k, v in (("mean", mean), ("median", median), ("p99", p99), ("sigma", sigma)) if v is not None}
    if given == {"mean", "sigma"}:
        return L.LogNormal.from_mean(mean, sigma, max_tokens)
    if given == {"median", "sigma"}:
        return L.LogNormal(math.log(median), sigma, max_tokens)
    if given == {"median", "p99"}:
        if p99 <= median:
            raise r.error("p99_tokens", f"({p99:g}) must exceed median_tokens ({median:g})", "raise p99_tokens")
        return L.LogNormal.from_median_p99(median, p99, max_tokens)
    raise r.error("(keys)", "a lognormal needs exactly one pair: mean_tokens + sigma, median_tokens + p99_tokens, "
                  "or median_tokens + sigma", "give one of the three pairs")


def _fixed(r: ConfigReader) -> L.Fixed:
    return L.Fixed(r.integer("tokens", minimum=1))


def _uniform(r: ConfigReader) -> L.Uniform:
    low, high = r.integer("low_tokens", minimum=1), r.integer("high_tokens", minimum=1)
    if high < low:
        raise r.error("high_tokens", f"({high}) is below low_tokens ({low})", "swap them")
    return L.Uniform(low, high)


def _pmf(r: ConfigReader) -> L.Pmf:
    values = r.number_list("values", minimum=1.0)
    probs = r.number_list("probs", minimum=0.0)
    if len(values) != len(probs) or sum(probs) <= 0:
        raise r.error("probs", "needs one probability >= 0 per value and a positive sum", "fix the lists")
    return L.Pmf.from_probs(values, probs, r.integer("max_tokens", None, minimum=1))


TOKEN_DISTS = {"fixed": _fixed, "lognormal": _lognormal, "uniform": _uniform, "pmf": _pmf}


def token_dist(r: ConfigReader, default_kind: str | None = None):
    """Parse a per-side block (`user_tokens`, `prompt`, ...) into a token distribution."""
    dist = TOKEN_DISTS[kind_of(r, TOKEN_DISTS, default_kind)](r)
    r.finish()
    return dist


def _fixed_lengths(r: ConfigReader):
    return L.Independent(L.Fixed(r.integer("prompt_tokens", minimum=1)), L.Fixed(r.integer("output_tokens", minimum=1)))


def _lognormal_lengths(r: ConfigReader):
    """Nested `prompt: {...}` / `output: {...}` blocks, or the flat form `prompt_median_tokens: 512`,
    `output_sigma: 0.8`, ... (a side's keys prefixed with `prompt_` / `output_`)."""
    sides = []
    for side in ("prompt", "output"):
        flat = {k: r.raw(f"{side}_{k}", None) for k in LOGNORMAL_KEYS}
        flat = {k: v for k, v in flat.items() if v is not None}
        if flat and r.has(side):
            raise r.error(side, f"is given both as a `{side}:` block and as `{side}_*` keys", "keep one form")
        block = r.nested(side) if not flat else ConfigReader(flat, file=r.file, where=f"{r.where}.{side}_*")
        sides.append(token_dist(block, "lognormal"))
    return L.Independent(*sides)


def _independent(r: ConfigReader):
    return L.Independent(token_dist(r.nested("prompt")), token_dist(r.nested("output")))


def _empirical(r: ConfigReader):
    fmt = r.string("format", choices=list(LOADERS))
    path = resolve_path(r.string("path"), file=r.file, field=r.path("path"))
    wl = load_trace(fmt, path)
    return L.Empirical(wl.prompt_tokens, wl.output_tokens, source=str(path))


def _servegen(r: ConfigReader):
    path = resolve_path(r.string("path"), file=r.file, field=r.path("path"))
    pool = load_servegen_pool(path, clients=r.raw("clients", None),
                              top_clients=r.integer("top_clients", None, minimum=1), file=r.file,
                              field=r.path("clients"))
    return ServeGenLengths(pool, r.number("time_offset_s", 0.0))


LENGTHS = {"fixed": _fixed_lengths, "lognormal": _lognormal_lengths, "independent": _independent,
           "empirical": _empirical, "servegen": _servegen}


def lengths_from_config(r: ConfigReader):
    """Parse a `lengths:` block into a length sampler (`sample(streams, arrival_s) -> (prompt, output)`)."""
    kind = kind_of(r, LENGTHS)
    max_prompt, max_output = r.integer("max_prompt_tokens", None, minimum=1), r.integer("max_output_tokens", None,
                                                                                         minimum=1)
    sampler = LENGTHS[kind](r)
    r.finish()
    if max_prompt is None and max_output is None:
        return sampler
    return L.Clipped(sampler, max_prompt, max_output)
