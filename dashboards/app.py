"""The workbench dashboard: ``workbench dashboard`` (or ``streamlit run dashboards/app.py``).

Reads only the MLflow store, the Optuna storage and the artifacts and files the main job
wrote under the workbench home; it never queries a retrieval service. Pages:
overview, compare two configs, query drill-down, study, gate.
"""

from pathlib import Path

import streamlit as st

HERE = Path(__file__).parent / "views"  # not "pages/": that name would turn on Streamlit's older page discovery

st.set_page_config(page_title="Workbench", page_icon=":material/search:", layout="wide")
pages = [
    st.Page(HERE / "overview.py", title="Overview", icon=":material/leaderboard:", default=True),  # served at /
    st.Page(HERE / "compare.py", title="Compare two configs", icon=":material/compare_arrows:", url_path="compare"),
    st.Page(HERE / "query.py", title="Query drill-down", icon=":material/manage_search:", url_path="query"),
    st.Page(HERE / "study.py", title="Study", icon=":material/tune:", url_path="study"),
    st.Page(HERE / "gate.py", title="Gate", icon=":material/traffic:", url_path="gate"),
]
st.navigation(pages).run()
