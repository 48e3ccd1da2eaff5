"""Which OpenSearch cluster, connecting to it, checking it.

**Which cluster.** ``WORKBENCH_OS_URL`` when set (any OpenSearch 2.x with the k-NN plugin
and ICU analysis, e.g. ``https://search.example.org:9200``; credentials in
``WORKBENCH_OS_USER`` / ``WORKBENCH_OS_PASSWORD``; ``WORKBENCH_OS_VERIFY_CERTS=0`` for a
self-signed certificate), else the workbench's local node
(:mod:`workbench.services.opensearch`), which :func:`cluster_url` starts when
``start=True`` and it is not running.

Errors are :class:`OpenSearchError` and name the URL (never the password) and the fix.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from workbench.errors import WorkbenchError

URL_ENV = "WORKBENCH_OS_URL"
USER_ENV = "WORKBENCH_OS_USER"
PASSWORD_ENV = "WORKBENCH_OS_PASSWORD"
VERIFY_ENV = "WORKBENCH_OS_VERIFY_CERTS"

#: Request timeout, seconds.
TIMEOUT_S = 60


class OpenSearchError(WorkbenchError):
    """The cluster is unreachable, unhealthy, lacks a plugin, or an index is missing (names the URL and the fix)."""


def cluster_url(home: Path | None = None, *, start: bool = False, log=lambda _m: None) -> str:
    """The URL of the cluster the workbench uses (see the module docstring).

    Args:
        home: the workbench home (default :func:`workbench.settings.home_dir`).
        start: start the local node when it is not running (and ``WORKBENCH_OS_URL`` is unset).

    Raises:
        OpenSearchError: no URL is set and the local node is not running (with ``start=False``).
        ServiceError: the local node cannot be started.
    """
    env = os.environ.get(URL_ENV, "").strip()
    if env:
        return check_url(env)
    from workbench.services import opensearch as service

    if home is None:
        from workbench.settings import home_dir

        home = home_dir()
    st = service.status(home)
    if st["state"] == "running":
        return st["url"]
    if not start:
        raise OpenSearchError("no OpenSearch cluster: start the local node with `workbench services up opensearch` "
                              f"or set {URL_ENV} to a running cluster")
    log("starting the local OpenSearch node (`workbench services down opensearch` stops it)")
    return service.up(home, log=log).url


def check_url(url: str) -> str:
    """``url`` without a trailing slash, if it is a usable cluster URL.

    Raises:
        OpenSearchError: not http(s), no host, a bad port, or a path (names ``WORKBENCH_OS_URL`` and the fix).
    """
    from urllib.parse import urlsplit

    example = "e.g. http://127.0.0.1:9200"
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise OpenSearchError(f"{URL_ENV}={url!r} is not a valid URL ({exc}); {example}") from None
    if parts.scheme not in ("http", "https"):
        raise OpenSearchError(f"{URL_ENV}={url!r} must be an http:// or https:// URL, {example}")
    if not parts.hostname:
        raise OpenSearchError(f"{URL_ENV}={url!r} names no host; {example}")
    if parts.path not in ("", "/") or parts.query or parts.fragment:
        raise OpenSearchError(f"{URL_ENV}={url!r} has a path or query; give the cluster's root URL, {example}")
    if parts.username or parts.password:
        raise OpenSearchError(f"{URL_ENV} must not hold credentials; set {USER_ENV} and {PASSWORD_ENV} instead")
    del port
    return url.rstrip("/")


def client(url: str):
    """An ``opensearchpy.OpenSearch`` client for ``url`` with the credentials of the environment.

    Raises:
        OpenSearchError: opensearch-py is not installed.
    """
    try:
        from opensearchpy import OpenSearch
    except ImportError:
        raise OpenSearchError("opensearch-py is not installed: pip install opensearch-py") from None
    url = check_url(url)
    user, password = os.environ.get(USER_ENV, ""), os.environ.get(PASSWORD_ENV, "")
    if bool(user) != bool(password):
        have, lack = (USER_ENV, PASSWORD_ENV) if user else (PASSWORD_ENV, USER_ENV)
        raise OpenSearchError(f"{have} is set but {lack} is not; set both (basic authentication) or neither")
    verify = os.environ.get(VERIFY_ENV, "1").strip().lower() not in ("0", "false", "no")
    kwargs: dict[str, Any] = {"hosts": [url], "timeout": TIMEOUT_S, "max_retries": 1, "retry_on_timeout": False}
    if user:
        kwargs["http_auth"] = (user, password)
    if url.startswith("https://"):
        kwargs.update(use_ssl=True, verify_certs=verify, ssl_show_warn=verify)
    return OpenSearch(**kwargs)


def describe(exc: BaseException) -> str:
    """A one-line description of an opensearch-py or transport error."""
    info = getattr(exc, "info", None)
    if isinstance(info, dict) and isinstance(info.get("error"), dict):
        err = info["error"]
        root = (err.get("root_cause") or [{}])[0]
        return f"{root.get('type') or err.get('type')}: {root.get('reason') or err.get('reason')}"
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}"[:300]


def check_cluster(es, url: str) -> dict[str, Any]:
    """Check that the cluster answers, is not red, and has k-NN and ICU analysis.

    Returns:
        ``{"version": "2.19.1", "plugins": [...], "status": "green"}``.

    Raises:
        OpenSearchError: unreachable (names the URL), red, or a plugin is missing (names it).
    """
    try:
        info = es.info()
    except Exception as exc:  # ConnectionError, TransportError, SSL errors...
        if type(exc).__name__ == "SerializationError":
            raise OpenSearchError(f"the server at {url} answered, but not as OpenSearch ({describe(exc)}); "
                                  f"check {URL_ENV}") from None
        raise OpenSearchError(f"cannot reach OpenSearch at {url}: {describe(exc)}; start the local node with "
                              f"`workbench services up opensearch` or fix {URL_ENV}") from None
    version = info.get("version", {}) if isinstance(info, dict) else {}
    number = str(version.get("number", ""))
    if version.get("distribution") != "opensearch" or not number[:1].isdigit() or int(number.split(".")[0]) < 2:
        raise OpenSearchError(f"the server at {url} is not OpenSearch 2.x or newer (distribution "
                              f"{version.get('distribution')!r}, version {number or '?'}); check {URL_ENV}")
    try:
        health = es.cluster.health()
        plugins = sorted({p["component"] for p in es.cat.plugins(format="json")})
    except Exception as exc:
        raise OpenSearchError(f"OpenSearch at {url} refused a health or plugin request: {describe(exc)}") from None
    if health.get("status") == "red":
        raise OpenSearchError(f"OpenSearch at {url} is red (unassigned primary shards); see its log")
    if "opensearch-knn" not in plugins:
        raise OpenSearchError(f"OpenSearch at {url} lacks the k-NN plugin (has: {', '.join(plugins) or 'none'}); "
                              "install opensearch-knn or use the local node (`workbench services up opensearch`)")
    try:
        es.indices.analyze(body={"tokenizer": "icu_tokenizer", "filter": ["icu_folding"], "text": "ā"})
    except Exception as exc:
        raise OpenSearchError(f"OpenSearch at {url} has no ICU analysis ({describe(exc)}); install analysis-icu "
                              "or use the local node (`workbench services up opensearch`)") from None
    return {"version": number, "plugins": plugins, "status": health["status"]}
