"""Validators and the bodies kept for them: what makes a read of an unchanged ladder cost
one indexed statement and no rendering.

Every read of a ladder carries an ``ETag`` made of the ladder's creation time and version
(:mod:`app.storage.versions`: a counter that every transaction changing the ladder moves as
it commits), so it changes with every write, in every worker and replica at once; a request
whose ``If-None-Match`` names it is answered ``304 Not Modified``. A worker keeps the bodies
it answered (:class:`BodyCache`), by read, arguments and validator.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Hashable
from dataclasses import dataclass
from typing import Any


class BodyCache:
    """The bodies of the reads a worker answered, by read, arguments and validator, the
    least recently used dropped first once they pass ``max_bytes``. A validator changes
    with every change of its ladder, so a body kept is never stale: it is found only by
    a request of the same ladder state. Shared by the worker's threads.

    A ladder's bodies are kept for its newest state only: a body of a newer state drops
    those of the older ones (and one of an older state is not kept), so what a change
    removed (an erased player's card) leaves the worker's memory as soon as it serves the
    ladder again, not when the bytes run out."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self._bodies: OrderedDict[Hashable, bytes] = OrderedDict()
        self._bytes = 0
        #: Per ladder: the state whose bodies are kept, and their keys.
        self._states: dict[str, tuple[tuple[int, int], set[Hashable]]] = {}
        self._ladder_of: dict[Hashable, str] = {}
        self._lock = threading.Lock()

    def get(self, key: Hashable) -> bytes | None:
        with self._lock:
            body = self._bodies.get(key)
            if body is not None:
                self._bodies.move_to_end(key)
            return body

    def put(
        self, key: Hashable, body: bytes, *, ladder_id: str | None = None, tag: str = ""
    ) -> None:
        """Keep ``body`` under ``key``; with ``ladder_id``, as a body of the ladder's state
        named by its validator ``tag``."""
        if len(body) > self.max_bytes:
            return
        with self._lock:
            if ladder_id is not None and not self._newest_state(ladder_id, tag):
                return
            self._drop(key)
            if ladder_id is not None:
                self._states[ladder_id][1].add(key)
                self._ladder_of[key] = ladder_id
            self._bodies[key] = body
            self._bytes += len(body)
            while self._bytes > self.max_bytes:
                self._drop(next(iter(self._bodies)))

    def _newest_state(self, ladder_id: str, tag: str) -> bool:
        """Whether ``tag`` names the ladder's newest state seen; a newer one than before
        drops the bodies of the older."""
        state = state_order(tag)
        kept = self._states.get(ladder_id)
        if kept is not None and kept[0] > state:
            return False
        if kept is None or kept[0] < state:
            for old in list(kept[1]) if kept is not None else ():
                self._drop(old)
            self._states[ladder_id] = (state, set())
        return True

    def _drop(self, key: Hashable) -> None:
        old = self._bodies.pop(key, None)
        if old is not None:
            self._bytes -= len(old)
        ladder_id = self._ladder_of.pop(key, None)
        if ladder_id is not None:
            self._states[ladder_id][1].discard(key)

    def clear(self) -> None:
        with self._lock:
            self._bodies.clear()
            self._states.clear()
            self._ladder_of.clear()
            self._bytes = 0


def state_order(tag: str) -> tuple[int, int]:
    """A ladder validator (``versions.etag``: creation and version in hex) as numbers that
    order its states: a later creation, then a higher version, is newer."""
    created, _, version = tag.strip('"').partition("-")
    try:
        return int(created, 16), int(version, 16)
    except ValueError:
        return (0, 0)


def matches_tag(if_none_match: str | None, tag: str) -> bool:
    """Whether ``If-None-Match`` names ``tag`` (RFC 9110 13.1.2: ``*``, or a list of
    entity tags compared weakly)."""
    if not if_none_match:
        return False
    for candidate in if_none_match.split(","):
        candidate = candidate.strip()
        if candidate == "*" or candidate.removeprefix("W/") == tag:
            return True
    return False


@dataclass(frozen=True, slots=True)
class Answer:
    """A read's validator and body (None: ``304 Not Modified``)."""

    tag: str
    body: bytes | None


# -- the OpenAPI document ----------------------------------------------------------------------

_VALIDATOR_HEADERS = {
    "ETag": {
        "description": "The validator of the ladder's state (every ladder's, for the list): "
        "it changes with every write of the ladder.",
        "schema": {"type": "string"},
    },
    "Cache-Control": {
        "description": "As configured for this read (`RATINGS_CACHE_CONTROL`; `no-cache` "
        "by default).",
        "schema": {"type": "string"},
    },
}
_IF_NONE_MATCH = {
    "name": "If-None-Match",
    "in": "header",
    "required": False,
    "description": "An `ETag` of an earlier answer (or a list, or `*`): `304 Not Modified` "
    "while it is the ladder's current validator.",
    "schema": {"type": "string"},
}


def document_validators(schema: dict[str, Any], paths_of_reads: list[str]) -> dict[str, Any]:
    """Document in the OpenAPI ``schema`` what every read (the GETs of ``paths_of_reads``)
    carries and answers: ``ETag`` and ``Cache-Control``, ``If-None-Match`` and ``304``."""
    paths = schema.get("paths", {})
    for path in paths_of_reads:
        operation = paths.get(path, {}).get("get")
        if operation is None:
            continue
        parameters = operation.setdefault("parameters", [])
        if all(p.get("name") != "If-None-Match" for p in parameters):
            parameters.append(_IF_NONE_MATCH)
        responses = operation.setdefault("responses", {})
        responses.setdefault("200", {"description": "Successful Response"})["headers"] = (
            _VALIDATOR_HEADERS
        )
        responses["304"] = {
            "description": "Not Modified: `If-None-Match` names the current validator; no body.",
            "headers": _VALIDATOR_HEADERS,
        }
    return schema
