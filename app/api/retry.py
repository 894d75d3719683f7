"""Run a request again when its transaction lost a deadlock or a serialization conflict.

PostgreSQL aborts one of two transactions that wait on each other (SQLSTATE 40P01) and, at
stricter isolation levels, a transaction whose reads went stale (40001); SQLite answers
"database is locked" when a writer waited longer than the busy timeout. Each time the whole
transaction was rolled back, so nothing of the request was applied and running it again
from the start is safe, even for a POST without an idempotency key.

The service takes a match's row locks in one ordered statement, so deadlocks should not
happen at all (the reliability tests measure none); this is the safety net. A SQLAlchemy
``handle_error`` listener (``app.storage.retry``) marks the request when such an error is
raised in it (the mark lives in a context variable, which the worker thread running the
route inherits); when the answer is then the 503 the error handler makes of it, this
middleware throws that answer away and runs the request again with the same body, at most
``MAX_ATTEMPTS`` times in all, after a short random pause. Every run again is counted in
``ratings_transaction_retries_total`` by reason.
"""

from __future__ import annotations

import asyncio
import random

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.storage.retry import BACKOFF_S, MAX_ATTEMPTS, RETRIES
from app.storage.retry import marks as _marks


class _Run:
    """One run of the request: hands it the body, and holds back a 503 due to a retryable
    error (to be thrown away if the request runs again)."""

    def __init__(self, body: bytes, receive: Receive, send: Send) -> None:
        self.body = body
        self.receive = receive
        self.send = send
        self.mark: dict[str, str] = {}
        self.held: list[Message] = []
        self.passing = False
        self.delivered = False

    async def replay(self) -> Message:
        if not self.delivered:
            self.delivered = True
            return {"type": "http.request", "body": self.body, "more_body": False}
        return await self.receive()

    async def capture(self, message: Message) -> None:
        if self.passing:
            await self.send(message)
        elif message["type"] == "http.response.start":
            if message["status"] == 503 and "reason" in self.mark:
                self.held.append(message)
            else:
                self.passing = True
                await self.send(message)
        elif self.held:
            self.held.append(message)
        else:
            await self.send(message)


class TransactionRetryMiddleware:
    """Pure ASGI middleware: run the request again after a retryable database error."""

    def __init__(self, app: ASGIApp, max_attempts: int = MAX_ATTEMPTS) -> None:
        self.app = app
        self.max_attempts = max_attempts

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        body = b""
        while True:  # the whole body, to hand it to every run
            message = await receive()
            if message["type"] != "http.request":
                return  # the client went away
            body += message.get("body", b"")
            if not message.get("more_body", False):
                break

        for attempt in range(1, self.max_attempts + 1):
            run = _Run(body, receive, send)
            token = _marks.set(run.mark)
            try:
                await self.app(scope, run.replay, run.capture)
            finally:
                _marks.reset(token)
            if not run.held:
                return
            if attempt == self.max_attempts:
                for message in run.held:  # out of runs: the 503 goes out as it was
                    await send(message)
                return
            RETRIES.labels(reason=run.mark["reason"]).inc()
            await asyncio.sleep(random.uniform(0.0, BACKOFF_S * attempt))
