"""Watching one mail folder on its own IMAP connection: what arrived after a watermark, and IMAP IDLE
(RFC 2177) until the server pushes a change.

aioimaplib speaks IDLE (`idle_start`, `wait_server_push`, `idle_done`); this module adds the cycle a
watcher needs: EXAMINE the folder (read-only: watching marks nothing seen), read its UIDVALIDITY and
UIDNEXT, search the UIDs after the last one handled, and only when there are none, IDLE until a push or
`timeout` (the caller's reconcile interval, well under the 29 minutes a server keeps an IDLE open).
A server without IDLE is polled: the cycle then sleeps instead.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
from dataclasses import dataclass
from datetime import datetime, timedelta
from email.utils import parsedate_to_datetime

import aioimaplib

from connectors.imap import ImapConnection, mailbox, searched, server_text
from connectors.mailerrors import EmailError

# Filters and the event's text need the headers and the start of the body, never a whole attachment.
PREFIX_BYTES = 65_536
_UIDVALIDITY = re.compile(rb"UIDVALIDITY (\d+)")
_UIDNEXT = re.compile(rb"UIDNEXT (\d+)")
_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")
_UID = re.compile(rb"UID (\d+)")
_INTERNALDATE = re.compile(rb'INTERNALDATE "\s*([^"]+)"')


@dataclass(frozen=True)
class FolderCheck:
    """What one look at a folder found: its UIDVALIDITY, its highest UID, and the UIDs after the watermark
    (all of them when the UIDVALIDITY changed or there was no watermark: the caller re-baselines)."""

    uidvalidity: int
    highest: int
    new: list[int]


class FolderWatch:
    """One folder watched on `conn`, a connection of its own (an IDLE holds the connection)."""

    def __init__(self, conn: ImapConnection, folder: str) -> None:
        self.conn = conn
        self.folder = folder
        self._idling: aioimaplib.IMAP4 | None = None  # the connection while an IDLE is open on it
        self._idle_over = asyncio.Event()

    async def check(self, uidvalidity: int | None, last_uid: int | None, since: datetime | None = None) -> FolderCheck:
        """The folder's state and the UIDs after `last_uid` under `uidvalidity` (none asked when either is
        None or the folder's UIDVALIDITY differs). With no `last_uid` and a `since`, the UIDs of messages
        that arrived on or after the day before `since` (IMAP's SEARCH SINCE counts whole days, in the
        server's zone): the caller keeps those whose `arrivals` are not older than `since`."""

        async def op(imap: aioimaplib.IMAP4) -> FolderCheck:
            current, uidnext = await self._examine(imap)
            highest = uidnext - 1 if uidnext else None
            if last_uid is None and since is not None:
                d = since - timedelta(days=1)  # not strftime's %b below: it follows the locale
                response = await imap.uid_search(f"SINCE {d.day}-{_MONTHS[d.month - 1]}-{d.year}", charset=None)
                if response.result != "OK":
                    raise EmailError(f"{self.conn.where} refused the search: {server_text(response)}", remote=True)
                new = sorted(searched(response.lines))
                return FolderCheck(current, highest or await self._highest(imap), new)
            if uidvalidity != current or last_uid is None:
                return FolderCheck(current, highest or await self._highest(imap), [])
            response = await imap.uid_search(f"UID {last_uid + 1}:*", charset=None)
            if response.result != "OK":
                raise EmailError(f"{self.conn.where} refused the search: {server_text(response)}", remote=True)
            # "n:*" always matches the highest UID, even one below n: keep only the new.
            new = sorted(u for u in searched(response.lines) if u > last_uid)
            return FolderCheck(current, max([last_uid, *new]), new)

        return await self.conn.run(op)

    async def fetch(self, uids: list[int]) -> dict[int, bytes]:
        """The headers and the first PREFIX_BYTES of each message, by UID (a message gone is left out)."""

        async def op(imap: aioimaplib.IMAP4) -> dict[int, bytes]:
            await self._examine(imap)
            found = await self.conn.fetch(imap, uids, f"BODY.PEEK[]<0.{PREFIX_BYTES}>")
            return {uid: raw for uid, (raw, _unseen) in found.items()}

        return await self.conn.run(op)

    async def arrivals(self, uids: list[int]) -> dict[int, datetime]:
        """Each message's INTERNALDATE (when the server received it), by UID (a message gone is left out)."""

        async def op(imap: aioimaplib.IMAP4) -> dict[int, datetime]:
            await self._examine(imap)
            response = await imap.uid("fetch", ",".join(map(str, uids)), "(UID INTERNALDATE)")
            if response.result != "OK":
                raise EmailError(f"{self.conn.where} refused to fetch: {server_text(response)}", remote=True)
            out = {}
            for line in response.lines:
                uid, date = _UID.search(bytes(line)), _INTERNALDATE.search(bytes(line))
                if uid and date:  # "07-Dec-2026 06:00:00 +0000" is RFC 5322's date once the dashes go
                    out[int(uid.group(1))] = parsedate_to_datetime(date.group(1).decode().replace("-", " ", 2))
            return out

        return await self.conn.run(op) if uids else {}

    async def wait(self, timeout: float) -> bool:
        """IDLE on the folder until the server pushes a change (True) or `timeout` seconds pass (False).
        Without IDLE on the server, sleep `timeout` and say True, so the caller looks again."""

        async def op(imap: aioimaplib.IMAP4) -> bool:
            if not imap.has_capability("IDLE"):
                await asyncio.sleep(timeout)
                return True
            await self._examine(imap)
            idle = await imap.idle_start(timeout=timeout)
            self._idling, self._idle_over = imap, asyncio.Event()
            try:
                pushed = await imap.wait_server_push(timeout=timeout + self.conn.timeout)
            finally:
                self._idling = None
                imap.idle_done()
                try:
                    await asyncio.wait_for(idle, self.conn.timeout)
                finally:
                    self._idle_over.set()
            return pushed != aioimaplib.STOP_WAIT_SERVER_PUSH

        return await self.conn.run(op, retry=False)

    async def close(self) -> None:
        """End an open IDLE (DONE, so the server answers the LOGOUT that follows), then log out."""
        imap = self._idling
        if imap is not None:
            await imap.stop_wait_server_push()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._idle_over.wait(), self.conn.timeout)
        await self.conn.close()

    async def _examine(self, imap: aioimaplib.IMAP4) -> tuple[int, int | None]:
        response = await imap.examine(mailbox(self.folder))
        if response.result != "OK":
            raise EmailError(f"cannot open folder {self.folder!r} on {self.conn.where}: {server_text(response)}",
                             remote=True)
        imap.protocol.state = aioimaplib.SELECTED  # aioimaplib records SELECT's new state, not EXAMINE's
        text = b" ".join(bytes(x) for x in response.lines if isinstance(x, (bytes, bytearray)))
        validity, uidnext = _UIDVALIDITY.search(text), _UIDNEXT.search(text)
        if validity is None:
            raise EmailError(f"{self.conn.where} gave no UIDVALIDITY for {self.folder!r}", remote=True)
        return int(validity.group(1)), int(uidnext.group(1)) if uidnext else None

    async def _highest(self, imap: aioimaplib.IMAP4) -> int:
        response = await imap.uid_search("ALL", charset=None)
        if response.result != "OK":
            raise EmailError(f"{self.conn.where} refused the search: {server_text(response)}", remote=True)
        return max(searched(response.lines), default=0)
