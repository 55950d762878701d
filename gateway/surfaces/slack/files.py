"""Files shared in a message, downloaded into the data directory before the inbound is recorded.

Slack serves a file's `url_private_download` to requests carrying the bot token (scope files:read). The
token is only ever sent to the Web API's own host or its subdomains (files.slack.com for slack.com), never
to a URL merely named in an event. A file that cannot be had (too large, gone, forbidden) is listed
without a path; a network or server error propagates, so the event is not acknowledged and Slack retries.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import aiohttp

from gateway.surfaces.files import safe_name, save
from store.records import Attachment

log = logging.getLogger(__name__)

MAX_BYTES = 20 * 1024 * 1024


class FileFetcher:
    """Downloads a message's files to `root/<channel>/<ts>-<name>`."""

    def __init__(self, token: str, api_base_url: str, root: Path) -> None:
        self._token = token
        self._api_host = urlsplit(api_base_url).hostname or ""
        self._root = root

    async def attachments(self, event: dict[str, Any]) -> list[Attachment]:
        """The event's files as attachments, each downloaded when it can be."""
        files = [f for f in event.get("files") or [] if f.get("mode") != "tombstone"]  # tombstone: deleted
        if not files:
            return []
        found = []
        async with aiohttp.ClientSession() as session:
            for index, file in enumerate(files):
                name = safe_name(str(file.get("name") or file.get("title") or file.get("id") or "file"))
                described = Attachment(name=name, mime_type=str(file.get("mimetype") or "application/octet-stream"),
                                       size=int(file.get("size") or 0))
                path = self._root / str(event["channel"]) / f"{event['ts']}-{index}-{name}"
                found.append(await self._download(session, file, described, path))
        return found

    async def _download(self, session: aiohttp.ClientSession, file: dict[str, Any], described: Attachment,
                        path: Path) -> Attachment:
        url = str(file.get("url_private_download") or file.get("url_private") or "")
        host = urlsplit(url).hostname or ""
        if not url or described.size > MAX_BYTES or not (host == self._api_host or host.endswith(f".{self._api_host}")):
            log.warning("slack_file_skipped file=%s size=%d host=%s", file.get("id"), described.size, host)
            return described
        async with session.get(url, headers={"Authorization": f"Bearer {self._token}"}) as response:
            if 400 <= response.status < 500:
                log.warning("slack_file_unavailable file=%s status=%d", file.get("id"), response.status)
                return described
            response.raise_for_status()
            # Without files:read Slack answers with its HTML sign-in page instead of the file.
            if response.content_type == "text/html" and described.mime_type != "text/html":
                log.warning("slack_file_refused file=%s hint=missing_scope_files_read", file.get("id"))
                return described
            data = bytearray()
            async for chunk in response.content.iter_chunked(1 << 16):
                data.extend(chunk)
                if len(data) > MAX_BYTES:  # the announced size was wrong
                    log.warning("slack_file_skipped file=%s size>%d", file.get("id"), MAX_BYTES)
                    return described
        await save(path, bytes(data))
        return described.model_copy(update={"size": len(data), "path": str(path)})
