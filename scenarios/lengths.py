"""Prompt and output lengths in tokens: per-side distributions and joint samplers.

A *token distribution* draws one side (`TokenDistribution.sample(rng, n) -> int64 [n]`, every value ≥ 1):

- `fixed`: `tokens`.
- `lognormal`: `mean_tokens` and `sigma` (σ of the underlying normal; μ = ln(mean) − σ²/2, so the mean of the
  continuous law is `mean_tokens`), or `median_tokens` and `p99_tokens` (μ = ln(median),
  σ = ln(p99 / median) / 2.3263, the standard-normal 99th percentile), or `median_tokens` and `sigma`
  (μ = ln(median)). Draws are rounded to the nearest integer.
- `uniform`: integers from `low_tokens` to `high_tokens` inclusive.
- `pmf`: `values` with probabilities `probs` (normalised if they do not sum to 1).

All accept `max_tokens` (clip above). A *length sampler* draws both sides for a set of arrivals
(`sample(streams, arrival_s) -> (prompt [N], output [N])`); see `length_config.py` for its config kinds.
Prompt and output draw from their own streams (`lengths.prompt`, `lengths.output`) so changing one side's law
never changes the other side's draws; joint samplers draw from `lengths`.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from scenarios.rng import Streams

Z99 = 2.3263478740408408  # standard-normal 99th percentile


def _tokens(x: np.ndarray, max_tokens: int | None) -> np.ndarray:
    t = np.maximum(np.rint(x), 1).astype(np.int64)
    return t if max_tokens is None else np.minimum(t, max_tokens)


@dataclass(frozen=True)
class Fixed:
    tokens: int

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        return np.full(n, self.tokens, dtype=np.int64)

    def mean(self) -> float:
        return float(self.tokens)


@dataclass(frozen=True)
class LogNormal:
    """ln(tokens) ~ Normal(mu, sigma) before rounding and clipping."""

    mu: float
    sigma: float
    max_tokens: int | None = None

    @classmethod
    def from_mean(cls, mean_tokens: float, sigma: float, max_tokens: int | None = None) -> "LogNormal":
        return cls(math.log(mean_tokens) - 0.5 * sigma * sigma, sigma, max_tokens)

    @classmethod
    def from_median_p99(cls, median_tokens: float, p99_tokens: float, max_tokens: int | None = None) -> "LogNormal":
        return cls(math.log(median_tokens), math.log(p99_tokens / median_tokens) / Z99, max_tokens)

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        return _tokens(rng.lognormal(self.mu, self.sigma, n), self.max_tokens)

    def mean(self) -> float:
        return math.exp(self.mu + 0.5 * self.sigma ** 2)


@dataclass(frozen=True)
class Uniform:
    low_tokens: int
    high_tokens: int

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        return rng.integers(self.low_tokens, self.high_tokens + 1, n, dtype=np.int64)

    def mean(self) -> float:
        return 0.5 * (self.low_tokens + self.high_tokens)


@dataclass(frozen=True)
class Pmf:
    """A discrete law: `values [K]` (tokens) with cumulative probabilities `cdf [K]` (last = 1)."""

    values: np.ndarray
    cdf: np.ndarray
    max_tokens: int | None = None

    @classmethod
    def from_probs(cls, values, probs, max_tokens: int | None = None) -> "Pmf":
        probs = np.asarray(probs, dtype=np.float64)
        cdf = np.cumsum(probs) / probs.sum()
        return cls(np.asarray(values, dtype=np.float64), cdf, max_tokens)

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        i = np.minimum(np.searchsorted(self.cdf, rng.random(n), side="right"), len(self.cdf) - 1)
        return _tokens(self.values[i], self.max_tokens)

    def mean(self) -> float:
        return float(np.dot(self.values, np.diff(np.concatenate([[0.0], self.cdf]))))


@dataclass(frozen=True)
class Independent:
    """Prompt and output drawn independently, each from its own stream."""

    prompt: object  # a token distribution
    output: object

    def sample(self, streams: Streams, arrival_s: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        n = arrival_s.shape[0]
        return self.prompt.sample(streams("lengths.prompt"), n), self.output.sample(streams("lengths.output"), n)


@dataclass(frozen=True)
class Empirical:
    """Resamples (prompt, output) pairs of a trace jointly, with replacement, so their correlation survives."""

    prompt_tokens: np.ndarray  # [K] int64
    output_tokens: np.ndarray  # [K] int64
    source: str = ""

    def sample(self, streams: Streams, arrival_s: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        i = streams("lengths").integers(0, self.prompt_tokens.shape[0], arrival_s.shape[0])
        return self.prompt_tokens[i], self.output_tokens[i]


@dataclass(frozen=True)
class Clipped:
    """Another sampler with prompt and output clipped to maxima (tokens; None = no limit)."""

    inner: object
    max_prompt_tokens: int | None
    max_output_tokens: int | None

    def sample(self, streams: Streams, arrival_s: np.ndarray, **kw) -> tuple[np.ndarray, np.ndarray]:
        prompt, output = self.inner.sample(streams, arrival_s, **kw)
        if self.max_prompt_tokens is not None:
            prompt = np.minimum(prompt, self.max_prompt_tokens)
        if self.max_output_tokens is not None:
            output = np.minimum(output, self.max_output_tokens)
        return prompt, output
