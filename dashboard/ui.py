"""Streamlit pieces the pages share: the results-folder picker, cached loaders, run pickers, KPI rows, errors.

Loaders are cached by path *and* file modification times, so a run that is rewritten (or finishes) is read again,
while moving between pages costs nothing.
"""
from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pandas as pd
import streamlit as st

from dashboard import calibration, compare, data, figures
from dashboard.kpis import kpis, relative_delta
from inferplan.errors import InputError
from sim.results.schema import RUN_FILES

ROOT_KEY = "results_root"
# Streamlit ships the Material icon font, so these render everywhere (emoji need the system's emoji font).
VERDICT_MET = " :green[:material/check_circle:]"
VERDICT_MISSED = " :red[:material/cancel:]"


def results_roots() -> list[Path]:
    """The results folders chosen in the sidebar (the defaults before the sidebar has run)."""
    return data.runs_roots(st.session_state.get(ROOT_KEY))


def sidebar() -> None:
    """The results-folder picker, shown on every page."""
    with st.sidebar:
        default = ", ".join(str(p) for p in data.runs_roots())
        st.text_input("Results folders", value=default, key=ROOT_KEY,
                      help="Folders holding run, sweep and plan folders, separated by commas. Default: `runs` and "
                           f"`multirun`, `plans` here, or ${data.RUNS_DIR_ENV}.")
        if st.button("Reload results", help="Look for new runs and re-read changed files"):
            st.cache_data.clear()
        found = list_folders(_roots_key())
        st.caption(f"{sum(f.kind == 'run' for f in found)} runs, {sum(f.kind == 'sweep' for f in found)} sweeps, "
                   f"{sum(f.kind == 'plan' for f in found)} plans found.")


def _roots_key() -> tuple[str, ...]:
    return tuple(str(p) for p in results_roots())


def stamp(path: Path) -> tuple:
    """Modification times of a folder's result files: the cache key that notices rewrites."""
    names = (*RUN_FILES, "sweep.parquet", "plan.json")
    return tuple((p.stat().st_mtime_ns if (p := Path(path) / n).exists() else 0) for n in names)


@st.cache_data(ttl=10, show_spinner=False)
def list_folders(roots: tuple[str, ...]) -> list[data.Folder]:
    return data.discover([Path(r) for r in roots])


@st.cache_data(ttl=10, show_spinner=False)
def find_folders(roots: tuple[str, ...], marker: str) -> list[Path]:
    """`calibration.find_folders`, cached for a few seconds (it walks the results folders)."""
    return calibration.find_folders([Path(r) for r in roots], marker)


@st.cache_data(show_spinner=False, max_entries=64)
def _open_run(path: str, mtimes: tuple) -> data.RunData:
    return data.open_run(Path(path))


def open_run(path: Path) -> data.RunData:
    """`data.open_run`, cached."""
    return _open_run(str(path), stamp(path))


@st.cache_data(show_spinner="Reading and aggregating the run…", max_entries=16)
def _run_frames(path: str, mtimes: tuple) -> figures.RunFrames:
    return figures.run_frames(data.open_run(Path(path)))


def run_frames(path: Path) -> figures.RunFrames:
    """`figures.run_frames`, cached: the expensive read-and-aggregate of a run."""
    return _run_frames(str(path), stamp(path))


def show_error(err: InputError) -> None:
    st.error(data.explain(err), icon=":material/warning:")


def require_root() -> list[data.Folder] | None:
    """The folders under the results folders, or None after explaining why there are none."""
    roots = results_roots()
    try:
        data.require_results_root(roots)
    except InputError as err:
        show_error(err)
        return None
    found = list_folders(_roots_key())
    if not found:
        st.info(f"No runs in {', '.join(f'`{r}`' for r in roots)} yet. Run `python -m sim scenario=smoke` to make "
                "one, or name another results folder in the sidebar.", icon=":material/info:")
        return None
    return found


def folder_label(f: data.Folder) -> str:
    label = data.run_label(f.label, f.partial)
    return label if f.done else f"{label}  (incomplete)"


def pick(label: str, options: list[data.Folder], key: str, help: str | None = None) -> data.Folder | None:
    """A selectbox over result folders, newest first."""
    if not options:
        return None
    return st.selectbox(label, options, format_func=folder_label, key=key, help=help)


def kpi_row(summary: dict, base: dict | None = None) -> None:
    """The headline figures as `st.metric`s, with the SLO target as help; deltas against `base` when given."""
    items = kpis(summary)
    base_items = {k.key: k for k in kpis(base)} if base else {}
    cols = st.columns(4)
    for i, k in enumerate(items):
        delta = None
        if base:
            b = base_items[k.key].value
            rel = relative_delta(k.value, b)
            if rel is not None and k.value is not None:
                delta = f"{(k.value - b) * k.scale:+,.{k.digits}f} {k.unit} ({rel:+.1%})"
        verdict = "" if k.met is None else (VERDICT_MET if k.met else VERDICT_MISSED)
        cols[i % 4].metric(k.label + verdict, k.show(), delta=delta,
                           delta_color="inverse" if k.lower_is_better else "normal",
                           help=f"SLO target {k.show_target()}" if k.target is not None else None)


def verdict_colours(df: pd.DataFrame, column: str):
    """`df` styled so that the verdict `column` reads green (met / yes) or red (missed / no)."""
    colours = {"met": "color: #1a7f37", "yes": "color: #1a7f37", "missed": "color: #cf222e", "no": "color: #cf222e"}
    return df.style.map(lambda v: colours.get(v, ""), subset=[column]) if column in df else df


def report_button(build: Callable[[], str], file_name: str, key: str) -> None:
    """Download the HTML report; it is built only when clicked."""
    st.download_button("Download HTML report", data=build, file_name=file_name, mime="text/html", key=key,
                       icon=":material/download:", on_click="ignore")


@st.cache_data(show_spinner=False, max_entries=16)
def _sweep_frame(path: str, mtimes: tuple):
    return compare.sweep_frame(Path(path))


def sweep_frame(path: Path):
    """`compare.sweep_frame`, cached."""
    return _sweep_frame(str(path), stamp(path))


@st.cache_data(show_spinner=False, max_entries=16)
def _runs_frame(paths: tuple[str, ...], labels: tuple[str, ...], mtimes: tuple):
    return compare.runs_frame([Path(p) for p in paths], list(labels))


def runs_frame(folders: list[data.Folder]):
    """`compare.runs_frame` over chosen run folders, cached."""
    return _runs_frame(tuple(str(f.path) for f in folders), tuple(f.label for f in folders),
                       tuple(stamp(f.path) for f in folders))
