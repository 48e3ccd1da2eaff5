"""What ``workbench dashboard`` runs: the app of ``app.py`` behind the workbench's policy for served
ports (:mod:`workbench.services.policy`): ``Host`` and ``Origin`` checked on every request and WebSocket
(the DNS-rebinding defence), request bodies bounded in size and read time.

``streamlit run dashboards/serve.py --server.address 127.0.0.1`` serves the same; ``streamlit run
dashboards/app.py`` serves the pages without this guard (Streamlit accepts any ``Host`` then).
"""

import streamlit as st
from starlette.middleware import Middleware

from workbench.dashboard.serving import DashboardGuard


def _bind_address() -> str:
    """The address Streamlit binds, read once its options are (when the app starts)."""
    from streamlit import config

    return config.get_option("server.address")


app = st.App("app.py", middleware=[Middleware(DashboardGuard, address=_bind_address)])
