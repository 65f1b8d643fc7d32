"""Calibration page: measured against fitted op times, the roofline with achieved points, per-op errors, the
profile's efficiency curves and provenance, and a validation run's figures when there is one."""
from pathlib import Path

import pandas as pd
import streamlit as st

from dashboard import calibration as cal, charts, ui
from dashboard.data import explain
from inferplan.errors import InputError

st.title("Calibration")
left, right = st.columns(2)
folders = ui.find_folders((*cal.CALIBRATION_DIRS, *map(str, ui.results_roots())), "measurements.parquet")
folder = right.selectbox("Calibration run (measurements)", folders, key="cal_folder", index=0 if folders else None,
                         format_func=str, placeholder="none found",
                         help="A folder with measurements.parquet and fit.json, searched under calibration/, "
                              "calibrate/ and the results folders.")
profiles_dir = right.text_input("Profiles folder", value=str(cal.PROFILES_DIR), key="cal_profiles_dir")
profiles = cal.list_profiles(Path(profiles_dir), folder)
profile_path = left.selectbox("Profile", profiles, format_func=str, key="cal_profile",
                              placeholder="no profiles found", index=0 if profiles else None,
                              help="The profiles folder's files, then the profile the calibration run wrote.")

if profile_path is None and folder is None:
    st.info(f"No profile in `{profiles_dir}` and no calibration run (a folder with `measurements.parquet`) under "
            "`calibration/`, `calibrate/` or the results folders. Run `python -m calibrate hardware=<name> "
            "model=<name>` to make one.")

profile = measurements = fit = None
try:
    if profile_path is not None:
        profile = cal.load_profile(profile_path)
    if folder is not None:
        measurements = cal.load_measurements(folder)
        fit = cal.load_optional_json(folder / "fit.json")
except InputError as err:
    ui.show_error(err)
    st.stop()

if measurements is not None:
    rows = measurements.rows
    for note in measurements.notes:
        st.warning(f"`{measurements.path}`: {note}; charts that need it are left out.", icon=":material/warning:")
    curve_rows = cal.on_profile(rows)
    if len(curve_rows) < len(rows):
        st.caption(f"Charts show the {len(curve_rows)} points on the profile's curves; the error table covers all "
                   f"{len(rows)}, library baselines included.")
    st.subheader("Measured against fitted")
    fitted = curve_rows.dropna(subset=["predicted_s"]) if "predicted_s" in curve_rows else curve_rows
    if {"measured_s", "predicted_s"}.issubset(rows.columns) and len(fitted):
        st.altair_chart(charts.measured_vs_predicted(fitted))
    elif {"measured_s", "predicted_s"}.issubset(rows.columns):
        st.info("No point has a fitted time yet (`predicted_s` is empty until the fit runs).")
    else:
        st.info("Needs `measured_s` and `predicted_s` columns.")
    st.subheader("Roofline")
    points = cal.roofline_points(curve_rows)
    peaks, bandwidth = cal.peaks_of(profile.provenance if profile else None, fit)
    if points.empty:
        st.info("Needs `flops`, `bytes` and `measured_s` columns.")
    else:
        lines = cal.roofline_lines(peaks, bandwidth, points["intensity"].min(), points["intensity"].max())
        if lines.empty:
            st.caption("No peaks in the profile's provenance or fit.json: achieved points only, without roofs.")
        st.altair_chart(charts.roofline(points, lines))
    st.subheader("Error per op")
    errors = cal.error_table(rows)
    if errors.empty:
        st.info("Needs `op`, `measured_s` and `predicted_s` columns.")
    else:
        st.dataframe(errors, hide_index=True, column_config={
            c: st.column_config.NumberColumn(c, format="%.1f") for c in errors.columns if "(%)" in c})
    if fit:
        with st.expander("fit.json"):
            st.json(fit)

if profile is not None:
    st.subheader(f"Profile {profile.path.name}")
    for note in profile.notes:
        st.warning(f"`{profile.path}`: {note}.", icon=":material/warning:")
    if {"op", "dtype", "roofline_s", "efficiency"}.issubset(profile.rows.columns) and len(profile.rows):
        st.markdown(
            "**What this shows.** Each curve is one op and format of the profile: the fitted *efficiency*, the "
            "fraction of the datasheet roofline a kernel reaches, against the op's roofline time (its size). The "
            "simulator prices an op as `launch_s + roofline_s / efficiency` (docs/calibration.md). Efficiency 1 "
            "means the kernel runs at the datasheet peak. A curve **above 1** (for example 1.2) is faster than "
            "the roofline the profile assumes. That is possible when the peak is too low for that op: cache "
            "reuse beats the DRAM bandwidth, or a format runs at a faster tensor-core rate than the table says. "
            "Read it as a correction to the datasheet, not as a kernel beating physics. The fit bounds "
            "efficiency below 2.")
        top = profile.rows["efficiency"].max()
        if top > 1.2:
            worst = profile.rows.loc[profile.rows["efficiency"].idxmax()]
            st.info(f"Highest efficiency in this profile: {top:.2f} ({worst['op']} {worst['dtype']}): its measured "
                    "times are faster than that op's datasheet roofline.")
        st.altair_chart(charts.efficiency_curves(profile.rows.assign(
            launch_s=profile.rows.get("launch_s", float("nan")))))
    if profile.provenance:
        st.markdown("**Provenance**")
        st.dataframe(pd.DataFrame(cal.flat_items({k: v for k, v in profile.provenance.items() if k != "fit"}),
                                  columns=["field", "value"]), hide_index=True)
        if "fit" in profile.provenance:
            with st.expander("Fit details stored in the profile"):
                st.json(profile.provenance["fit"])

validations = ui.find_folders(tuple(map(str, ui.results_roots())), "validation.json")
if validations:
    st.subheader("Validation against a measured serving run")
    chosen = st.selectbox("Validation run", validations, format_func=str, key="cal_validation")
    try:
        doc = cal.load_optional_json(chosen / "validation.json")
        st.dataframe(pd.DataFrame(cal.flat_items(doc), columns=["figure", "value"]), hide_index=True)
    except InputError as err:
        st.error(explain(err))

matrices = cal.matrix_folders(ui.find_folders(tuple(map(str, ui.results_roots())), cal.MATRIX_MARKER))
if matrices:
    st.subheader("Validation matrix on measured silicon")
    chosen = st.selectbox("Matrix run", matrices, format_func=str, key="cal_matrix",
                          help="A folder written by `python -m sim.validate.silicon` (matrix.json).")
    try:
        matrix = cal.load_matrix(chosen)
    except InputError as err:
        st.error(explain(err))
    else:
        counts = matrix.doc.get("counts") or {}
        reasons = ", ".join(f"{k}: {n}" for k, n in (counts.get("unsupported_by_reason") or {}).items())
        st.caption(f"{counts.get('simulated', 0)} rows simulated, {counts.get('failed', 0)} failed, "
                   f"{counts.get('unsupported', 0)} not expressible{f' ({reasons})' if reasons else ''}. Errors "
                   "of the simulated median against the measured value; negative bias = simulated faster."
                   + (" Held out: each row's front-end time fitted without its own model."
                      if (matrix.doc.get("options") or {}).get("held_out") else ""))
        if matrix.chart is not None:
            st.vega_lite_chart(matrix.chart)
        st.dataframe(matrix.partitions, hide_index=True, column_config={
            c: st.column_config.NumberColumn(c, format="%.1f") for c in matrix.partitions.columns if "(%)" in c})
