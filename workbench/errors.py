"""The workbench's small error hierarchy.

Every message names the thing that is wrong and the next step to fix it.
The CLI turns a :class:`WorkbenchError` into a one-line message and exit code 2.
"""


class WorkbenchError(Exception):
    """Base class of every error the workbench raises on bad input or bad data."""


class ConfigError(WorkbenchError):
    """A setting is missing or invalid (names the setting and how to set it)."""


class DataError(WorkbenchError):
    """A corpus file is missing, truncated or malformed (names the path)."""


class StaleError(WorkbenchError):
    """A built artifact no longer matches its inputs (names what changed and how to rebuild)."""


class StorageError(WorkbenchError):
    """A file or folder of the workbench cannot be written or read back: a full disk, a
    read-only or foreign folder, a damaged file (names the path, the space needed and the fix).

    Raised by :mod:`workbench._infra.durable`; nothing half-written is left behind when it is raised.
    """


class BusyError(WorkbenchError):
    """Another process holds what this one needs (a home lock, a server) and did not let go in time
    (names the holder and what to do)."""


class ServiceError(WorkbenchError):
    """A local service (the embedded PostgreSQL, the local OpenSearch node) cannot be fetched, installed,
    started or stopped (names the step, the log and the fix)."""


class PgError(WorkbenchError):
    """PostgreSQL cannot be reached or lacks what the workbench needs (names the DSN, without password, and the fix)."""


class OpenSearchError(WorkbenchError):
    """The cluster is unreachable, unhealthy, lacks a plugin, or an index is missing (names the URL and the fix)."""


class RegistryError(WorkbenchError):
    """A retriever or reranker kind cannot be registered or found: a duplicate kind name, an entry point that
    does not load or is not a kind declaration, an unknown kind (names the kind, the distribution and the fix)."""


class RemoteError(WorkbenchError):
    """A remote service the workbench reads (an embeddings API, a live search endpoint) failed for good:
    unreachable, too slow, an HTTP error, or an answer that is not the expected shape (names the config key,
    the URL, what came back and the fix; never a key or token).

    Attributes:
        error_class: ``connect``, ``timeout``, ``http_401`` … (:mod:`workbench.io.http`), ``malformed``.
    """

    def __init__(self, message: str, error_class: str = "malformed") -> None:
        super().__init__(message)
        self.error_class = error_class


class RerankError(WorkbenchError):
    """A remote reranker (:class:`workbench.reranking.http.HttpScorer`) failed: unreachable, too slow, an HTTP
    error, or a body that is not the rerank JSON shape (names the URL, the batch, what came back and the fix).

    Attributes:
        partial: index (into the texts of the failed ``score`` call) → score, for the batches that were
            scored before the failure; empty when none was. A caller may keep them (e.g. in a cache).
    """

    def __init__(self, message: str, partial: dict[int, float] | None = None) -> None:
        super().__init__(message)
        self.partial: dict[int, float] = dict(partial or {})

    def __reduce__(self):  # keep ``partial`` across pickling (a worker process's error)
        return type(self), (str(self), self.partial)
