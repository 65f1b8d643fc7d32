"""`python -m calibrate.aic.moe_splits [profile.parquet ...]`: how a routed-expert block split by tensor parallelism
compares with the same block split by expert parallelism over the same number of GPUs, where a profile measured both.

For every measured MoE shape (format, routing distribution, hidden, intermediate, top-k, experts, tokens) with both
a TP g / EP 1 and a TP 1 / EP g row, the ratio latency(TP g) / latency(EP g); printed as its quantiles by g and by
token range over the shipped AIConfigurator profiles (`calibrate/profiles/aic/*/*.parquet`) or the files named.
This is the measurement behind pricing a TP split the tables lack as the EP split they have
(`sim.core.cost.layers.LayerPricer.moe_tp_as_ep`, docs/cost-model.md "A TP split the MoE tables lack").
"""
from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd

PROFILES = Path(__file__).resolve().parent.parent / "profiles" / "aic"
SHAPE = ["dtype", "variant", "hidden", "inter", "topk", "experts", "tokens"]
TOKEN_BINS = [0, 16, 256, 4096, float("inf")]


def tp_over_ep(paths: list[Path]) -> pd.DataFrame:
    """One line per (profile, shape, g >= 2) measured both ways: `g`, `tokens`, `ratio` = TP g / EP g latency."""
    out = []
    for path in paths:
        d = pd.read_parquet(path, columns=["family", *SHAPE, "tp", "ep", "latency_s"])
        d = d[d.family == "moe"].drop(columns="family")
        tp = d[d.ep == 1].rename(columns={"tp": "g"}).drop(columns="ep")
        ep = d[d.tp == 1].rename(columns={"ep": "g"}).drop(columns="tp")
        both = tp.merge(ep, on=[*SHAPE, "g"], suffixes=("_tp", "_ep"))
        both = both[both.g > 1]
        out.append(pd.DataFrame({"profile": str(path.relative_to(path.parents[1])), "g": both.g.astype(int),
                                 "tokens": both.tokens, "ratio": both.latency_s_tp / both.latency_s_ep}))
    return pd.concat(out, ignore_index=True) if out else pd.DataFrame(columns=["profile", "g", "tokens", "ratio"])


def summary(ratios: pd.DataFrame) -> pd.DataFrame:
    """Quantiles (10%, median, 90%) and counts of the ratio by g and token range."""
    r = ratios.assign(tokens=pd.cut(ratios.tokens, TOKEN_BINS))
    q = r.groupby(["g", "tokens"], observed=True).ratio
    return pd.DataFrame({"shapes": q.size(), "p10": q.quantile(0.1), "median": q.median(), "p90": q.quantile(0.9)})


def main(argv: list[str]) -> int:
    paths = [Path(a) for a in argv] or sorted(PROFILES.glob("*/*.parquet"))
    ratios = tp_over_ep(paths)
    with pd.option_context("display.width", 200, "display.max_rows", 200):
        print(f"MoE block latency, TP g over EP g, {len(ratios)} shapes measured both ways in {len(paths)} profiles")
        print(summary(ratios).round(2).to_string())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
