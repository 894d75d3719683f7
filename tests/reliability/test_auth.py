"""Guarantee 6, auth: a missing or unknown key is a 401, too small a scope a 403, a revoked
key is refused from the next request on by every worker, the database holds only hashes,
and no key ever reaches a log line."""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable
from pathlib import Path

import pytest
from sqlalchemy import text

from app.services import auth
from app.storage.engine import get_engine, session_factory
from tests.reliability.conftest import Server, create_ladder

MATCH = {"teams": [["a"], ["b"]]}
WRITE_ROUTE = ("POST", "/v1/ladders/arena/matches", MATCH)
ADMIN_ROUTES = [
    ("POST", "/v1/ladders", {"id": "other", "algorithm": "elo"}),
    ("PUT", "/v1/ladders/arena/players/a", {"mu": 30.0, "sigma": 5.0}),
    ("DELETE", "/v1/ladders/arena/matches/first", None),
]


def _revoke(database_url: str, name: str) -> None:
    session = session_factory(get_engine(database_url))()
    try:
        auth.revoke_key(session, name_or_prefix=name)
        session.commit()
    finally:
        session.close()


def test_keys_scopes_revocation_and_logs(
    start_server: Callable[..., Server],
    make_key: Callable[[str, str], str],
    database_url: str,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    keys = {scope: make_key(scope, f"{scope}-key") for scope in auth.SCOPES}
    log = tmp_path / "server.log"
    # Two workers: a revocation must reach both at once. Debug logs, access log on.
    server = start_server(workers=2, log_path=log, RATINGS_LOG_LEVEL="debug")
    with server.client() as admin:
        create_ladder(admin, "arena")
        first = {**MATCH, "match_id": "first"}
        assert admin.post("/v1/ladders/arena/matches", json=first).status_code == 201

    with server.client() as http:

        def status(method: str, path: str, body: object, key: str | None) -> int:
            headers = {"Authorization": f"Bearer {key}"} if key is not None else {}
            if key is None:
                http.headers.pop("Authorization", None)
            return http.request(method, path, json=body, headers=headers).status_code

        forged = keys["admin"][:-4] + "AAAA"
        for method, path, body in [WRITE_ROUTE, *ADMIN_ROUTES]:
            assert status(method, path, body, None) == 401, path
            assert status(method, path, body, forged) == 401, path
            assert status(method, path, body, "not-a-key") == 401, path
            assert status(method, path, body, keys["read"]) == 403, path
        for method, path, body in ADMIN_ROUTES:
            assert status(method, path, body, keys["write"]) == 403, path
        assert status(*WRITE_ROUTE, keys["write"]) == 201
        assert status("GET", "/v1/ladders/arena/leaderboard", None, None) == 200  # reads open

        # Revoked: refused by the very next request, on whichever worker takes it.
        _revoke(database_url, "write-key")
        for _ in range(8):
            assert status(*WRITE_ROUTE, keys["write"]) == 401
        assert status(*WRITE_ROUTE, keys["admin"]) == 201

    with get_engine(database_url).connect() as connection:
        rows = connection.execute(text("SELECT * FROM api_keys")).mappings().all()
    stored = " ".join(str(value) for row in rows for value in row.values())
    for key in keys.values():
        secret = key.split("_", 2)[2]
        assert secret not in stored
        assert hashlib.sha256(key.encode()).hexdigest() in stored

    server.stop()
    written = log.read_text(encoding="utf-8", errors="replace") + caplog.text
    assert "GET /v1/ladders/arena/leaderboard" in written  # the access log was captured
    for key in [*keys.values(), forged]:
        assert key.split("_", 2)[2] not in written
