"""The ``ratings`` command: migrate, keys create/list/revoke, and a live ``serve``."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from app.cli.main import main
from app.config import get_settings
from app.services import auth
from app.storage.engine import (
    dispose_engines,
    get_engine,
    migration_heads,
    schema_is_current,
    session_factory,
)

KEY = re.compile(r"rk_[0-9a-f]{8}_[A-Za-z0-9_-]{43}")
#: The newest schema revision, as the commands name it.
HEAD = ", ".join(sorted(migration_heads()))


@pytest.fixture
def fresh_url(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """An empty SQLite database named by the settings (not migrated)."""
    url = f"sqlite:///{tmp_path / 'cli.db'}"
    monkeypatch.setenv("RATINGS_DATABASE_URL", url)
    get_settings.cache_clear()
    yield url
    dispose_engines()
    get_settings.cache_clear()


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    status = main(list(argv))
    out, err = capsys.readouterr()
    return status, out, err


class TestMigrate:
    def test_migrate_to_head(self, fresh_url: str, capsys: pytest.CaptureFixture[str]) -> None:
        assert not schema_is_current(get_engine(fresh_url))
        status, out, err = run(capsys, "migrate")
        assert status == 0 and out == ""
        assert err == f"database {fresh_url}: schema migrated from empty to {HEAD}\n"
        assert schema_is_current(get_engine(fresh_url))
        status, _, err = run(capsys, "migrate")  # again: nothing to do
        assert status == 0 and err == f"database {fresh_url}: schema at {HEAD} already\n"

    def test_a_revision_older_than_the_database_is_refused(
        self, fresh_url: str, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """migrate only goes up: a revision older than the database's says so and changes
        nothing, instead of printing success."""
        status, _, err = run(capsys, "migrate", "--revision", "0005")
        assert status == 0
        assert err == f"database {fresh_url}: schema migrated from empty to 0005\n"
        assert not schema_is_current(get_engine(fresh_url))
        assert run(capsys, "migrate")[0] == 0
        status, _, err = run(capsys, "migrate", "--revision", "0004")
        assert status == 1
        assert err == (
            f"ratings: the database {fresh_url} is at schema {HEAD}, newer than 0004: "
            "migrate only goes up, nothing was done\n"
        )
        assert schema_is_current(get_engine(fresh_url))

    def test_database_url_option(
        self, tmp_path: Path, fresh_url: str, capsys: pytest.CaptureFixture[str]
    ) -> None:
        other = f"sqlite:///{tmp_path / 'other.db'}"
        assert run(capsys, "--database-url", other, "migrate")[0] == 0
        assert schema_is_current(get_engine(other))
        assert not schema_is_current(get_engine(fresh_url))

    def test_unreachable_database_is_a_short_error(
        self, fresh_url: str, capsys: pytest.CaptureFixture[str]
    ) -> None:
        url = "postgresql://ratings:hunter2@127.0.0.1:1/none"
        status, out, err = run(capsys, "--database-url", url, "migrate")
        assert status == 1 and out == ""
        assert err.startswith(
            "ratings: the database postgresql://ratings:***@127.0.0.1:1/none is unreachable "
            "or refused: "
        )
        assert "hunter2" not in err and "Traceback" not in err

    def test_keys_need_a_migrated_database(
        self, fresh_url: str, capsys: pytest.CaptureFixture[str]
    ) -> None:
        status, out, err = run(capsys, "keys", "list")
        assert status == 1 and out == ""
        assert err == (
            f"ratings: no database at {fresh_url}; `ratings migrate` creates it "
            "(and `ratings serve` before it serves)\n"
        )


class TestKeys:
    @pytest.fixture(autouse=True)
    def _migrated(self, db_url: str, capsys: pytest.CaptureFixture[str]) -> None:
        assert run(capsys, "migrate")[0] == 0  # already at head: nothing to do

    def test_create_prints_the_key_alone(
        self, db_url: str, capsys: pytest.CaptureFixture[str]
    ) -> None:
        status, out, err = run(capsys, "keys", "create", "--scope", "write", "--name", "game")
        assert status == 0
        assert KEY.fullmatch(out.rstrip("\n")) and out.count("\n") == 1
        key = out.strip()
        assert key not in err and "game" in err
        session = session_factory(get_engine(db_url))()
        row = auth.authorize(session, key, "write")
        (info,) = [k for k in auth.list_keys(session) if k.prefix == row.prefix]
        session.close()
        assert row.scope == "write" and info.name == "game"

    def test_bad_scope_is_a_usage_error(self, capsys: pytest.CaptureFixture[str]) -> None:
        with pytest.raises(SystemExit) as exit_info:
            main(["keys", "create", "--scope", "root", "--name", "x"])
        assert exit_info.value.code == 2
        assert capsys.readouterr().out == ""

    def test_list_and_revoke(self, capsys: pytest.CaptureFixture[str]) -> None:
        key = run(capsys, "keys", "create", "--scope", "read", "--name", "board")[1].strip()
        prefix = auth.key_prefix(key)
        run(capsys, "keys", "create", "--scope", "admin", "--name", "ops")

        status, out, _ = run(capsys, "keys", "list")
        assert status == 0
        lines = out.splitlines()
        header = ["NAME", "SCOPE", "PREFIX", "CREATED", "LAST", "USED", "REVOKED", "LADDERS"]
        assert lines[0].split() == header
        assert lines[1].split()[:3] == ["board", "read", prefix]
        assert lines[1].split()[-3:] == ["-", "-", "all"]
        assert key not in out and auth.hash_key(key) not in out

        status, _, err = run(capsys, "keys", "revoke", prefix)
        assert status == 0 and "board" in err

        listed = json.loads(run(capsys, "keys", "list", "--json")[1])
        first = listed[0]
        assert (first["name"], first["scope"], first["prefix"]) == ("board", "read", prefix)
        assert listed[0]["revoked_at"] is not None and listed[1]["revoked_at"] is None
        assert set(listed[0]) == {
            "name",
            "scope",
            "prefix",
            "created_at",
            "last_used_at",
            "revoked_at",
            "ladders",
        }

        status, _, err = run(capsys, "keys", "revoke", "board")
        assert status == 1 and "no active key" in err
        assert run(capsys, "keys", "revoke", "ops")[0] == 0


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def ratings_command() -> list[str]:
    script = Path(sys.executable).with_name("ratings")
    return [str(script)] if script.exists() else [sys.executable, "-m", "app.cli"]


def get(url: str, key: str | None = None) -> tuple[int, str]:
    request = urllib.request.Request(url)
    if key:
        request.add_header("Authorization", f"Bearer {key}")
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


def post_chunked(url: str, chunks: list[bytes]) -> tuple[int, str]:
    """POST ``chunks`` with ``Transfer-Encoding: chunked`` (no Content-Length).

    A server that refuses an oversized body answers before reading the rest and
    closes the connection, so a later chunk may meet a closed socket: the sender
    stops there and reads the answer that is already on its way back.
    """
    parsed = urllib.parse.urlsplit(url)
    head = (
        f"POST {parsed.path} HTTP/1.1\r\nHost: {parsed.hostname}:{parsed.port}\r\n"
        "Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
    ).encode()
    body = b"".join(b"%X\r\n%s\r\n" % (len(chunk), chunk) for chunk in chunks) + b"0\r\n\r\n"
    with socket.create_connection((parsed.hostname, parsed.port), timeout=10) as sock:
        try:
            sock.sendall(head)
            for start in range(0, len(body), 1024):
                sock.sendall(body[start : start + 1024])
        except (BrokenPipeError, ConnectionResetError):
            pass
        received = b""
        try:
            while b"\r\n\r\n" not in received or not response_complete(received):
                data = sock.recv(65536)
                if not data:
                    break
                received += data
        except ConnectionResetError:
            pass
    header, _, payload = received.partition(b"\r\n\r\n")
    status = int(header.split(b" ", 2)[1])
    return status, payload.decode()


def response_complete(received: bytes) -> bool:
    header, _, payload = received.partition(b"\r\n\r\n")
    match = re.search(rb"(?im)^content-length:\s*(\d+)", header)
    return match is not None and len(payload) >= int(match.group(1))


def wait_until_up(base: str, process: subprocess.Popen[str]) -> None:
    """Poll /healthz until it answers 200 once (refused connections reach no worker)."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        assert process.poll() is None, "the server exited early"
        try:
            if get(f"{base}/healthz")[0] == 200:
                return
        except OSError:
            pass
        time.sleep(0.2)
    raise AssertionError("the server did not come up")


