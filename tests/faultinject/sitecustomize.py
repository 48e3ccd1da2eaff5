"""Fault injection for the tests' subprocesses (imported by Python at start-up when this folder is on PYTHONPATH).

``WORKBENCH_FAULT="module:Qualified.name:N[:before|after][:signal]"`` wraps that function so
that its N-th call sends the signal (default SIGKILL) to this very process, before the call
runs (default) or after it returns. Several faults are separated by ``;``. Used through
:func:`tests.faults.kill_at`.
"""

import importlib
import os
import signal


def _install(spec: str) -> None:
    parts = spec.split(":")
    module, qual, n = parts[0], parts[1], int(parts[2])
    when = parts[3] if len(parts) > 3 and parts[3] else "before"
    sig = getattr(signal, parts[4]) if len(parts) > 4 and parts[4] else signal.SIGKILL
    mod = importlib.import_module(module)
    owner, name = mod, qual
    if "." in qual:
        cls, name = qual.rsplit(".", 1)
        for piece in cls.split("."):
            owner = getattr(owner, piece)
    fn = getattr(owner, name)
    calls = [0]

    def wrapper(*args, **kwargs):
        calls[0] += 1
        if calls[0] == n and when == "before":
            os.kill(os.getpid(), sig)
        out = fn(*args, **kwargs)
        if calls[0] == n and when == "after":
            os.kill(os.getpid(), sig)
        return out

    wrapper.__wrapped__ = fn
    if isinstance(owner, type) and isinstance(owner.__dict__.get(name), staticmethod):
        wrapper = staticmethod(wrapper)
    setattr(owner, name, wrapper)


for _spec in filter(None, os.environ.get("WORKBENCH_FAULT", "").split(";")):
    _install(_spec.strip())
