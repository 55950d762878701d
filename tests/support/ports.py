"""Loopback ports for tests about a server that is not there."""

from __future__ import annotations

import socket


def refusing_socket() -> socket.socket:
    """A socket bound to a 127.0.0.1 port and never listening: connections to that port are refused for as
    long as the caller keeps it open (close it, or use it in `with`). A port merely found free and released
    is anyone's a moment later (test servers across the machine bind port 0 all the time), and a test
    expecting "connection refused" would then reach one of them."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    return sock


def port_of(sock: socket.socket) -> int:
    return int(sock.getsockname()[1])
