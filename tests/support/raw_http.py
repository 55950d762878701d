"""Raw HTTP/1.1 servers on 127.0.0.1 for the tests of connectors/http1.py: each writes exactly the bytes a
test gives it, so every framing, cut and timing a real server might produce can be played."""

from __future__ import annotations

import asyncio
import contextlib
import ssl
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

import trustme


@dataclass
class Request:
    head: bytes
    body: bytes
    connection: int  # the server's count of the connection it came on, from 1

    @property
    def line(self) -> bytes:
        return self.head.split(b"\r\n", 1)[0]


# Answers one request on its connection's writer; returns whether the connection stays open, or None to
# answer nothing more and wait for the client to close it.
Handler = Callable[[Request, asyncio.StreamWriter], Awaitable[bool | None]]


async def settle() -> None:
    """Let the loop pass bytes just written on loopback to the client's reader before the next ones."""
    for _ in range(5):
        await asyncio.sleep(0)


def answer(*pieces: bytes, keep: bool | None = True) -> Handler:
    """A handler writing `pieces` one at a time, each reaching the client before the next."""
    async def handle(_: Request, writer: asyncio.StreamWriter) -> bool | None:
        for piece in pieces:
            writer.write(piece)
            await writer.drain()
            await settle()
        return keep
    return handle


@dataclass
class Server:
    """An HTTP/1.1 server that reads each request (head and Content-Length body) and lets `handler`
    answer it. `close_idle_after` requests on a connection, it closes that connection as the next
    request starts to arrive, unread: a server closing an idle keep-alive connection at that moment."""

    handler: Handler
    tls: ssl.SSLContext | None = None
    close_idle_after: int | None = None
    requests: list[Request] = field(default_factory=list)
    connections: int = 0
    gone: dict[int, asyncio.Event] = field(default_factory=dict)  # set when the client closed connection n
    ended: dict[int, asyncio.Event] = field(default_factory=dict)  # set when connection n is closed either way
    arrived: asyncio.Event = field(default_factory=asyncio.Event)  # set at each request
    url: str = ""

    async def __aenter__(self) -> Server:
        self._tasks: set[asyncio.Task[None]] = set()
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0, ssl=self.tls)
        port = self._server.sockets[0].getsockname()[1]
        self.url = f"{'https' if self.tls else 'http'}://127.0.0.1:{port}"
        return self

    async def __aexit__(self, *exc: object) -> None:
        self._server.close()
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        # the test is over; ending quietly spares asyncio's "unhandled exception" report
        with contextlib.suppress(asyncio.CancelledError):
            await self._converse(reader, writer)

    async def _converse(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        number = self.connections
        self.gone[number] = gone = asyncio.Event()
        self.ended[number] = ended = asyncio.Event()
        served = 0
        try:
            while True:
                if served == self.close_idle_after:
                    await reader.read(1)
                    break
                try:
                    head = await reader.readuntil(b"\r\n\r\n")
                except asyncio.IncompleteReadError:
                    gone.set()
                    break
                length = next((int(line.split(b":")[1]) for line in head.split(b"\r\n")
                               if line.lower().startswith(b"content-length:")), 0)
                request = Request(head, await reader.readexactly(length), number)
                self.requests.append(request)
                self.arrived.set()
                served += 1
                keep = await self.handler(request, writer)
                if keep is None:
                    if not await reader.read():
                        gone.set()
                    break
                if not keep:
                    break
        except (ConnectionError, asyncio.IncompleteReadError):
            gone.set()
        finally:
            writer.close()
            with contextlib.suppress(ConnectionError, ssl.SSLError):
                await writer.wait_closed()
            ended.set()


def tls_server(ca: trustme.CA) -> ssl.SSLContext:
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("127.0.0.1").configure_cert(context)
    return context
