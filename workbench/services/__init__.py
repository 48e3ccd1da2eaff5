"""Local services the workbench starts and stops itself: the embedded PostgreSQL
(:mod:`workbench.services.postgres`) and the local OpenSearch node (:mod:`workbench.services.opensearch`)."""

from __future__ import annotations

import os
import shutil
import subprocess


def system_user(name: str, service: str) -> tuple[int, int] | None:
    """(uid, gid) of the system user a service runs as when the workbench runs as root (created
    with ``useradd --system`` when missing); None when not root (the service runs as the caller).

    PostgreSQL and OpenSearch both refuse to run as root.

    Raises:
        ServiceError: ``useradd`` is missing or fails (names the user and the way out).
    """
    if os.geteuid() != 0:
        return None
    import pwd

    from workbench.errors import ServiceError

    try:
        pw = pwd.getpwnam(name)
    except KeyError:
        useradd = shutil.which("useradd")
        if useradd is None:
            raise ServiceError(f"{service} cannot run as root and `useradd` is missing to create the system user "
                               f"{name}; run the workbench as a normal user") from None
        proc = subprocess.run([useradd, "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", name],
                              capture_output=True, text=True)
        if proc.returncode != 0 and "already exists" not in proc.stderr:
            raise ServiceError(f"cannot create the system user {name} to run {service} ({service} refuses root): "
                               f"{proc.stderr.strip()}") from None
        pw = pwd.getpwnam(name)
    return pw.pw_uid, pw.pw_gid
