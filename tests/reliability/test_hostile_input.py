"""Guarantee 5, hostile input (hand-made cases): every one is a 4xx problem+json naming
what is wrong, never a 5xx, and nothing is written. (JSON nested deeper than the parser
goes is a 422 like any other malformed body.) Schemathesis covers the generated cases
(test_schemathesis.py)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from app.config import get_settings
from tests.reliability.conftest import create_ladder
from tests.service.helpers import table_counts

LIMIT = 1_048_576
MATCHES = "/v1/ladders/h/matches"
GOOD = {"teams": [["a"], ["b", "c"]], "ranks": [1, 2], "weights": [[1.0], [1.0, 0.5]]}


@pytest.fixture
def hostile(
    database_url: str, admin_key: str, monkeypatch: pytest.MonkeyPatch
) -> Iterator[TestClient]:
    monkeypatch.setenv("RATINGS_DATABASE_URL", database_url)
    monkeypatch.setenv("RATINGS_MAX_BODY_BYTES", str(LIMIT))
    get_settings.cache_clear()
    from app.main import create_app

    with TestClient(create_app(), raise_server_exceptions=False) as client:
        client.headers["Authorization"] = f"Bearer {admin_key}"
        create_ladder(client, "h")
        assert client.post(MATCHES, json={**GOOD, "match_id": "first"}).status_code == 201
        yield client
    get_settings.cache_clear()


def _raw(text: str, token: str = "") -> bytes:
    """``text`` with every ``@`` replaced by ``token``, as bytes."""
    return text.replace("@", token).encode()


def _body(**fields: Any) -> bytes:
    return json.dumps({**GOOD, **fields}).encode()


def _with(literal: str, where: str) -> bytes:
    """GOOD with one number replaced by a bare JSON token (NaN, Infinity, 1e309)."""
    templates = {
        "ranks": '{"teams": [["a"], ["b", "c"]], "ranks": [1, @]}',
        "scores": '{"teams": [["a"], ["b", "c"]], "scores": [@, 2]}',
        "weights": '{"teams": [["a"], ["b", "c"]], "weights": [[1.0], [@, 0.5]]}',
        "meta": '{"teams": [["a"], ["b", "c"]], "meta": {"x": @}}',
        "played_at": '{"teams": [["a"], ["b", "c"]], "played_at": @}',
        "match_id": '{"teams": [["a"], ["b", "c"]], "match_id": @}',
    }
    return _raw(templates[where], literal)


NONFINITE = ["NaN", "Infinity", "-Infinity", "1e309", "-1e309"]
CASES: list[Any] = [
    *(
        pytest.param("POST", MATCHES, _with(token, where), 422, id=f"{token}-in-{where}")
        for token in NONFINITE
        for where in ("ranks", "scores", "weights", "meta", "played_at", "match_id")
    ),
    *(
        pytest.param(
            "POST",
            "/v1/ladders/h/quality",
            _raw('{"teams": [["a"], ["b"]], "weights": [[@], [1]]}', token),
            422,
            id=f"{token}-in-quality-weights",
        )
        for token in NONFINITE
    ),
    *(
        pytest.param(
            "PUT",
            "/v1/ladders/h/players/a",
            _raw('{"mu": @, "sigma": 2}', token),
            422,
            id=f"{token}-in-seeded-mu",
        )
        for token in NONFINITE
    ),
    *(
        pytest.param(
            "POST",
            "/v1/ladders",
            _raw('{"id": "x", "algorithm": "trueskill", "params": {"beta": @}}', token),
            422,
            id=f"{token}-in-ladder-params",
        )
        for token in NONFINITE
    ),
    pytest.param("POST", MATCHES, _body(meta={"x": "y" * LIMIT}), 413, id="body-over-limit"),
    pytest.param("POST", MATCHES, b"[" * (LIMIT + 1), 413, id="deep-nesting-over-limit"),
    pytest.param("POST", MATCHES, _raw("[" * 30_000 + "]" * 30_000), 422, id="deep-nesting"),
    pytest.param(
        "POST",
        MATCHES,
        _raw('{"teams": [["a"], ["b"]], "meta": @}', '{"k":' * 5_000 + "1" + "}" * 5_000),
        422,
        id="deep-meta",
    ),
    pytest.param("POST", MATCHES, b'{"teams": [["\xff\xfe"], ["b"]]}', 422, id="not-utf-8"),
    pytest.param("POST", MATCHES, b'{"teams": [["a"], ["b"]]', 422, id="truncated-json"),
    pytest.param("POST", MATCHES, b"\x00\x00\x00", 422, id="binary"),
    pytest.param(
        "POST", MATCHES, _body(teams=[[f"p{j}"] for j in range(65)], ranks=None), 422, id="65-teams"
    ),
    pytest.param(
        "POST",
        MATCHES,
        _body(teams=[[f"a{i}" for i in range(129)], [f"b{i}" for i in range(128)]], weights=None),
        422,
        id="257-players",
    ),
    pytest.param("POST", MATCHES, _body(teams=[["a"], ["a"]], weights=None), 422, id="duplicate"),
    pytest.param("POST", MATCHES, _body(teams=[["a"], []], weights=None), 422, id="empty-team"),
    pytest.param("POST", MATCHES, _body(teams=[["a"]], ranks=None, weights=None), 422, id="1-team"),
    pytest.param("POST", MATCHES, _body(extra=1), 422, id="extra-field"),
    pytest.param("POST", MATCHES, _body(ranks=[1, 2, 3]), 422, id="ranks-not-matching"),
    pytest.param("POST", MATCHES, _body(weights=[[1.5], [1, 1]]), 422, id="weight-over-1"),
    pytest.param("POST", MATCHES, _body(match_id="x" * 129), 422, id="long-match-id"),
    pytest.param(
        "POST", MATCHES, _body(teams=[["a" * 129], ["b"]], weights=None), 422, id="long-id"
    ),
    pytest.param("POST", MATCHES, _body(meta={"x": "y" * 5000}), 422, id="meta-over-4kb"),
    pytest.param("POST", MATCHES, _body(ranks=[True, 2]), 422, id="boolean-rank"),
    pytest.param("POST", MATCHES, _body(ranks=["1", "2"]), 422, id="string-ranks"),
    pytest.param("POST", MATCHES, _body(teams="ab"), 422, id="teams-a-string"),
    pytest.param("POST", MATCHES, _body(played_at="9999-99-99"), 422, id="bad-date"),
    pytest.param(
        "POST", MATCHES, _body(match_id="first", ranks=[2, 1]), 409, id="same-id-other-body"
    ),
    pytest.param(
        "POST",
        "/v1/ladders/h/matches/batch",
        json.dumps({"matches": [{"teams": [["a"], ["b"]]}] * 10_001}).encode(),
        422,
        id="10001-matches-in-a-batch",
    ),
    pytest.param(
        "POST",
        "/v1/ladders/h/matches/batch",
        json.dumps({"matches": [{"teams": [["a"] * 128, ["b"] * 128]}] * 196}).encode(),
        422,
        id="50176-player-slots-in-a-batch",
    ),
    pytest.param(
        "POST",
        "/v1/ladders/h/matches/batch",
        json.dumps({"matches": [GOOD, {**GOOD, "ranks": [1, "NaN"]}]}).encode(),
        422,
        id="batch-with-one-bad-match",
    ),
    pytest.param("GET", "/v1/ladders/h/leaderboard?limit=1001", b"", 422, id="page-too-big"),
    pytest.param("GET", "/v1/ladders/h/leaderboard?cursor=%00", b"", 422, id="bad-cursor"),
    pytest.param("GET", "/v1/ladders/h/leaderboard?limit=NaN", b"", 422, id="nan-limit"),
    pytest.param("GET", "/v1/ladders/" + "x" * 5000, b"", 404, id="long-ladder-id"),
]


def _refused(
    client: TestClient, database_url: str, method: str, path: str, content: bytes, status: int
) -> None:
    counts = table_counts(database_url)
    if status == 413 and len(content) <= LIMIT:
        content = content + b" " * (LIMIT + 1 - len(content))
    response = client.request(
        method, path, content=content, headers={"content-type": "application/json"}
    )
    assert response.status_code == status, response.text[:500]
    assert response.headers["content-type"] == "application/problem+json"
    problem = response.json()
    assert problem["status"] == status and problem["detail"]
    assert "NaN" not in problem["detail"] and "Infinity" not in problem["detail"]
    assert table_counts(database_url) == counts


def test_hostile_requests_are_refused_and_write_nothing(
    hostile: TestClient, database_url: str
) -> None:
    """Every case of ``CASES`` against one app; the failures are listed by case id."""
    failures = []
    for case in CASES:
        try:
            _refused(hostile, database_url, *case.values)
        except AssertionError as exc:
            failures.append(f"{case.id}: {exc}")
    assert not failures, "\n".join(failures)
    assert len(CASES) > 70
