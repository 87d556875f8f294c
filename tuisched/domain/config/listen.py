"""`settings.metrics.listen`: an address to serve HTTP on, as `HOST:PORT`.

The host must be an IP address (or `localhost`): a name would need a DNS
look-up at start, and a metrics port is best bound to a known interface.
IPv6 addresses are written in brackets, `[::1]:9464`. Port 0 lets the system
pick a free one.
"""

from __future__ import annotations

import ipaddress

EXAMPLE = "127.0.0.1:9464"


def parse_listen(text: str) -> tuple[str, int]:
    """`(host, port)` from `HOST:PORT`; ValueError with the reason (it ends the line
    that names the setting, so it says what is wrong and what would be right)."""
    host, sep, port_text = text.strip().rpartition(":")
    if not sep or not host:
        raise ValueError(f"'{text}' is not HOST:PORT (for example {EXAMPLE})")
    return _host(host, text), _port(port_text, text)


def _host(host: str, text: str) -> str:
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    elif ":" in host:
        raise ValueError(f"'{text}': write an IPv6 address in brackets, as [::1]:9464")
    if host == "localhost":
        return "127.0.0.1"
    try:
        return str(ipaddress.ip_address(host))
    except ValueError:
        raise ValueError(
            f"'{text}': '{host}' is not an IP address (names are not looked up; "
            f"for example {EXAMPLE}, or 0.0.0.0:9464 for every interface)"
        ) from None


def _port(port_text: str, text: str) -> int:
    # str.isdigit() accepts "¹" and "٣": only ASCII digits are a port.
    if not port_text or any(c not in "0123456789" for c in port_text):
        raise ValueError(f"'{text}': the port must be a number from 0 to 65535")
    port = int(port_text)
    if port > 65535:
        raise ValueError(f"'{text}': the port must be a number from 0 to 65535")
    return port
