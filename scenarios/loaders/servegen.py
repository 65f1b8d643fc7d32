"""ServeGen data folders (alibaba/ServeGen `data/<category>/<pool>/`): per-client window statistics and lengths.

- `chunk-<id>-trace.csv`, no header, one 600-s window per line: `window_start_s, rate_req_per_s, cv, pattern,
  p1, p2`; `pattern` is `Gamma` or `Weibull` with shape `p1` (the scale `p2` is recomputed from the rate), or empty
  with rate 0 for an inactive window. All clients of a folder share one window grid.
- `chunk-<id>-dataset.json` (optional): `{window_start_s: {field: "<python dict literal {value: probability}>"}}`
  per 6-hour window; fields the loader does not read (e.g. `reason_ratio`) are ignored. The strings are parsed with `ast.literal_eval`, never `eval`. Prompt tokens are
  `input_tokens` (language, reasoning pools), or the sum of independent draws of `text_tokens`, `image_tokens`,
  `audio_tokens` and `video_tokens` (multimodal pools); output tokens are `output_tokens`.

Either file may be gzipped (`chunk-<id>-trace.csv.gz`, `chunk-<id>-dataset.json.gz`): the shipped DeepSeek-R1
pool (`data:traces/servegen/reason/deepseek-r1`) is that form, with the unread fields dropped
(`scenarios/data/make_data.py`). A folder holding both forms of one client reads the plain file.

`ServeGenLengths` samples lengths per request from its client's distribution in the 6-hour window of its arrival
(or, when requests carry no client, from the pool's mixture weighted by each client's request volume).
"""
from __future__ import annotations

import ast
import gzip
import json
import zlib
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv

from inferplan.errors import InputError
from scenarios.arrivals.client_windows import GAMMA, NONE, WEIBULL, ClientWindows
from scenarios.lengths import Pmf
from scenarios.loaders.checks import numeric
from scenarios.rng import Streams

if TYPE_CHECKING:  # (pandas is imported where a trace is read: a run without one never loads it)
    import pandas as pd

TRACE_COLUMNS = ("window_start_s", "rate_req_per_s", "cv", "pattern", "p1", "p2")
PATTERN_CODES = {"": NONE, "Gamma": GAMMA, "Weibull": WEIBULL}
MIN_WEIBULL_SHAPE = 0.02
MULTIMODAL_PROMPT_FIELDS = ("text_tokens", "image_tokens", "audio_tokens", "video_tokens")
_TRACE_NAME = re.compile(r"chunk-(.+)-trace\.csv(?:\.gz)?$")


@dataclass(frozen=True)
class ServeGenPool:
    """One pool: `windows` (arrival statistics) and, if loaded, per-client length PMFs per 6-h window."""

    folder: Path
    windows: ClientWindows
    length_window_start_s: np.ndarray | None = None  # [L]
    length_window_s: float = 21_600.0
    prompt_pmfs: tuple[tuple[tuple[Pmf, ...], ...], ...] | None = None  # [C][L][prompt field]
    output_pmfs: tuple[tuple[Pmf, ...], ...] | None = None  # [C][L]

    def aggregate_rate(self) -> tuple[np.ndarray, np.ndarray]:
        return self.windows.aggregate_rate()


def list_clients(folder: Path) -> list[str]:
    """Client ids with a trace file, numerically sorted where they are numbers."""
    ids = {m.group(1) for p in folder.glob("chunk-*-trace.csv*") if (m := _TRACE_NAME.search(p.name))}
    return sorted(ids, key=lambda s: (0, int(s), s) if s.isdigit() else (1, 0, s))


def client_file(folder: Path, client: str, kind: str) -> Path:
    """`chunk-<client>-<kind>` in `folder`: the plain file if present, else its `.gz` (the plain name if neither)."""
    plain = folder / f"chunk-{client}-{kind}"
    packed = plain.with_name(plain.name + ".gz")
    return packed if not plain.exists() and packed.exists() else plain


