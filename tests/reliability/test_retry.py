"""A transaction that loses a deadlock or a serialization conflict is run again, at most
three times in all, and counted (app/storage/unit_of_work.py); the match is applied exactly
once. The conflicts are real database errors raised by the fault hook
(tests/reliability/faults.py) right after the match's history rows are written: SQLSTATE
40001 on PostgreSQL, "database is locked" on SQLite."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest
from fastapi.testclient import TestClient
from prometheus_client import REGISTRY

from app.config import get_settings
from tests.reliability import faults
from tests.reliability.conftest import create_ladder, report
from tests.reliability.invariants import check_ladder
from tests.service.helpers import table_counts

MATCH = {"match_id": "m-1", "teams": [["a"], ["b", "c"]], "ranks": [2, 1]}


def _retries() -> float:
    total = 0.0
    for reason in ("deadlock", "serialization_failure", "sqlite_locked"):
        value = REGISTRY.get_sample_value("ratings_transaction_retries_total", {"reason": reason})
        total += value or 0.0
    return total


@pytest.fixture
def conflicting(
    database_url: str, admin_key: str, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Callable[[int], TestClient]]:
    """``conflicting(n)``: the app with its first ``n`` history writes failing."""
    monkeypatch.setenv("RATINGS_DATABASE_URL", database_url)
    get_settings.cache_clear()
    from app.main import create_app

    with TestClient(create_app(), raise_server_exceptions=False) as client:
        client.headers["Authorization"] = f"Bearer {admin_key}"
        create_ladder(client, "r")

        def arm(times: int) -> TestClient:
            faults.install(faults.CONFLICT_AFTER_HISTORY, times=times)
            return client

        try:
            yield arm
        finally:
            faults.uninstall()
    get_settings.cache_clear()


def test_a_lost_conflict_is_run_again_and_applied_once(
    conflicting: Callable[[int], TestClient], database_url: str
) -> None:
    client = conflicting(2)
    before = _retries()
    response = client.post("/v1/ladders/r/matches", json=MATCH)
    assert response.status_code == 201, response.text
    assert _retries() - before == 2
    assert client.post("/v1/ladders/r/matches", json=MATCH).status_code == 200
    check_ladder(client, "r", {"m-1": MATCH})
    report(f"retry[{database_url.split(':')[0]}]", conflicts=2, retries=_retries() - before)


def test_out_of_runs_it_is_a_503_and_nothing_is_written(
    conflicting: Callable[[int], TestClient], database_url: str
) -> None:
    client = conflicting(3)
    counts = table_counts(database_url)
    response = client.post("/v1/ladders/r/matches", json=MATCH)
    assert response.status_code == 503
    assert response.headers["content-type"] == "application/problem+json"
    assert response.headers["retry-after"]
    assert table_counts(database_url) == counts
    assert client.post("/v1/ladders/r/matches", json=MATCH).status_code == 201  # hook spent
    check_ladder(client, "r", {"m-1": MATCH})
