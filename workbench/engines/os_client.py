"""Which OpenSearch cluster, connecting to it, checking it.

**Which cluster.** ``WORKBENCH_OS_URL`` when set (any OpenSearch 2.x with the k-NN plugin
and ICU analysis, e.g. ``https://search.example.org:9200``), else the workbench's local
node (:mod:`workbench.services.opensearch`), which :func:`cluster_url` starts when
``start=True`` and it is not running.

**Credentials.** For the local node of the current home (or of a home whose node this
process started or checked) the client reads them itself: the user and password from
``<home>/services/opensearch-credentials.json`` and the home's CA certificate to verify
the node's HTTPS, also when ``WORKBENCH_OS_URL`` names that node's URL (as ``.ci/run``
does). ``WORKBENCH_OS_HOME`` names one more home whose local node's credentials are read for its own URL
only: processes of other homes sharing one node (the test workers of ``make test``, each with its own home,
on the node ``.ci/run`` started). For any other cluster: ``WORKBENCH_OS_USER`` / ``WORKBENCH_OS_PASSWORD`` (HTTP
basic authentication; when set they win), ``WORKBENCH_OS_CA_CERTS`` (a CA file to verify
its certificate with), or ``WORKBENCH_OS_VERIFY_CERTS=0`` (no verification, for a
self-signed certificate).

Errors are :class:`OpenSearchError` and name the URL (never the password) and the fix.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from workbench.errors import OpenSearchError, WorkbenchError  # noqa: F401  (OpenSearchError: re-exported)

URL_ENV = "WORKBENCH_OS_URL"
USER_ENV = "WORKBENCH_OS_USER"
PASSWORD_ENV = "WORKBENCH_OS_PASSWORD"
VERIFY_ENV = "WORKBENCH_OS_VERIFY_CERTS"
CA_ENV = "WORKBENCH_OS_CA_CERTS"
#: A home whose local node's credentials the clients also read, for that node's URL only.
HOME_ENV = "WORKBENCH_OS_HOME"

#: Request timeout, seconds.
TIMEOUT_S = 60




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
        return check_cluster_url(env)
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


def check_cluster_url(url: str) -> str:
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


def client(url: str, home: Path | None = None):
    """An ``opensearchpy.OpenSearch`` client for ``url`` with its credentials (see the module docstring).

    Args:
        url: the cluster's root URL.
        home: the home whose local node ``url`` may be (default: the current home, and the homes
            whose node this process started or checked).

    Raises:
        OpenSearchError: opensearch-py is not installed, only one of user and password is set,
            the CA file of ``WORKBENCH_OS_CA_CERTS`` is missing, or the local node's credentials
            file cannot be read.
    """
    try:
        from opensearchpy import OpenSearch
    except ImportError:
        raise OpenSearchError("opensearch-py is not installed: pip install opensearch-py") from None
    url = check_cluster_url(url)
    user, password = os.environ.get(USER_ENV, ""), os.environ.get(PASSWORD_ENV, "")
    if bool(user) != bool(password):
        have, lack = (USER_ENV, PASSWORD_ENV) if user else (PASSWORD_ENV, USER_ENV)
        raise OpenSearchError(f"{have} is set but {lack} is not; set both (basic authentication) or neither")
    verify = os.environ.get(VERIFY_ENV, "1").strip().lower() not in ("0", "false", "no")
    ca_certs = os.environ.get(CA_ENV, "").strip() or None
    if ca_certs and not Path(ca_certs).is_file():
        raise OpenSearchError(f"{CA_ENV}={ca_certs!r} is not a file; give the PEM file of the CA that signed the "
                              f"certificate of {url}, or unset it")
    if not user:
        from workbench.services import opensearch as service

        try:
            local = service.local_credentials(url, home)
        except WorkbenchError as exc:
            raise OpenSearchError(str(exc)) from None
        if local is not None:  # the local node: its own CA, always verified
            user, password, ca_certs, verify = local.user, local.password, local.ca_certs, True
    kwargs: dict[str, Any] = {"hosts": [url], "timeout": TIMEOUT_S, "max_retries": 1, "retry_on_timeout": False}
    if user:
        kwargs["http_auth"] = (user, password)
    if url.startswith("https://"):
        kwargs.update(use_ssl=True, verify_certs=verify, ssl_show_warn=verify)
        if verify and ca_certs:
            kwargs["ca_certs"] = ca_certs
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
        OpenSearchError: unreachable (names the URL), the credentials refused or the certificate not
            trusted (names what to set), red, or a plugin is missing (names it).
    """
    try:
        info = es.info()
    except Exception as exc:  # ConnectionError, TransportError, SSL errors...
        if type(exc).__name__ == "SerializationError":
            raise OpenSearchError(f"the server at {url} answered, but not as OpenSearch ({describe(exc)}); "
                                  f"check {URL_ENV}") from None
        if getattr(exc, "status_code", None) in (401, 403):
            raise OpenSearchError(f"OpenSearch at {url} refused the credentials ({describe(exc)}); set {USER_ENV} "
                                  f"and {PASSWORD_ENV} for it (the local node of another home: its "
                                  "services/opensearch-credentials.json)") from None
        if "CERTIFICATE_VERIFY_FAILED" in str(exc):
            raise OpenSearchError(f"the certificate of {url} is not trusted ({describe(exc)}); set {CA_ENV} to the CA "
                                  "file that signed it (the local node of another home: its services/opensearch-ca.pem)"
                                  f" or {VERIFY_ENV}=0") from None
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
