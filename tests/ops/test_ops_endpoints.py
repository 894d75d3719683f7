"""/healthz, /readyz and /metrics."""

from __future__ import annotations

import os
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from prometheus_client import REGISTRY
from pydantic import SecretStr

from app.api import ops
from app.config import get_settings
from app.main import create_app
from app.services import auth
from app.storage.engine import dispose_engines
from tests.ops.conftest import assert_problem, bearer
from tests.ops.test_cli import ratings_command


def unmigrated_client(url: str, monkeypatch: pytest.MonkeyPatch) -> TestClient:
    monkeypatch.setenv("RATINGS_DATABASE_URL", url)
    get_settings.cache_clear()
    return TestClient(create_app(), raise_server_exceptions=False)


@pytest.fixture(autouse=True)
def _fresh_settings() -> Iterator[None]:
    yield
    dispose_engines()
    get_settings.cache_clear()


class TestHealth:
    def test_healthz(self, client: TestClient) -> None:
        response = client.get("/healthz")
        assert response.status_code == 200
        assert response.json() == {"status": "ok"}

    def test_healthz_needs_no_database(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        client = unmigrated_client(f"sqlite:///{tmp_path}/missing/dir/r.db", monkeypatch)
        assert client.get("/healthz").status_code == 200


class TestReadiness:
    def test_ready_when_migrated(self, client: TestClient) -> None:
        response = client.get("/readyz")
        assert response.status_code == 200
        assert response.json() == {"status": "ready"}

    def test_unreachable_database_is_503(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        client = unmigrated_client(f"sqlite:///{tmp_path}/missing/dir/r.db", monkeypatch)
        body = assert_problem(client.get("/readyz"), 503)
        assert body["detail"] == "database: unreachable (OperationalError)"
        assert str(tmp_path) not in body["detail"]

    def test_refused_postgres_connection_is_503(self, monkeypatch: pytest.MonkeyPatch) -> None:
        # Port 1 on loopback: nothing listens, the connection is refused at once.
        client = unmigrated_client("postgresql://ratings:pw@127.0.0.1:1/none", monkeypatch)
        body = assert_problem(client.get("/readyz"), 503)
        assert body["detail"].startswith("database: unreachable")
        assert "pw" not in body["detail"]

    def test_schema_behind_is_503(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        client = unmigrated_client(f"sqlite:///{tmp_path}/empty.db", monkeypatch)
        body = assert_problem(client.get("/readyz"), 503)
        assert "ratings migrate" in body["detail"]

    def test_hanging_database_answers_503_without_waiting(
        self, client: TestClient, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.setenv("RATINGS_READINESS_TIMEOUT_S", "0.05")
        get_settings.cache_clear()
        release = threading.Event()

        def hang() -> bool:
            release.wait(30)
            return True

        monkeypatch.setattr(ops, "_database_ready", hang)
        try:
            body = assert_problem(client.get("/readyz"), 503)
        finally:
            release.set()
        assert body["detail"] == "database: no answer within 0.05 s"


def sample(name: str, labels: dict[str, str]) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


def exposed(client: TestClient, name: str) -> float:
    """The value of the unlabelled metric ``name`` in the /metrics text."""
    line = next(
        line for line in client.get("/metrics").text.splitlines() if line.startswith(f"{name} ")
    )
    return float(line.split()[1])


class TestMetrics:
    def test_counts_by_route_template_and_status(self, client: TestClient) -> None:
        ok = {"method": "GET", "route": "/healthz", "status": "200"}
        missing = {"method": "GET", "route": "unmatched", "status": "404"}
        ok_before = sample("ratings_http_requests_total", ok)
        missing_before = sample("ratings_http_requests_total", missing)
        count_before = sample(
            "ratings_http_request_duration_seconds_count", {"method": "GET", "route": "/healthz"}
        )
        for _ in range(3):
            client.get("/healthz")
        client.get("/nowhere")
        assert sample("ratings_http_requests_total", ok) == ok_before + 3
        assert sample("ratings_http_requests_total", missing) == missing_before + 1
        count_after = sample(
            "ratings_http_request_duration_seconds_count", {"method": "GET", "route": "/healthz"}
        )
        assert count_after == count_before + 3

    def test_exposition(self, client: TestClient) -> None:
        client.get("/healthz")
        response = client.get("/metrics")
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/plain")
        text = response.text
        assert "# TYPE ratings_http_requests_total counter" in text
        assert "# TYPE ratings_http_request_duration_seconds histogram" in text
        assert "# TYPE ratings_matches_recorded_total counter" in text
        assert 'ratings_http_requests_total{method="GET",route="/healthz",status="200"}' in text

    @pytest.mark.parametrize("setting", ["RATINGS_REQUIRE_READ_KEY", "RATINGS_METRICS_TOKEN"])
    def test_the_metrics_need_a_key_or_their_token_when_reads_do(
        self,
        db_url: str,
        make_key: Callable[[str, str], auth.NewKey],
        monkeypatch: pytest.MonkeyPatch,
        setting: str,
    ) -> None:
        """The metrics name every ladder: closed with the reads, or by their own token."""
        monkeypatch.setenv(setting, "true" if setting.endswith("KEY") else "scrape-token-1")
        monkeypatch.setenv("RATINGS_METRICS_TOKEN", "scrape-token-1")
        get_settings.cache_clear()
        key = make_key("read", "prometheus").key
        with TestClient(create_app(), raise_server_exceptions=False) as client:
            assert_problem(client.get("/metrics"), 401)
            assert_problem(client.get("/metrics", headers=bearer("wrong-token")), 401)
            assert client.get("/metrics", headers=bearer("scrape-token-1")).status_code == 200
            assert client.get("/metrics", headers=bearer(key)).status_code == 200

    def test_matches_recorded_counter(
        self, client: TestClient, make_key: Callable[[str, str], auth.NewKey]
    ) -> None:
        headers = bearer(make_key("admin", "metrics-test").key)
        ladder = {"id": "metrics", "algorithm": "trueskill"}
        assert client.post("/v1/ladders", json=ladder, headers=headers).status_code == 201
        before = sample("ratings_matches_recorded_total", {})
        match = {"match_id": "m1", "teams": [["a"], ["b"]]}
        url = "/v1/ladders/metrics/matches"
        assert client.post(url, json=match, headers=headers).status_code == 201
        assert client.post(url, json=match, headers=headers).status_code == 200  # a retry
        other = {"match_id": "m2", "teams": [["b"], ["a"]]}
        assert client.post(url, json=other, headers=headers).status_code == 201
        line = next(
            line
            for line in client.get("/metrics").text.splitlines()
            if line.startswith("ratings_matches_recorded_total ")
        )
        assert float(line.split()[1]) == before + 2

    def test_the_database_figure_counts_every_process(
        self,
        client: TestClient,
        db_url: str,
        make_key: Callable[[str, str], auth.NewKey],
        tmp_path: Path,
    ) -> None:
        """An import runs in a process of its own: this process's counter does not see it,
        the figure read from the database does, once per match (a retry and a void add
        nothing)."""
        headers = bearer(make_key("admin", "metrics-db").key)
        ladder = {"id": "imported", "algorithm": "elo"}
        assert client.post("/v1/ladders", json=ladder, headers=headers).status_code == 201
        match = {"match_id": "first", "teams": [["a"], ["b"]]}
        url = "/v1/ladders/imported/matches"
        assert client.post(url, json=match, headers=headers).status_code == 201
        recorded = exposed(client, "ratings_database_matches_recorded_total")
        if db_url.startswith("sqlite"):
            assert recorded == 1  # PostgreSQL's sequence goes on from earlier tests
        own = exposed(client, "ratings_matches_recorded_total")

        path = tmp_path / "matches.jsonl"
        path.write_text(
            "".join(f'{{"match_id": "i{n}", "teams": [["a"], ["c{n}"]]}}\n' for n in range(3))
        )
        done = subprocess.run(
            [*ratings_command(), "import", str(path), "--ladder", "imported"],
            env={**os.environ, "RATINGS_DATABASE_URL": db_url},
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr
        assert exposed(client, "ratings_database_matches_recorded_total") == recorded + 3
        assert exposed(client, "ratings_matches_recorded_total") == own

        assert client.post(url, json=match, headers=headers).status_code == 200  # a retry
        assert client.delete(f"{url}/i1", headers=headers).status_code == 200
        assert exposed(client, "ratings_database_matches_recorded_total") == recorded + 3
        text = client.get("/metrics").text
        assert "# TYPE ratings_database_matches_recorded_total counter" in text
        samples = [line for line in text.splitlines() if line.startswith("ratings_database_")]
        assert samples == [f"ratings_database_matches_recorded_total {recorded + 3:.1f}"]

    def test_no_database_figure_without_a_database(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        client = unmigrated_client(f"sqlite:///{tmp_path}/missing/dir/r.db", monkeypatch)
        response = client.get("/metrics")
        assert response.status_code == 200
        assert "# TYPE ratings_matches_recorded_total counter" in response.text
        assert "\nratings_database_matches_recorded_total " not in response.text

    def test_a_hanging_database_does_not_hold_up_the_scrape(
        self, client: TestClient, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.setenv("RATINGS_READINESS_TIMEOUT_S", "0.05")
        get_settings.cache_clear()
        release = threading.Event()

        def hang() -> int:
            release.wait(30)
            return 1

        monkeypatch.setattr(ops, "_last_match_seq", hang)
        try:
            started = time.monotonic()
            response = client.get("/metrics")
            waited = time.monotonic() - started
        finally:
            release.set()
        assert response.status_code == 200 and waited < 10
        assert "\nratings_database_matches_recorded_total " not in response.text
        assert "# TYPE ratings_http_requests_total counter" in response.text

    def test_refused_bodies_are_counted(self, db_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setenv("RATINGS_MAX_BODY_BYTES", "1024")
        get_settings.cache_clear()
        client = TestClient(create_app(), raise_server_exceptions=False)
        labels = {"method": "POST", "route": "unmatched", "status": "413"}
        before = sample("ratings_http_requests_total", labels)
        # An open route's body over the limit: refused before routing.
        assert client.post("/v1/ladders/x/quality", content=b"x" * 2000).status_code == 413
        assert sample("ratings_http_requests_total", labels) == before + 1


class TestSettings:
    def test_every_setting_from_the_environment(self, monkeypatch: pytest.MonkeyPatch) -> None:
        values = {
            "RATINGS_DATABASE_URL": "postgresql://u@h:5432/d",
            "RATINGS_HOST": "0.0.0.0",
            "RATINGS_PORT": "9001",
            "RATINGS_WORKERS": "3",
            "RATINGS_MAX_BODY_BYTES": "4096",
            "RATINGS_MAX_KEYLESS_BODY_BYTES": "2048",
            "RATINGS_HEADER_TIMEOUT_S": "4",
            "RATINGS_BODY_TIMEOUT_S": "30",
            "RATINGS_KEEP_ALIVE_S": "7",
            "RATINGS_REQUIRE_READ_KEY": "true",
            "RATINGS_METRICS_TOKEN": "scrape-me",
            "RATINGS_POOL_SIZE": "7",
            "RATINGS_STATEMENT_TIMEOUT_MS": "2500",
            "RATINGS_REPLY_GRACE_MS": "700",
            "RATINGS_CONNECT_TIMEOUT_S": "3",
            "RATINGS_POOL_TIMEOUT_S": "1.5",
            "RATINGS_TCP_KEEPALIVES_IDLE_S": "20",
            "RATINGS_TCP_KEEPALIVES_INTERVAL_S": "2",
            "RATINGS_TCP_KEEPALIVES_COUNT": "4",
            "RATINGS_TCP_USER_TIMEOUT_MS": "9000",
            "RATINGS_SQLITE_BUSY_TIMEOUT_MS": "100",
            "RATINGS_READINESS_TIMEOUT_S": "0.5",
            "RATINGS_LOG_LEVEL": "WARNING",
            "RATINGS_WRITE_GROUP_MAX": "8",
            "RATINGS_WRITE_GROUP_WAIT_MS": "0.5",
            "RATINGS_REBUILD_INLINE_MAX": "500",
            "RATINGS_JOB_LEASE_S": "12.5",
            "RATINGS_SEASON_CLOCK_S": "0.5",
            "RATINGS_AGING_CLOCK_S": "30",
            "RATINGS_SCHEDULED_LEASE_S": "20",
            "RATINGS_CONSISTENCY_WAIT_MS": "100",
            "RATINGS_ERASURE_NOTICE_S": "3600",
            "RATINGS_EVENT_RETENTION_S": "86400",
            "RATINGS_WEBHOOK_TIMEOUT_S": "3",
            "RATINGS_WEBHOOK_RETRY_S": "600",
            "RATINGS_WEBHOOK_LEASE_S": "5",
            "RATINGS_WEBHOOK_POLL_S": "0.25",
            "RATINGS_WEBHOOK_THREADS": "4",
            "RATINGS_AGING_EVERY_S": "3600",
            "RATINGS_READ_DATABASE_URL": "postgresql://u@replica:5432/d",
            "RATINGS_CACHE_CONTROL": '{"*": "no-cache", "leaderboard": "public, max-age=5"}',
            "RATINGS_READ_CACHE_MB": "8",
            "RATINGS_OPENTELEMETRY": "true",
            "RATINGS_RATE_LIMIT_PER_SECOND": "25",
            "RATINGS_RATE_LIMIT_BURST": "50",
            "RATINGS_RATE_LIMIT_LOOPBACK": "true",
            "RATINGS_RATE_LIMIT_MAX_CLIENTS": "1000",
            "RATINGS_TRUSTED_PROXIES": "10.0.0.5,10.1.0.0/16",
            "RATINGS_REDIS_URL": "redis://127.0.0.1:6379/3",
            "RATINGS_REDIS_PREFIX": "arena:",
            "RATINGS_DATABASE_POOLER": "transaction",
            "RATINGS_GC_TUNING": "1",
        }
        for name, value in values.items():
            monkeypatch.setenv(name, value)
        get_settings.cache_clear()
        settings = get_settings()
        assert settings.model_dump() == {
            "database_url": "postgresql://u@h:5432/d",
            "host": "0.0.0.0",
            "port": 9001,
            "workers": 3,
            "max_body_bytes": 4096,
            "max_keyless_body_bytes": 2048,
            "header_timeout_s": 4.0,
            "body_timeout_s": 30.0,
            "keep_alive_s": 7,
            "require_read_key": True,
            "metrics_token": SecretStr("scrape-me"),
            "pool_size": 7,
            "statement_timeout_ms": 2500,
            "reply_grace_ms": 700,
            "connect_timeout_s": 3,
            "pool_timeout_s": 1.5,
            "tcp_keepalives_idle_s": 20,
            "tcp_keepalives_interval_s": 2,
            "tcp_keepalives_count": 4,
            "tcp_user_timeout_ms": 9000,
            "sqlite_busy_timeout_ms": 100,
            "readiness_timeout_s": 0.5,
            "log_level": "warning",
            "write_group_max": 8,
            "write_group_wait_ms": 0.5,
            "rebuild_inline_max": 500,
            "job_lease_s": 12.5,
            "season_clock_s": 0.5,
            "aging_clock_s": 30.0,
            "scheduled_lease_s": 20.0,
            "consistency_wait_ms": 100.0,
            "erasure_notice_s": 3600.0,
            "event_retention_s": 86400.0,
            "webhook_timeout_s": 3.0,
            "webhook_retry_s": 600.0,
            "webhook_lease_s": 5.0,
            "webhook_poll_s": 0.25,
            "webhook_threads": 4,
            "aging_every_s": 3600.0,
            "read_database_url": "postgresql://u@replica:5432/d",
            "cache_control": {"*": "no-cache", "leaderboard": "public, max-age=5"},
            "read_cache_mb": 8.0,
            "opentelemetry": True,
            "rate_limit_per_second": 25.0,
            "rate_limit_burst": 50,
            "rate_limit_loopback": True,
            "rate_limit_max_clients": 1000,
            "trusted_proxies": "10.0.0.5,10.1.0.0/16",
            "redis_url": "redis://127.0.0.1:6379/3",
            "redis_prefix": "arena:",
            "database_pooler": "transaction",
            "gc_tuning": True,
        }


class TestOpenApi:
    def test_operations_and_key_scheme_documented(self, client: TestClient) -> None:
        document = client.get("/openapi.json").json()
        assert {"/healthz", "/readyz", "/metrics"} <= set(document["paths"])
        scheme = document["components"]["securitySchemes"]["ApiKey"]
        assert scheme == {
            "type": "http",
            "scheme": "bearer",
            "description": scheme["description"],
        }
        recording = document["paths"]["/v1/ladders/{ladder}/matches"]["post"]
        assert recording["security"] == [{"ApiKey": []}]
