"""The thread hosting the issue-37 fakes: one event loop, one HTTPS app, any number of TCP servers.

Everything listens on 127.0.0.1 port 0 inside the host's loop, so a port is known and already accepting
when `start()` / `listen()` return: no free-port guess, no readiness polling. The loop outlives each test's
own loop (pytest-asyncio gives every test a fresh one), so the fakes are started once per session.
"""

from __future__ import annotations

import asyncio
import socket
import ssl
import threading
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from aiohttp import web

T = TypeVar("T")


class FakeHost:
    def __init__(self, tls: ssl.SSLContext) -> None:
        self.tls = tls
        self.loop = asyncio.new_event_loop()
        self.app = web.Application(client_max_size=20 * 1024 * 1024)
        self.url = ""
        self._servers: list[asyncio.Server] = []
        self._runner: web.AppRunner | None = None
        self._thread = threading.Thread(target=self.loop.run_forever, name="oauth-fakes", daemon=True)
        self._thread.start()

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run `coro` on the host's loop and return its result (from any other thread)."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout=60)

    def start(self) -> str:
        """Serve the app (its routes added by now) over TLS; returns its https URL."""
        async def serve() -> str:
            self._runner = web.AppRunner(self.app, access_log=None)
            await self._runner.setup()
            sock = socket.create_server(("127.0.0.1", 0))  # bound here, so its port is known
            await web.SockSite(self._runner, sock, ssl_context=self.tls).start()
            return f"https://127.0.0.1:{sock.getsockname()[1]}"

        self.url = self.run(serve())
        return self.url

    def listen(self, factory: Callable[[], asyncio.BaseProtocol] | None = None, *,
               streams: Callable[[asyncio.StreamReader, asyncio.StreamWriter], Coroutine[Any, Any, None]] | None = None,
               tls: bool = False) -> int:
        """A TCP server for a protocol factory or a stream handler; returns its port."""
        async def serve() -> int:
            context = self.tls if tls else None
            if streams is not None:
                server = await asyncio.start_server(streams, "127.0.0.1", 0, ssl=context)
            else:
                assert factory is not None
                server = await self.loop.create_server(factory, "127.0.0.1", 0, ssl=context)
            self._servers.append(server)
            return int(server.sockets[0].getsockname()[1])

        return self.run(serve())

    def stop(self) -> None:
        async def shut_down() -> None:
            for server in self._servers:
                server.close()
            if self._runner is not None:
                await self._runner.cleanup()
            tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

        self.run(shut_down())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout=10)
        self.loop.close()
