"""Servers a sandboxed command must not reach: a bound socket that records each connection it accepts."""

from __future__ import annotations

import socket
import threading


def record_connections(srv: socket.socket) -> list[bool]:
    """Accept on the bound `srv` in a daemon thread until it is closed; each accepted connection appends
    True to the returned list (and is closed at once)."""
    srv.listen()
    accepted: list[bool] = []

    def serve() -> None:
        while True:
            try:
                conn, _ = srv.accept()
            except OSError:
                return
            accepted.append(True)
            conn.close()

    threading.Thread(target=serve, daemon=True).start()
    return accepted
