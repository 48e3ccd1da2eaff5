"""The workbench dashboard: ``workbench dashboard`` (or ``streamlit run dashboards/app.py --server.address 127.0.0.1``).

Reads only the MLflow store, the Optuna storage and the artifacts and files the main job
wrote under the workbench home; it never queries a retrieval service. Pages:
overview, compare two configs, query drill-down, study, gate.

Access (:mod:`workbench.dashboard.auth`): when the home has dashboard tokens, every page
shows only the sign-in form until a valid token is given (password field, or ``?token=``
in the URL once); without tokens the app shows its pages only when it listens on a
loopback address.
"""

from pathlib import Path

import streamlit as st

from workbench.dashboard import ui

HERE = Path(__file__).resolve().parent / "views"  # not "pages/": that name would turn on Streamlit's older page discovery

st.set_page_config(page_title="Workbench", page_icon=":material/search:", layout="wide")
pages = [
    st.Page(HERE / "overview.py", title="Overview", icon=":material/leaderboard:", default=True),  # served at /
    st.Page(HERE / "compare.py", title="Compare two configs", icon=":material/compare_arrows:", url_path="compare"),
    st.Page(HERE / "query.py", title="Query drill-down", icon=":material/manage_search:", url_path="query"),
    st.Page(HERE / "study.py", title="Study", icon=":material/tune:", url_path="study"),
    st.Page(HERE / "gate.py", title="Gate", icon=":material/traffic:", url_path="gate"),
]
state, message = ui.access()  # decided before anything is drawn
page = st.navigation(pages, position="sidebar" if state in ("open", "granted") else "hidden")
if state == "open":
    page.run()
elif state == "granted":
    ui.sign_out_button()
    page.run()
elif state == "login":
    ui.sign_in_form(message)
else:
    st.error(message)
