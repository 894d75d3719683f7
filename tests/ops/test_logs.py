"""What the service logs about requests names no player: an erased id must not live on in
the access log."""

from __future__ import annotations

import io
import logging
import logging.config

import pytest

from app.api.logs import log_config, redacted_path


@pytest.mark.parametrize(
    ("path", "logged"),
    [
        ("/v1/ladders/arena/players/fw00064", "/v1/ladders/arena/players/{player_id}"),
        (
            "/v1/ladders/arena/players/a%20b/history?limit=5",
            "/v1/ladders/arena/players/{player_id}/history",
        ),
        ("/console/ladders/arena/players/fw00064", "/console/ladders/arena/players/{player_id}"),
        ("/v1/ladders/arena/matches?player=fw00064", "/v1/ladders/arena/matches"),
        ("/v1/ladders/arena/quality?teams=fw00064,b", "/v1/ladders/arena/quality"),
        ("/v1/ladders/arena/matches/g-1", "/v1/ladders/arena/matches/g-1"),
        ("/healthz", "/healthz"),
    ],
)
def test_a_logged_path_names_no_player(path: str, logged: str) -> None:
    assert redacted_path(path) == logged


def test_the_served_access_log_names_no_player() -> None:
    config = log_config()
    stream = io.StringIO()
    config["handlers"]["access"]["stream"] = stream
    logging.config.dictConfig(config)
    try:
        access = logging.getLogger("uvicorn.access")
        # What uvicorn's HTTP protocols log for every request.
        access.info(
            '%s - "%s %s HTTP/%s" %d',
            "127.0.0.1:5000",
            "DELETE",
            "/v1/ladders/er-s1/players/fw00064?x=fw00064",
            "1.1",
            200,
        )
    finally:
        logging.config.dictConfig({"version": 1, "disable_existing_loggers": False})
    line = stream.getvalue()
    assert '"DELETE /v1/ladders/er-s1/players/{player_id} HTTP/1.1" 200' in line
    assert "fw00064" not in line
