"""The capacity-planning review in a browser: a Streamlit app over simulation result folders, and its HTML record.

`streamlit run dashboard` opens four pages (Run, Compare, Calibration, What-if) over `runs/` or any folder named in
the sidebar or in `INFERPLAN_RUNS_DIR`; `python -m dashboard.report <folder>` writes the same review as one
self-contained HTML file. The dashboard reads only the files of `docs/results.md` and imports `sim` only to run a
what-if; nothing imports the dashboard.

Read first:
- `data.py`: finds run, sweep and plan folders and reads them; every problem becomes a one-line explanation.
- `charts.py`: the Altair charts, fed with data already aggregated by `aggregate.py`.
- `streamlit_app.py`: the entry point; the pages live in `views/`.
"""
