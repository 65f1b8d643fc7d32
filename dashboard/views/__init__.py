"""The app's pages, one Streamlit script each (run by `st.navigation` in `streamlit_app.py`; never imported)."""
