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
