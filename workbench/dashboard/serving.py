"""Where a dashboard bound to an address can be reached: the URLs ``workbench dashboard`` prints.

A loopback bind is reached at that address. A wildcard bind (``0.0.0.0``, ``::``) is
reached at each address of the machine's interfaces, never at "localhost" as far as
other machines are concerned, so the listing names those addresses (psutil's interface
list when psutil is installed, else what the host name resolves to and the address of
the default route) and the host name.

It also holds :class:`DashboardGuard`, the served-port policy (:mod:`workbench.services.policy`) in front of
the dashboard's Streamlit app.
"""

from __future__ import annotations

import socket
from collections.abc import Callable
from typing import Any

from workbench.services.policy import DASHBOARD_BOUNDS, WILDCARDS, Guard, allowed_names, env_names, machine_addresses

__all__ = ["WILDCARDS", "machine_addresses", "describe", "DashboardGuard"]


def _url(addr: str, port: int) -> str:
    return f"http://[{addr}]:{port}" if ":" in addr else f"http://{addr}:{port}"


class DashboardGuard(Guard):
    """The policy's :class:`~workbench.services.policy.Guard` in front of the dashboard's Streamlit app
    (``dashboards/serve.py``): ``Host`` must name the address Streamlit serves (``server.address``; for a
    wildcard bind, this machine's addresses and names), a loopback name, or a name in
    ``$WORKBENCH_ALLOWED_HOSTS`` (what ``workbench dashboard --allow-host`` sets); ``Origin`` must be the
    ``Host`` itself or such an allowed name; HTTP bodies are bounded by
    :data:`~workbench.services.policy.DASHBOARD_BOUNDS`. Built by Starlette when the app starts, after
    Streamlit read its options.

    Raises:
        ConfigError: ``$WORKBENCH_ALLOWED_HOSTS`` holds something that is not a host name.
    """

    def __init__(self, app: Any, address: Callable[[], str]) -> None:
        explicit = frozenset(env_names())
        super().__init__(app, service="the dashboard", allowed=allowed_names(address(), explicit),
                         explicit=explicit, bounds=DASHBOARD_BOUNDS)


def describe(host: str, port: int) -> str:
    """How to reach a dashboard bound to ``host:port``, for the start-up line.

    ``http://127.0.0.1:8501`` for a loopback or specific address; for a wildcard bind
    ``all interfaces of HOSTNAME: http://10.0.0.5:8501, http://[2001:db8::5]:8501`` (the
    machine's addresses; only the host name when none is found). Never "localhost" for a
    bind that other machines reach.
    """
    if host in WILDCARDS:
        addrs = machine_addresses(ipv6=(host == "::"))
        where = f"all interfaces of {socket.gethostname()}, port {port}"
        return f"{where}: {', '.join(_url(a, port) for a in addrs)}" if addrs else where
    return _url(host.strip("[]"), port)