def _read_typed(path: Path) -> pd.DataFrame | None:
    """Fast path: pyarrow with typed columns; None when the file does not parse (the text path then says why)."""
    types = {c: pa.float64() for c in TRACE_COLUMNS} | {"pattern": pa.string()}
    try:
        table = pacsv.read_csv(path, read_options=pacsv.ReadOptions(column_names=list(TRACE_COLUMNS)),
                               convert_options=pacsv.ConvertOptions(column_types=types, strings_can_be_null=False,
                                                                    quoted_strings_can_be_null=False))
    except (pa.ArrowInvalid, pa.ArrowTypeError, OSError):
        return None
    df = table.to_pandas()
    return None if df.isna().to_numpy().any() else df


def _read_trace(path: Path) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(window_start_s, rate, pattern code, shape) of one client file, validated."""
    import pandas as pd
    df = _read_typed(path)
    try:
        if df is None:
            df = pd.read_csv(path, header=None, names=list(TRACE_COLUMNS), dtype=str, keep_default_na=False)
    except pd.errors.EmptyDataError:
        raise InputError(path, "file", "is empty", "each line needs window_start_s,rate,cv,pattern,p1,p2") from None
    except pd.errors.ParserError as err:
        raise InputError(path, "file", f"is not a 6-column CSV ({str(err).splitlines()[0]})",
                         "each line needs window_start_s,rate,cv,pattern,p1,p2") from None
    except (OSError, EOFError, zlib.error, UnicodeDecodeError) as err:
        raise InputError(path, "file", f"cannot be read ({err})", "restore the file from ServeGen's data/") from None
    start = numeric(path, df["window_start_s"], "window_start_s", first_line=1)
    rate = numeric(path, df["rate_req_per_s"], "rate_req_per_s", first_line=1)
    numeric(path, df["cv"], "cv", first_line=1)
    shape = numeric(path, df["p1"], "p1", first_line=1)
    numeric(path, df["p2"], "p2", first_line=1)
    labels = df["pattern"].astype(str).str.strip()
    unknown = ~labels.isin(list(PATTERN_CODES))
    if unknown.any():
        i = int(np.argmax(unknown.to_numpy()))
        raise InputError(path, f"line {i + 1}, column pattern", f"unknown pattern {labels.iloc[i]!r}",
                         "use Gamma, Weibull, or leave it empty with rate 0")
    code = labels.map(PATTERN_CODES).to_numpy(dtype=np.int8)
    broken = ((rate > 0) & (code == NONE)) | ((code != NONE) & (shape <= 0))
    if broken.any():
        i = int(np.argmax(broken))
        raise InputError(path, f"line {i + 1}", "has a positive rate without an IAT law, or a law with shape p1 <= 0",
                         "give pattern Gamma/Weibull with p1 > 0, or rate 0 and an empty pattern")
    steep = (code == WEIBULL) & (shape < MIN_WEIBULL_SHAPE)
    if steep.any():  # Γ(1 + 2/c) overflows below ~0.006; ServeGen's own fits stay above 0.15
        i = int(np.argmax(steep))
        raise InputError(path, f"line {i + 1}, column p1", f"Weibull shape {shape[i]:g} is below {MIN_WEIBULL_SHAPE}",
                         f"use a shape >= {MIN_WEIBULL_SHAPE} or a Gamma law")
    return start, rate, code, shape


def _check_grid(path: Path, start: np.ndarray, grid: np.ndarray | None) -> None:
    d = np.diff(start)
    if d.size and (d <= 0).any():
        i = int(np.argmax(d <= 0)) + 1
        raise InputError(path, f"line {i + 1}, column window_start_s",
                         f"{'repeats' if d[i - 1] == 0 else 'goes back in time'} ({start[i]:g} after {start[i - 1]:g})",
                         "list windows once each, in time order")
    if d.size and not np.allclose(d, d[0]):
        i = int(np.argmax(~np.isclose(d, d[0]))) + 1
        raise InputError(path, f"line {i + 1}, column window_start_s", f"window spacing changes to {d[i - 1]:g} s",
                         f"space windows evenly ({d[0]:g} s)")
    if grid is not None and (grid.shape != start.shape or not np.allclose(grid, start)):
        raise InputError(path, "window_start_s", f"has {start.size} windows from {start[0]:g} s, unlike the "
                         f"folder's other clients ({grid.size} from {grid[0]:g} s)", "use one window grid per folder")


def _pmf(path: Path, where: str, text: object) -> Pmf | None:
    """The PMF a dict-literal string holds; None for an empty dict (no requests in that window)."""
    if not isinstance(text, str):
        raise InputError(path, where, f"expected a string holding a dict literal, got {type(text).__name__}",
                         "write \"{value: probability, ...}\"")
    try:
        table = ast.literal_eval(text)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        raise InputError(path, where, "is not a Python dict literal", "write \"{value: probability, ...}\"") from None
    if table == {}:
        return None
    ok = isinstance(table, dict) and all(
        isinstance(k, (int, float)) and isinstance(v, (int, float)) and not isinstance(v, bool) and v >= 0 and k >= 0
        for k, v in table.items())
    if not ok or sum(table.values()) <= 0:
        raise InputError(path, where, "must map token counts >= 0 to probabilities >= 0 with a positive sum",
                         "write e.g. \"{128: 0.5, 256: 0.5}\"")
    return Pmf.from_probs(list(table.keys()), list(table.values()))


def _read_dataset(path: Path) -> tuple[np.ndarray, list[tuple[tuple[Pmf, ...], Pmf] | None]]:
    """Window starts [L] and, per window, (prompt-field PMFs, output PMF), or None where the window is absent."""
    try:
        raw = path.read_bytes()
        data = json.loads((gzip.decompress(raw) if path.suffix == ".gz" else raw).decode("utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError, OSError, EOFError, zlib.error) as err:
        raise InputError(path, "file", f"is not valid JSON ({err})", "restore the file from ServeGen's data/") from None
    if not isinstance(data, dict) or not data:
        raise InputError(path, "file", "has no windows", "expected {window_start_s: {field: \"{...}\"}}")
    try:
        starts = np.array([float(k) for k in data])
    except ValueError:
        raise InputError(path, "keys", "window keys must be numbers of seconds",
                         "use keys like \"0\", \"21600\"") from None
    windows = []
    for key, fields in data.items():
        if not isinstance(fields, dict) or not fields.get("output_tokens"):
            windows.append(None)
            continue
        names = ("input_tokens",) if "input_tokens" in fields else tuple(
            f for f in MULTIMODAL_PROMPT_FIELDS if fields.get(f))
        if not names:
            raise InputError(path, f"window {key}", "has no input_tokens (nor text/image/audio/video_tokens)",
                             "add an input_tokens distribution")
        prompt = tuple(_pmf(path, f"window {key}, field {n}", fields[n]) for n in names)
        output = _pmf(path, f"window {key}, field output_tokens", fields["output_tokens"])
        windows.append(None if output is None or None in prompt else (prompt, output))
    order = np.argsort(starts)
    return starts[order], [windows[i] for i in order]


def load_servegen_pool(folder: str | Path, *, clients: Sequence | None = None, top_clients: int | None = None,
                       with_lengths: bool = True, file: str = "traffic", field: str = "clients") -> ServeGenPool:
    """Load a pool folder; `clients` selects ids, `top_clients` keeps the k with most requests.

    `with_lengths` also loads every selected client's `dataset.json` (an `InputError` names a missing one).
    """
    folder = Path(folder)
    available = list_clients(folder)
    if not available:
        raise InputError(folder, "folder", "has no chunk-<id>-trace.csv(.gz) files",
                         "point path at a ServeGen pool folder")
    chosen = available if clients is None else [str(c) for c in clients]
    missing = [c for c in chosen if c not in available]
    if missing or not chosen:
        shown = ", ".join(available[:20]) + (" ..." if len(available) > 20 else "")
        raise InputError(file, field, f"client {missing[0] if missing else '(none)'!r} is not in {folder}",
                         f"choose from: {shown}")
    grid, rates, codes, shapes = None, [], [], []
    for c in chosen:
        path = client_file(folder, c, "trace.csv")
        start, rate, code, shape = _read_trace(path)
        _check_grid(path, start, grid)
        grid = start if grid is None else grid
        rates.append(rate), codes.append(code), shapes.append(shape)
    rate_cw = np.array(rates)
    if top_clients is not None:
        keep = np.sort(np.argsort(-rate_cw.sum(axis=1), kind="stable")[:top_clients])
        chosen = [chosen[i] for i in keep]
        rate_cw, codes, shapes = rate_cw[keep], [codes[i] for i in keep], [shapes[i] for i in keep]
    window_s = float(grid[1] - grid[0]) if grid.size > 1 else 600.0
    cw = ClientWindows(tuple(chosen), grid, window_s, rate_cw, np.array(codes), np.array(shapes))
    if not with_lengths:
        return ServeGenPool(folder, cw)
    return _with_lengths(folder, cw)


def _with_lengths(folder: Path, cw: ClientWindows) -> ServeGenPool:
    starts, prompt_pmfs, output_pmfs = None, [], []
    for c in cw.client_ids:
        path = client_file(folder, c, "dataset.json")
        if not path.exists():
            raise InputError(path, "file", "is missing (this client has no length distributions)",
                             "choose clients that have a dataset.json, or give `lengths:` explicitly")
        s, windows = _read_dataset(path)
        if starts is None:
            starts = s
        elif s.shape != starts.shape or not np.allclose(s, starts):
            raise InputError(path, "keys", "has a different 6-hour window grid from the first client",
                             "use one window grid per folder")
        have = [i for i, w in enumerate(windows) if w is not None]
        if not have:
            raise InputError(path, "file", "has no window with output_tokens", "restore the file from ServeGen")
        # A window without data borrows the nearest window that has it.
        filled = [windows[min(have, key=lambda j: abs(j - i))] for i in range(len(windows))]
        prompt_pmfs.append(tuple(w[0] for w in filled))
        output_pmfs.append(tuple(w[1] for w in filled))
    step = float(starts[1] - starts[0]) if starts.size > 1 else 21_600.0
    return ServeGenPool(folder, cw, starts, step, tuple(prompt_pmfs), tuple(output_pmfs))


@dataclass(frozen=True)
class ServeGenLengths:
    """Length sampler from a pool's PMFs; `time_offset_s` is the data time at simulated t = 0."""

    pool: ServeGenPool
    time_offset_s: float = 0.0

    def _length_window(self, arrival_s: np.ndarray) -> np.ndarray:
        starts = self.pool.length_window_start_s
        t = arrival_s + self.time_offset_s - starts[0]
        return (np.mod(t, starts.size * self.pool.length_window_s) // self.pool.length_window_s).astype(np.int64)

    def _volume(self) -> np.ndarray:
        """Expected requests per (client, length window), [C, L], for choosing a client per request."""
        cw, starts = self.pool.windows, self.pool.length_window_start_s
        lw = np.clip(((cw.window_start_s - starts[0]) // self.pool.length_window_s).astype(np.int64) % starts.size,
                     0, starts.size - 1)
        vol = np.zeros((cw.rate_per_s.shape[0], starts.size))
        np.add.at(vol.T, lw, cw.rate_per_s.T * cw.window_s)
        return vol

    def sample(self, streams: Streams, arrival_s: np.ndarray,
               client: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """(prompt, output) per arrival; `client [N]` indexes `pool.windows.client_ids` when known."""
        n, n_lw = arrival_s.shape[0], self.pool.length_window_start_s.size
        w = self._length_window(arrival_s)
        if client is None:  # draw each request's client by request volume in its 6-h window
            vol, client, rc = self._volume(), np.zeros(n, dtype=np.int64), streams("lengths.client")
            for li in range(n_lw):
                rows = np.nonzero(w == li)[0]
                p = vol[:, li] if vol[:, li].sum() > 0 else np.ones(vol.shape[0])
                client[rows] = rc.choice(vol.shape[0], size=rows.size, p=p / p.sum())
        prompt, output = np.zeros(n, dtype=np.int64), np.zeros(n, dtype=np.int64)
        rp, ro = streams("lengths.prompt"), streams("lengths.output")
        group = np.asarray(client, dtype=np.int64) * n_lw + w
        order = np.argsort(group, kind="stable")
        keys, first = np.unique(group[order], return_index=True)
        for g, rows in zip(keys.tolist(), np.split(order, first[1:])):
            c, li = divmod(g, n_lw)
            prompt[rows] = sum(p.sample(rp, rows.size) for p in self.pool.prompt_pmfs[c][li])
            output[rows] = self.pool.output_pmfs[c][li].sample(ro, rows.size)
        return np.maximum(prompt, 1), np.maximum(output, 1)
