"""Through PgBouncer in transaction pooling (Debian's ``pgbouncer``, started here on a free
port in front of the test PostgreSQL): with ``RATINGS_DATABASE_POOLER=transaction`` the
service starts and runs unchanged (no startup parameter the pooler refuses, no prepared
statement, the statement timeout set in each transaction), and two instances recording
into one ladder at once lose and reorder nothing: the ratings are the replay of the
ladder's matches in their order."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from fastapi.testclient import TestClient
from sqlalchemy import text
from sqlalchemy.engine import make_url

from app.config import get_settings
from app.storage.engine import dispose_engines, get_engine
from tests.ops.test_cli import free_port
from tests.service.oracle import core_replay, random_matches

PGBOUNCER = shutil.which("pgbouncer") or "/usr/sbin/pgbouncer"

pytestmark = [
    pytest.mark.postgres,
    pytest.mark.skipif(
        not os.path.exists(PGBOUNCER), reason="no pgbouncer (apt-get install pgbouncer)"
    ),
]


@pytest.fixture
def pooled_url(database_url: str) -> Iterator[str]:
    """The test database through a PgBouncer of its own, transaction pooling (run as the
    ``postgres`` user from a folder it can read)."""
    if not database_url.startswith("postgresql"):
        pytest.skip("PgBouncer stands in front of PostgreSQL")
    server = make_url(database_url)
    port = free_port()
    folder = Path(tempfile.mkdtemp(prefix="ratings-pgbouncer-"))
    folder.chmod(0o755)
    (folder / "users.txt").write_text(f'"{server.username}" ""\n')
    (folder / "pgbouncer.ini").write_text(
        "[databases]\n"
        f"* = host={server.host} port={server.port or 5432}\n"
        "[pgbouncer]\n"
        f"listen_addr = 127.0.0.1\nlisten_port = {port}\n"
        f"auth_type = trust\nauth_file = {folder / 'users.txt'}\n"
        "pool_mode = transaction\nmax_client_conn = 500\ndefault_pool_size = 8\n"
        f"unix_socket_dir =\nlogfile = {folder / 'pgbouncer.log'}\n"
    )
    shutil.chown(folder, "postgres")
    for file in folder.iterdir():
        shutil.chown(file, "postgres")
    bouncer = subprocess.Popen(
        ["su", "postgres", "-c", f"exec {PGBOUNCER} {folder / 'pgbouncer.ini'}"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    url = server.set(port=port).render_as_string(hide_password=False)
    deadline = time.monotonic() + 20
    while True:
        try:
            psycopg.connect(url, connect_timeout=2).close()
            break
        except psycopg.OperationalError:
            assert bouncer.poll() is None, bouncer.stdout.read() if bouncer.stdout else ""
            assert time.monotonic() < deadline, "pgbouncer did not come up"
            time.sleep(0.1)
    try:
        yield url
    finally:
        dispose_engines()
        bouncer.terminate()
        bouncer.wait(timeout=10)
        shutil.rmtree(folder, ignore_errors=True)


def _app(url: str, monkeypatch: pytest.MonkeyPatch, admin_key: str) -> TestClient:
    monkeypatch.setenv("RATINGS_DATABASE_URL", url)
    monkeypatch.setenv("RATINGS_DATABASE_POOLER", "transaction")
    get_settings.cache_clear()
    from app.main import create_app

    client = TestClient(create_app(), raise_server_exceptions=False)
    client.headers["Authorization"] = f"Bearer {admin_key}"
    return client


def test_the_pooler_refuses_what_the_service_no_longer_sends(pooled_url: str) -> None:
    with pytest.raises(psycopg.OperationalError, match="unsupported startup parameter"):
        psycopg.connect(pooled_url, options="-c statement_timeout=1000").close()


def test_two_instances_record_through_pgbouncer_and_lose_nothing(
    pooled_url: str, admin_key: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RATINGS_STATEMENT_TIMEOUT_MS", "7000")
    first = _app(pooled_url, monkeypatch, admin_key)
    second = _app(pooled_url, monkeypatch, admin_key)
    bodies = random_matches(seed=21, count=80, players=10)
    with first, second:
        made = first.post("/v1/ladders", json={"id": "pooled", "algorithm": "trueskill"})
        assert made.status_code == 201, made.text
        failures: list[Any] = []

        def record(client: TestClient, part: list[dict[str, Any]]) -> None:
            for body in part:
                response = client.post("/v1/ladders/pooled/matches", json=body)
                if response.status_code != 201:
                    failures.append(response.text)

        threads = [
            threading.Thread(target=record, args=(first, bodies[0::2])),
            threading.Thread(target=record, args=(second, bodies[1::2])),
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert failures == []
        # Reads, a snapshot export and a void, through the pooler too.
        board = second.get("/v1/ladders/pooled/leaderboard", params={"limit": 100})
        assert board.status_code == 200 and len(board.json()["entries"]) == 10
        exported = first.get("/v1/ladders/pooled/export/matches")
        assert exported.status_code == 200
        lines = [json.loads(line) for line in exported.text.splitlines()]
        assert sorted(line["match_id"] for line in lines) == sorted(b["match_id"] for b in bodies)
        ratings = {
            r["player_id"]: (r["mu"], r["sigma"])
            for r in map(json.loads, first.get("/v1/ladders/pooled/export/ratings").text.split())
        }
        params = first.get("/v1/ladders/pooled").json()["params"]
    # The ratings are the replay of the matches in the order the ladder holds them.
    by_id = {b["match_id"]: b for b in bodies}
    replayed = core_replay("trueskill", params, [by_id[line["match_id"]] for line in lines])
    assert ratings == {p: (r.mu, r.sigma) for p, r in replayed.ratings.items()}
    # Each transaction ran with the statement timeout, set in it.
    engine = get_engine(pooled_url)
    with engine.begin() as connection:
        assert connection.scalar(text("SHOW statement_timeout")) == "7s"
    get_settings.cache_clear()
