"""uvicorn's HTTP protocol with a bound on reading a request's head.

uvicorn bounds an idle keep-alive connection (``--timeout-keep-alive``) but not a request
whose head (request line and headers) trickles in: a client that sends a byte now and then
holds its connection, and its memory, as long as it likes (thousands of them fill a
worker's connections). This protocol closes a connection whose request head has not
arrived whole within ``RATINGS_HEADER_TIMEOUT_S`` of the request's first byte, or of the
connection's start. The body has its own bound (``app.api.bodies``). ``ratings serve``
runs uvicorn with it (``http=...``).
"""

from __future__ import annotations

import asyncio
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from app.config import get_settings


class BoundedHttpToolsProtocol(HttpToolsProtocol):
    """:class:`HttpToolsProtocol` whose request heads must arrive within a bound."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._head_timeout_s = get_settings().header_timeout_s
        self._head_timer: asyncio.TimerHandle | None = None

    def _arm(self) -> None:
        self._disarm()
        self._head_timer = self.loop.call_later(self._head_timeout_s, self._head_late)

    def _disarm(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _head_late(self) -> None:
        self._head_timer = None
        if not self.transport.is_closing():
            self.transport.close()

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm()

    def on_message_begin(self) -> None:
        super().on_message_begin()
        if self._head_timer is None:
            self._arm()

    def on_headers_complete(self) -> None:
        self._disarm()
        super().on_headers_complete()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def on_response_complete(self) -> None:
        # Idle until the next request: uvicorn's keep-alive timeout bounds that wait.
        self._disarm()
        super().on_response_complete()
