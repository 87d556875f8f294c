"""One HTTP/1.1 request and its answer on a socket: the little HTTP the command line's
blocking client needs, written out.

The standard library's `http.client` would do it, but loads the email package
and ssl for it: about an eighth of a verb's start-up work, for header folding
and TLS that the control socket never uses (benchmarks/bench_cli.py, and
callgrind's instruction counts in docs/benchmarks.md). What is needed is
small and fixed: the request is written whole with `Connection: close`, so
the answer ends where the server closes the connection; its body is what
`Content-Length` says, or its chunks, or all that came. An answer that is not
HTTP/1.x, or is cut short, is an `AnswerError` saying so; a silent server is
the socket's TimeoutError.
"""

from __future__ import annotations

import socket
from collections.abc import Mapping

READ_BYTES = 256 * 1024
"""How much one read of the answer asks for."""


class AnswerError(ValueError):
    """The answer is not an HTTP/1.x answer that this client can read."""


def request(method: str, target: str, headers: Mapping[str, str], body: bytes | None) -> bytes:
    """The bytes of a request for `target`, with `headers` (text without line breaks: any
    other character becomes `?`) and `body`, closing the connection after its answer."""
    lines = [f"{method} {target} HTTP/1.1", "Host: tuisched", "Connection: close"]
    lines += [f"{name}: {_header_text(value)}" for name, value in headers.items()]
    if body is not None:
        lines.append(f"Content-Length: {len(body)}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("ascii") + (body or b"")


def exchange(sock: socket.socket, sent: bytes) -> tuple[int, bytes]:
    """Send the request `sent` on the connected `sock`; the answer's status and body.

    Raises:
        OSError: the socket's (TimeoutError when the server stays silent past the
            socket's timeout).
        AnswerError: the answer is not HTTP/1.x, or was cut short.
    """
    sock.sendall(sent)
    received: list[bytes] = []
    while chunk := sock.recv(READ_BYTES):
        received.append(chunk)
    return parse(b"".join(received))


def parse(answer: bytes) -> tuple[int, bytes]:
    """The status and the body of a whole answer (see the module docstring)."""
    head, end, body = answer.partition(b"\r\n\r\n")
    if not end:
        raise AnswerError("the answer ended before its headers did")
    status_line, *header_lines = head.split(b"\r\n")
    version, _, rest = status_line.partition(b" ")
    code = rest[:3]
    if not (version.startswith(b"HTTP/1.") and len(code) == 3 and code.isdigit()):
        raise AnswerError(f"not an HTTP answer: {status_line[:60]!r}")
    headers = {}
    for line in header_lines:
        name, colon, value = line.partition(b":")
        if colon:
            headers[name.strip().lower()] = value.strip()
    if headers.get(b"transfer-encoding", b"").lower() == b"chunked":
        return int(code), _unchunked(body)
    return int(code), _sized(body, headers.get(b"content-length"))


def _sized(body: bytes, length: bytes | None) -> bytes:
    if length is None:
        return body  # the server's closing the connection ended it
    if not length.isdigit() or len(body) < int(length):
        raise AnswerError("the answer was cut short")
    return body[: int(length)]


def _unchunked(body: bytes) -> bytes:
    parts: list[bytes] = []
    while True:
        size_line, end, body = body.partition(b"\r\n")
        size_text = size_line.split(b";")[0].strip()
        if not end or not size_text or any(c not in b"0123456789abcdefABCDEF" for c in size_text):
            raise AnswerError("a chunked answer was cut short or garbled")
        size = int(size_text, 16)
        if size == 0:
            return b"".join(parts)
        if len(body) < size + 2:
            raise AnswerError("a chunked answer was cut short or garbled")
        parts.append(body[:size])
        body = body[size + 2 :]


def _header_text(value: str) -> str:
    return "".join(c if " " <= c <= "~" else "?" for c in value)
