"""Per-client rate limiting (app/api/ratelimit.py): a token bucket per key, or per address
for requests without one; an empty bucket is a 429 problem+json with Retry-After and nothing
done. Off by default; loopback clients are exempt unless configured; probes never limited.
"""

from __future__ import annotations

import logging
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from prometheus_client import REGISTRY

from app.api.ratelimit import TokenBuckets
from app.config import RateLimit, get_settings
from tests.ops.test_cli import free_port, serve, stop, wait_until_up
from tests.reliability.conftest import create_ladder
from tests.service.helpers import table_counts

MATCH = {"teams": [["a"], ["b"]]}


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_token_bucket_arithmetic() -> None:
    clock = Clock()
    buckets = TokenBuckets(rate=2.0, capacity=3.0, max_clients=2, clock=clock)
    assert [buckets.take("k") for _ in range(3)] == [0.0, 0.0, 0.0]
    assert buckets.take("k") == pytest.approx(0.5)  # one token comes every 1/2 s
    clock.now += 0.5
    assert buckets.take("k") == 0.0
    assert buckets.take("other") == 0.0  # a bucket per client
    clock.now += 100.0
    assert [buckets.take("k") for _ in range(4)][-1] > 0.0  # refills up to capacity only
    buckets.take("third")  # over max_clients: the least recently seen is forgotten
    assert "other" not in buckets._buckets


def test_settings_default_off_and_burst() -> None:
    assert RateLimit().per_second == 0.0
    assert RateLimit(per_second=5).capacity == 5.0
    assert RateLimit(per_second=0.5).capacity == 1.0
    assert RateLimit(per_second=5, burst=12).capacity == 12.0


@pytest.fixture
def limited(
    database_url: str, admin_key: str, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Callable[[tuple[str, int]], TestClient]]:
    monkeypatch.setenv("RATINGS_DATABASE_URL", database_url)
    monkeypatch.setenv("RATINGS_RATE_LIMIT_PER_SECOND", "0.001")  # no refill during the test
    monkeypatch.setenv("RATINGS_RATE_LIMIT_BURST", "3")
    get_settings.cache_clear()
    from app.main import create_app

    clients: list[TestClient] = []
    app = create_app()

    def connect(address: tuple[str, int]) -> TestClient:
        client = TestClient(app, client=address, raise_server_exceptions=False)
        client.__enter__()
        clients.append(client)
        return client

    yield connect
    for client in clients:
        client.__exit__(None, None, None)
    get_settings.cache_clear()


def test_a_key_over_its_rate_gets_429_and_nothing_is_done(
    limited: Callable[[tuple[str, int]], TestClient],
    make_key: Callable[[str, str], str],
    database_url: str,
) -> None:
    writer = {"Authorization": f"Bearer {make_key('write', 'writer')}"}
    admin = {"Authorization": f"Bearer {make_key('admin', 'admin2')}"}
    http = limited(("203.0.113.7", 5000))
    operator = limited(("127.0.0.1", 1))  # loopback: not limited
    operator.headers.update(admin)
    create_ladder(operator, "rl")
    # The key's first request is counted by the address (the key is not known yet); once
    # answered, the key has its bucket of three.
    for _ in range(4):
        assert http.post("/v1/ladders/rl/matches", json=MATCH, headers=writer).status_code == 201
    counts = table_counts(database_url)
    refused = http.post("/v1/ladders/rl/matches", json=MATCH, headers=writer)
    assert refused.status_code == 429
    assert refused.headers["content-type"] == "application/problem+json"
    assert int(refused.headers["retry-after"]) >= 1
    assert refused.json()["status"] == 429 and "rate" in refused.json()["detail"]
    assert table_counts(database_url) == counts
    # Another key from the same address has its own bucket once known; probes are never
    # limited.
    for _ in range(4):
        assert http.get("/v1/ladders/rl", headers=admin).status_code == 200
    for _ in range(5):
        assert http.get("/healthz").status_code == 200
    # Anonymous reads are counted per address: this one has one of its three left.
    assert http.get("/v1/ladders/rl/leaderboard").status_code == 200
    assert http.get("/v1/ladders/rl/leaderboard").status_code == 429
    other = limited(("203.0.113.8", 5000))
    assert other.get("/v1/ladders/rl/leaderboard").status_code == 200


def test_made_up_tokens_are_counted_by_the_address(
    limited: Callable[[tuple[str, int]], TestClient],
    make_key: Callable[[str, str], str],
) -> None:
    """A client sending a fresh random token with every request gets no bucket per token:
    its requests count against its address, and after the burst it is refused before any
    token is looked up. A real key of another client is not held back by it."""
    http = limited(("203.0.113.9", 5000))
    codes = [
        http.get("/v1/ladders", headers={"Authorization": f"Bearer rk_{n:08x}_made-up"}).status_code
        for n in range(20)
    ]
    assert codes == [401] * 3 + [429] * 17
    reader = {"Authorization": f"Bearer {make_key('read', 'reader')}"}
    elsewhere = limited(("203.0.113.10", 5000))
    assert {elsewhere.get("/v1/ladders", headers=reader).status_code for _ in range(4)} == {200}


def test_loopback_clients_are_not_limited_unless_configured(
    limited: Callable[[tuple[str, int]], TestClient], monkeypatch: pytest.MonkeyPatch
) -> None:
    local = limited(("127.0.0.1", 5000))
    assert {local.get("/v1/ladders").status_code for _ in range(10)} == {200}
    v6 = limited(("::1", 5000))
    assert {v6.get("/v1/ladders").status_code for _ in range(10)} == {200}

    monkeypatch.setenv("RATINGS_RATE_LIMIT_LOOPBACK", "true")
    get_settings.cache_clear()
    from app.main import create_app

    with TestClient(create_app(), client=("127.0.0.1", 5000)) as strict:
        codes = [strict.get("/v1/ladders").status_code for _ in range(4)]
    assert codes == [200, 200, 200, 429]


