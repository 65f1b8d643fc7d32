"""The day plan's command line: `python -m sim.plan scenario=<name> mode=day [key=value ...]`; keys named in
`DayOptions` are options, anything else a Hydra override of the scenario."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass


from inferplan.config.yaml_files import yaml_value
from inferplan.errors import InputError
from sim.config import build


@dataclass(frozen=True)
class DayOptions:
    mode: str = "day"
    window_s: float = 600.0          # the day's windows (600 = the ServeGen curve's own step, or 3600)
    warmup_s: float | None = None    # simulated before each measured span (queues, batches, KV cache); default:
                                     # until 99% of a conversation's turns have come (RequestStats.warmup_s)
    measure_s: float = 60.0          # measured per window (window_s: every request of the day, full scale)
    verify: str = "all"              # windows to simulate: all | none | <first>:<end> (window indices)
    max_rounds: int = 4              # simulations per window at most (each miss adds a unit and re-runs)
    max_requests_per_run: float = 250000   # above: a slice of the fleet (measured ~5.8 KB a request: <= 2 GB)
    drain_s: float = 300.0           # after the last arrival, how long requests may finish (scenario.drain_timeout_s)
    sample_s: float = 7200.0         # traffic sampled for the per-request statistics
    jobs: int | None = None          # windows at once; default: this machine's CPUs, or the Ray cluster's
    ray_address: str | None = None   # run the windows on Ray (`local`, `auto`, `ray://<head>:10001`)
    out_dir: str | None = None       # default: plans/<scenario>/day_<YYYY-mm-dd_HH-MM-SS>

    def __post_init__(self) -> None:
        where = "command line"
        if self.mode != "day":
            raise InputError(where, "mode", f"the day plan got mode={self.mode!r}", "use mode=day")
        for name in ("window_s", "warmup_s", "measure_s", "drain_s", "sample_s"):
            if name == "warmup_s" and self.warmup_s is None:
                continue
            if getattr(self, name) < 0 or (name != "warmup_s" and getattr(self, name) == 0):
                raise InputError(where, name, f"must be > 0, got {getattr(self, name)}", f"e.g. {name}=600")
        if self.measure_s > self.window_s:
            raise InputError(where, "measure_s", f"{self.measure_s:g} s is longer than window_s={self.window_s:g}",
                             "measure at most the whole window")
        if self.max_requests_per_run < 1000:
            raise InputError(where, "max_requests_per_run", f"{self.max_requests_per_run:g} is too few",
                             "use e.g. max_requests_per_run=250000")
        if self.max_rounds < 1 or (self.jobs is not None and self.jobs < 1):
            raise InputError(where, "max_rounds" if self.max_rounds < 1 else "jobs", "must be >= 1", "e.g. jobs=2")
        self.selected(1)

    def selected(self, n_windows: int) -> list[int]:
        """The window indices `verify` names."""
        v = str(self.verify).strip()
        if v == "all":
            return list(range(n_windows))
        if v == "none":
            return []
        a, sep, b = v.partition(":")
        try:
            lo, hi = (int(a), int(b)) if sep else (int(a), int(a) + 1)
        except ValueError:
            raise InputError("command line", "verify", f"unknown value {v!r}",
                             "use all, none, a window index or <first>:<end>") from None
        if not 0 <= lo < hi:
            raise InputError("command line", "verify", f"empty range {v!r}", "e.g. verify=0:3")
        return list(range(lo, min(hi, n_windows)))


NAMES = tuple(f.name for f in dataclasses.fields(DayOptions))
RAW = ("mode", "verify", "ray_address", "out_dir")


def parse_day_args(argv: list[str]) -> tuple[DayOptions, tuple[str, ...]]:
    options, overrides = {}, []
    for arg in argv:
        key, sep, value = arg.partition("=")
        if not sep and not arg.startswith("~"):
            raise InputError("command line", arg, "is not key=value", "e.g. scenario=deepseek_v3_day mode=day")
        if key in RAW:      # (not YAML: `1:3` would read as a base-60 integer)
            options[key] = value.strip() or None
        elif key in NAMES:
            options[key] = yaml_value(value, "command line", key)
        elif key.startswith("search."):
            raise InputError("command line", key, "the day plan searches unit counts itself", "drop search.* keys")
        else:
            overrides.append(arg)
    return build(DayOptions, options, "command line"), tuple(overrides)
