"""``python -m dashboards.launch ARGS``: ``streamlit ARGS`` with the served-port policy's connection
bounds (what ``workbench dashboard`` runs).

Streamlit builds its own ``uvicorn.Config`` (``starlette_server._get_uvicorn_config_kwargs``), so the head
deadline, head size and connection cap of :func:`workbench.services.policy.uvicorn_config` never reached the
dashboard: a request head sent a byte a second, or an unread body after a quick 405, held a connection for as
long as the client liked. This launcher adds them to Streamlit's options before its server starts:

* ``http``: uvicorn's h11 protocol closing a connection whose request head has not arrived within
  ``read_timeout_s`` of the connection or of the previous response (a body left unread counts: no new head);
* ``h11_max_incomplete_event_size``: the largest head;
* ``limit_concurrency``: connections and requests at once (503 beyond);
* ``timeout_keep_alive``: 5 s.

A Streamlit without that function (a future version) is refused with the version named, rather than served
without the bounds.
"""

from __future__ import annotations

import sys
from typing import Any

from workbench.services.policy import DASHBOARD_BOUNDS, Bounds, bounded_uvicorn_kwargs


def install(bounds: Bounds = DASHBOARD_BOUNDS) -> None:
    """Make Streamlit's uvicorn server obey ``bounds`` (see the module docstring).

    Raises:
        RuntimeError: this Streamlit builds its server another way (names the version and the fix).
    """
    import streamlit
    from streamlit.web.server.starlette import starlette_server as server

    own = getattr(server, "_get_uvicorn_config_kwargs", None)
    if own is None:
        raise RuntimeError(f"streamlit {streamlit.__version__} does not build its server the way the workbench "
                           "bounds it (starlette_server._get_uvicorn_config_kwargs); install the version "
                           "pyproject.toml names: pip install 'streamlit>=1.52,<2'")

    def bounded() -> dict[str, Any]:
        return {**own(), **bounded_uvicorn_kwargs(bounds)}

    server._get_uvicorn_config_kwargs = bounded


def main(argv: list[str] | None = None) -> None:
    """Install the bounds, then run Streamlit's command line with ``argv`` (default ``sys.argv[1:]``)."""
    from streamlit.web import cli

    try:
        install()
    except RuntimeError as exc:
        print(f"error: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
    sys.argv = ["streamlit", *(sys.argv[1:] if argv is None else argv)]
    cli.main()


if __name__ == "__main__":
    main()
