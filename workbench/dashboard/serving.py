"""Where a dashboard bound to an address can be reached: the URLs ``workbench dashboard`` prints.

A loopback bind is reached at that address. A wildcard bind (``0.0.0.0``, ``::``) is
reached at each address of the machine's interfaces, never at "localhost" as far as
other machines are concerned, so the listing names those addresses (psutil's interface
list when psutil is installed, else what the host name resolves to and the address of
the default route) and the host name.
"""

from __future__ import annotations

import ipaddress
import socket

WILDCARDS = ("0.0.0.0", "::", "")


def _url(addr: str, port: int) -> str:
    return f"http://[{addr}]:{port}" if ":" in addr else f"http://{addr}:{port}"


def _usable(addr: str) -> bool:
    try:
        ip = ipaddress.ip_address(addr.split("%")[0])
    except ValueError:
        return False
    return not (ip.is_loopback or ip.is_link_local or ip.is_unspecified or ip.is_multicast)


def machine_addresses(ipv6: bool = True) -> list[str]:
    """This machine's non-loopback, non-link-local addresses, IPv4 first (may be empty)."""
    found: list[str] = []
    try:
        import psutil

        for addrs in psutil.net_if_addrs().values():
            for a in addrs:
                if a.family == socket.AF_INET or (ipv6 and a.family == socket.AF_INET6):
                    found.append(a.address)
    except Exception:  # psutil missing or refused: fall back to the resolver and the default route
        try:
            found += [info[4][0] for info in socket.getaddrinfo(socket.gethostname(), None)]
        except OSError:
            pass
        for family, probe in ((socket.AF_INET, "192.0.2.1"), (socket.AF_INET6, "2001:db8::1")):
            if family == socket.AF_INET6 and not ipv6:
                continue
            try:  # connecting a UDP socket sends nothing; it only picks the outgoing address
                with socket.socket(family, socket.SOCK_DGRAM) as s:
                    s.connect((probe, 9))
                    found.append(s.getsockname()[0])
            except OSError:
                pass
    usable = [a for a in dict.fromkeys(found) if _usable(a)]
    return sorted(usable, key=lambda a: (":" in a, a))


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