def serve(
    tmp_path: Path, *extra: str, env_extra: dict[str, str] | None = None
) -> tuple[subprocess.Popen[str], str]:
    port = free_port()
    env = {
        **os.environ,
        "RATINGS_DATABASE_URL": f"sqlite:///{tmp_path / 'served.db'}",
        "RATINGS_LOG_LEVEL": "warning",
        "RATINGS_MAX_BODY_BYTES": "4096",
        **(env_extra or {}),
    }
    env.pop("PROMETHEUS_MULTIPROC_DIR", None)
    process = subprocess.Popen(
        [*ratings_command(), "serve", "--host", "127.0.0.1", "--port", str(port), *extra],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    return process, f"http://127.0.0.1:{port}"


def stop(process: subprocess.Popen[str]) -> tuple[str, str]:
    process.send_signal(signal.SIGINT)
    try:
        out, err = process.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        process.kill()
        out, err = process.communicate()
    return out, err


class TestServe:
    def test_serve_migrates_makes_admin_key_and_answers(self, tmp_path: Path) -> None:
        process, base = serve(tmp_path)
        try:
            wait_until_up(base, process)
            assert get(f"{base}/readyz") == (200, '{"status":"ready"}')
            status, body = get(f"{base}/v1/no-such-route")
            assert status == 404 and json.loads(body)["status"] == 404
            status, body = post_chunked(f"{base}/v1/ladders/x/quality", [b"{" + b" " * 1000] * 8)
            assert status == 413 and json.loads(body)["status"] == 413
        finally:
            out, err = stop(process)
        assert process.returncode == 0
        keys = KEY.findall(err)
        assert len(keys) == 1 and keys[0] not in out
        url = f"sqlite:///{tmp_path / 'served.db'}"
        session = session_factory(get_engine(url))()
        row = auth.authorize(session, keys[0], "admin")
        session.close()
        dispose_engines()
        assert row.scope == "admin"

        # A second start finds the key and makes none.
        process, base = serve(tmp_path)
        try:
            wait_until_up(base, process)
        finally:
            _, err = stop(process)
        assert not KEY.findall(err)

    def test_slow_clients_are_let_go(self, tmp_path: Path) -> None:
        """A request head that trickles in, a body that never ends and an idle keep-alive
        connection each lose their connection at their bound (1 s each here)."""
        bounds = {
            "RATINGS_HEADER_TIMEOUT_S": "1",
            "RATINGS_BODY_TIMEOUT_S": "1",
            "RATINGS_KEEP_ALIVE_S": "1",
        }
        process, base = serve(tmp_path, env_extra=bounds)
        port = int(base.rsplit(":", 1)[1])
        try:
            wait_until_up(base, process)

            def closed_after(first: bytes) -> bytes:
                """What the server sends before it closes a connection that sent ``first``
                and then waits (within 20 s: far past every bound)."""
                with socket.create_connection(("127.0.0.1", port), timeout=20) as sock:
                    sock.sendall(first)
                    received = b""
                    while chunk := sock.recv(65536):
                        received += chunk
                    return received

            assert closed_after(b"") == b""  # connected, never asked
            assert closed_after(b"GET /healthz HTTP/1.1\r\nHost: x\r\n") == b""  # head unfinished
            slow_body = (
                b"POST /v1/ladders/x/quality HTTP/1.1\r\nHost: x\r\n"
                b"Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{"
            )
            answered = closed_after(slow_body)
            assert answered.startswith(b"HTTP/1.1 408 "), answered
            idle = closed_after(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
            assert idle.startswith(b"HTTP/1.1 200 ") and response_complete(idle)
        finally:
            stop(process)

    def test_metrics_sum_over_workers(self, tmp_path: Path) -> None:
        process, base = serve(tmp_path, "--workers", "2")
        try:
            wait_until_up(base, process)
            for _ in range(20):
                assert get(f"{base}/healthz")[0] == 200
            status, text = get(f"{base}/metrics")
        finally:
            stop(process)
        assert status == 200
        line = next(
            line
            for line in text.splitlines()
            if line.startswith('ratings_http_requests_total{method="GET",route="/healthz"')
        )
        # The one successful readiness poll and the 20, whichever worker answered each:
        # the figure is the sum over the workers' files, not one worker's share.
        assert float(line.rsplit(" ", 1)[1]) == 21
        assert "_created" not in text  # multiprocess exposition has no creation stamps
        # The database's own figure is read once per scrape, never summed over workers.
        samples = [line for line in text.splitlines() if line.startswith("ratings_database_")]
        assert samples == ["ratings_database_matches_recorded_total 0.0"]


POSTGRES_URL = os.environ.get("RATINGS_TEST_POSTGRES_URL")


@pytest.mark.postgres
@pytest.mark.skipif(POSTGRES_URL is None, reason="RATINGS_TEST_POSTGRES_URL is not set")
def test_migrate_and_keys_on_empty_postgres(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import psycopg
    from psycopg import sql

    assert POSTGRES_URL is not None
    name = f"ratings_cli_{os.getpid()}"
    url = f"{POSTGRES_URL.rsplit('/', 1)[0]}/{name}"
    with psycopg.connect(POSTGRES_URL, autocommit=True) as connection:
        connection.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    monkeypatch.setenv("RATINGS_DATABASE_URL", url)
    get_settings.cache_clear()
    try:
        assert run(capsys, "keys", "list")[0] == 1  # not migrated yet
        assert run(capsys, "--database-url", url, "migrate")[0] == 0
        assert schema_is_current(get_engine(url))
        key = run(capsys, "keys", "create", "--scope", "admin", "--name", "ops")[1].strip()
        assert KEY.fullmatch(key)
        assert run(capsys, "keys", "revoke", "ops")[0] == 0
    finally:
        dispose_engines()
        get_settings.cache_clear()
        with psycopg.connect(POSTGRES_URL, autocommit=True) as connection:
            connection.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
            )
