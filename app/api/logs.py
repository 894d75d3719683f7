"""What the service writes in its logs about requests: paths without player ids.

An erasure (``DELETE .../players/{id}``) must leave the id nowhere the service keeps, and
request logs are kept. So a logged path names a player's segment ``{player_id}``
(``/v1/ladders/arena/players/{player_id}/history``) and leaves out the query string, which
may carry ids too (``?player=``, ``?around=``, the GET forms of the quality and matchmaking
queries). Ladders and matches keep their ids: they are the studio's, not a person's.
"""

from __future__ import annotations

import copy
import logging
import re
from typing import Any

#: A path segment that is a player id.
_PLAYER = re.compile(r"(/players/)[^/?#]+")


def redacted_path(path: str) -> str:
    """``path`` without its query string, each player id in it as ``{player_id}``."""
    return _PLAYER.sub(r"\1{player_id}", path.split("?", 1)[0])


class RedactedAccessLog(logging.Filter):
    """uvicorn's access log (``"%s - "%s %s HTTP/%s" %d"``, the path third) with
    :func:`redacted_path` paths."""

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args
        if isinstance(args, tuple) and len(args) >= 3 and isinstance(args[2], str):
            record.args = (*args[:2], redacted_path(args[2]), *args[3:])
        return True


def log_config() -> dict[str, Any]:
    """uvicorn's logging configuration with :class:`RedactedAccessLog` on its access log."""
    from uvicorn.config import LOGGING_CONFIG

    config = copy.deepcopy(LOGGING_CONFIG)
    config.setdefault("filters", {})["redacted"] = {"()": RedactedAccessLog}
    config["handlers"]["access"].setdefault("filters", []).append("redacted")
    return config
