"""Entry point: `streamlit run dashboard` (or `streamlit run dashboard/streamlit_app.py`) from the repo root.

Sets up the page, the results-folder picker in the sidebar, and the four pages in `views/`.
"""
import streamlit as st

st.set_page_config(page_title="inferplan", page_icon=":material/monitoring:", layout="wide")

try:
    from dashboard import ui
except ModuleNotFoundError as err:  # streamlit puts only this folder on sys.path, not the repo root
    st.error(f"Cannot import the inferplan packages ({err}). Install the project with `pip install -e .` "
             "from the repo root, then start the app again.")
    st.stop()

ui.sidebar()
# The default page is always served at "/" (Streamlit ignores its url_path), so `/run` would be "Page not found":
# the Run page is a normal page at /run and the default page at "/" only switches to it.
run_page = st.Page("views/run_page.py", title="Run", icon=":material/speed:", url_path="run")


def home():
    st.switch_page(run_page)


st.navigation([
    st.Page(home, title="Run", url_path="home", default=True, visibility="hidden"),
    run_page,
    st.Page("views/compare_page.py", title="Compare", icon=":material/compare_arrows:", url_path="compare"),
    st.Page("views/calibration_page.py", title="Calibration", icon=":material/tune:", url_path="calibration"),
    st.Page("views/whatif_page.py", title="What-if", icon=":material/science:", url_path="whatif"),
]).run()
