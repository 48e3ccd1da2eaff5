"""Is the process that started something still alive? (A tracked MLflow run, a tuning trial.)

A pid alone cannot say: pids are reused, and a pid means nothing on another machine or in
another pid namespace (a container). :func:`record` notes, for a process, its host name,
its pid and an *identity* (:func:`identity`): on Linux the machine id, the boot id, the pid
namespace and the process's start tick (field 22 of ``/proc/PID/stat``), elsewhere
psutil's creation time. :func:`state` answers ``dead`` only when that is certain (same
host, same machine and namespace, and the machine rebooted since, or the pid is gone, or the
pid now belongs to a process that started at another time), ``alive`` when the same process
runs, and ``unknown`` otherwise — callers never act on ``unknown``.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Mapping
from pathlib import Path
from typing import Any


def _read(path: str) -> str | None:
    try:
        return Path(path).read_text(encoding="ascii", errors="replace").strip()
    except OSError:
        return None


def _boot_id() -> str | None:
    return _read("/proc/sys/kernel/random/boot_id")


def _machine_id() -> str:
    return next((m for m in map(_read, ("/etc/machine-id", "/var/lib/dbus/machine-id")) if m), "").replace(":", "")


def _pid_namespace() -> str | None:
    try:
        link = os.readlink("/proc/self/ns/pid")  # "pid:[4026531836]"
    except OSError:
        return None
    return "".join(ch for ch in link if ch.isdigit()) or None


def _start_tick(pid: int) -> str | None:
    """Field 22 of ``/proc/PID/stat`` (clock ticks after boot when the process started); None when
    there is no such process (or no /proc)."""
    stat = _read(f"/proc/{pid}/stat")
    if not stat or ")" not in stat:
        return None
    fields = stat.rsplit(")", 1)[1].split()
    return fields[19] if len(fields) > 19 else None


def identity(pid: int | None = None) -> str | None:
    """What tells process ``pid`` (default: this one) apart from a later process that reuses its pid.

    ``linux:<machine id>:<boot id>:<pid namespace>:<start tick>`` where ``/proc`` is readable
    (the machine id may be empty), else ``psutil:<create time>``; None when neither is
    available or there is no such process.
    """
    pid = os.getpid() if pid is None else pid
    tick, boot, ns = _start_tick(pid), _boot_id(), _pid_namespace()
    if tick and boot and ns:
        return f"linux:{_machine_id()}:{boot}:{ns}:{tick}"
    try:
        import psutil

        return f"psutil:{psutil.Process(pid).create_time():.2f}"
    except Exception:  # psutil missing, no such process, access denied
        return None


_MINE: dict[str, Any] = {}


def record(pid: int | None = None) -> dict[str, Any]:
    """``{"host", "pid", "process"}`` of process ``pid`` (default: this one, computed once per process)."""
    if pid is None:
        if _MINE.get("pid") != os.getpid():  # a forked child computes its own
            _MINE.clear()
            _MINE.update(host=socket.gethostname(), pid=os.getpid(), process=identity())
        return dict(_MINE)
    return {"host": socket.gethostname(), "pid": pid, "process": identity(pid)}


def pid_exists(pid: int) -> bool:
    """Whether a process ``pid`` exists on this machine (a zombie, or another user's, counts)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # EPERM: it exists, and belongs to someone else
        return True
    return True


def state(rec: Mapping[str, Any] | None) -> str:
    """``alive``, ``dead`` or ``unknown`` for a :func:`record` (see the module docstring).

    Args:
        rec: a record (``pid`` may be an int or its decimal text); missing or malformed
            records give ``unknown``.
    """
    if not isinstance(rec, Mapping):
        return "unknown"
    pid_text, recorded = str(rec.get("pid", "")), str(rec.get("process") or "")
    if rec.get("host") != socket.gethostname() or not pid_text.isdigit() or not recorded:
        return "unknown"
    pid = int(pid_text)
    kind, _, rest = recorded.partition(":")
    if kind == "linux":
        parts = rest.split(":")
        if len(parts) != 4:
            return "unknown"
        machine, boot, ns, tick = parts
        if machine != _machine_id() or ns != _pid_namespace():
            return "unknown"
        now_boot = _boot_id()
        if now_boot is None:
            return "unknown"
        if now_boot != boot:  # this machine restarted since, if we know it is this machine
            return "dead" if machine else "unknown"
        current = _start_tick(pid)
        if current is None:  # no such process, or /proc hides it (hidepid): ask the kernel
            return "dead" if not pid_exists(pid) else "unknown"
        return "alive" if current == tick else "dead"
    if kind == "psutil":
        try:
            import psutil
        except ImportError:
            return "unknown"
        try:
            if not psutil.pid_exists(pid):
                return "dead"
            return "alive" if abs(psutil.Process(pid).create_time() - float(rest)) < 1.0 else "dead"
        except psutil.NoSuchProcess:
            return "dead"
        except Exception:
            return "unknown"
    return "unknown"