def test_off_by_default(app_client: TestClient) -> None:
    assert {app_client.get("/v1/ladders").status_code for _ in range(50)} == {200}


def _codes(base: str, forwarded: list[str]) -> list[int]:
    codes = []
    for address in forwarded:
        request = urllib.request.Request(f"{base}/v1/ladders", headers={"X-Forwarded-For": address})
        try:
            with urllib.request.urlopen(request, timeout=10) as response:
                codes.append(response.status)
        except urllib.error.HTTPError as error:
            codes.append(error.code)
    return codes


@pytest.mark.parametrize("trusted", ["", "127.0.0.1"])
def test_forwarded_addresses_count_only_from_trusted_proxies(tmp_path: Path, trusted: str) -> None:
    """A real server: with no trusted proxy an `X-Forwarded-For` that names a new address
    on every request changes nothing (the peer is the client, and it is limited); from a
    proxy named in RATINGS_TRUSTED_PROXIES each forwarded address is a client of its own."""
    env = {
        "RATINGS_RATE_LIMIT_PER_SECOND": "0.001",
        "RATINGS_RATE_LIMIT_BURST": "2",
        "RATINGS_RATE_LIMIT_LOOPBACK": "true",
        "RATINGS_TRUSTED_PROXIES": trusted,
    }
    process, base = serve(tmp_path, env_extra=env)
    try:
        wait_until_up(base, process)
        codes = _codes(base, [f"198.51.100.{n}" for n in range(1, 7)])
    finally:
        stop(process)
    assert codes == ([200] * 6 if trusted else [200, 200, 429, 429, 429, 429])


REDIS_URL = "redis://127.0.0.1:6379/0"


def _redis_app(monkeypatch: pytest.MonkeyPatch, database_url: str, redis_url: str) -> Any:
    monkeypatch.setenv("RATINGS_DATABASE_URL", database_url)
    monkeypatch.setenv("RATINGS_RATE_LIMIT_PER_SECOND", "0.001")
    monkeypatch.setenv("RATINGS_RATE_LIMIT_BURST", "3")
    monkeypatch.setenv("RATINGS_REDIS_URL", redis_url)
    monkeypatch.setenv("RATINGS_REDIS_PREFIX", f"ratings-test:{uuid.uuid4().hex}:")
    get_settings.cache_clear()
    from app.main import create_app

    return create_app


def test_one_limit_across_instances_with_redis(
    database_url: str, admin_key: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two instances on one Redis share each client's bucket: three requests in all, then
    429 from either; every answer says the limit, what is left and when it is full."""
    create_app = _redis_app(monkeypatch, database_url, REDIS_URL)
    address = ("203.0.113.20", 5000)
    with (
        TestClient(create_app(), client=address) as one,
        TestClient(create_app(), client=address) as two,
    ):
        answers = [(one if n % 2 else two).get("/v1/ladders") for n in range(5)]
        assert [a.status_code for a in answers] == [200, 200, 200, 429, 429]
        assert [a.headers["ratelimit-remaining"] for a in answers] == ["2", "1", "0", "0", "0"]
        assert {a.headers["ratelimit-limit"] for a in answers} == {"3"}
        assert int(answers[0].headers["ratelimit-reset"]) >= 1000  # a token in 1,000 s
        assert int(answers[3].headers["retry-after"]) >= 1
        # Another address has its own bucket, in both instances.
        other = TestClient(create_app(), client=("203.0.113.21", 5000))
        with other:
            assert other.get("/v1/ladders").status_code == 200
    get_settings.cache_clear()


def test_redis_down_lets_requests_through_counted_and_logged_once(
    database_url: str,
    admin_key: str,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    create_app = _redis_app(monkeypatch, database_url, f"redis://127.0.0.1:{free_port()}/0")
    before = REGISTRY.get_sample_value("ratings_rate_limit_unavailable_total") or 0.0
    with (
        caplog.at_level(logging.WARNING, logger="app.api.ratelimit"),
        TestClient(create_app(), client=("203.0.113.22", 5000)) as client,
    ):
        codes = {client.get("/v1/ladders").status_code for _ in range(6)}
    assert codes == {200}  # never a 500, never refused for the limiter's own trouble
    after = REGISTRY.get_sample_value("ratings_rate_limit_unavailable_total")
    assert after == before + 6
    said = [r.getMessage() for r in caplog.records if "Redis did not answer" in r.getMessage()]
    assert len(said) == 1
    get_settings.cache_clear()


def test_the_workers_of_a_server_share_the_limit_through_redis(tmp_path: Path) -> None:
    env = {
        "RATINGS_RATE_LIMIT_PER_SECOND": "0.001",
        "RATINGS_RATE_LIMIT_BURST": "3",
        "RATINGS_RATE_LIMIT_LOOPBACK": "true",
        "RATINGS_REDIS_URL": REDIS_URL,
        "RATINGS_REDIS_PREFIX": f"ratings-test:{uuid.uuid4().hex}:",
    }
    process, base = serve(tmp_path, "--workers", "2", env_extra=env)
    try:
        wait_until_up(base, process)
        codes = _codes(base, ["ignored"] * 10)  # a new connection each: any worker
    finally:
        stop(process)
    assert codes == [200, 200, 200] + [429] * 7
