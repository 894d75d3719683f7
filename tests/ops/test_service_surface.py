"""The operations concerns on the real v1 routes: scopes, problem documents, body limit,
metrics labelled by route template."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest
from fastapi.testclient import TestClient
from prometheus_client import REGISTRY

from app.config import get_settings
from app.main import create_app
from app.services import auth
from tests.ops.conftest import assert_problem, bearer

MakeKey = Callable[[str, str], auth.NewKey]
JSON = {"content-type": "application/json"}


@pytest.fixture
def keys(make_key: MakeKey) -> dict[str, str]:
    return {scope: make_key(scope, f"{scope}-key").key for scope in auth.SCOPES}


@pytest.fixture
def ladder(client: TestClient, keys: dict[str, str]) -> str:
    response = client.post(
        "/v1/ladders",
        json={"id": "arena-ffa", "algorithm": "plackett_luce"},
        headers=bearer(keys["admin"]),
    )
    assert response.status_code == 201, response.text
    return "/v1/ladders/arena-ffa"


class TestScopesOnRoutes:
    def test_creating_a_ladder_needs_admin(self, client: TestClient, keys: dict[str, str]) -> None:
        body = {"id": "duel", "algorithm": "plackett_luce"}
        assert_problem(client.post("/v1/ladders", json=body), 401)
        for scope in ("read", "write"):
            assert_problem(client.post("/v1/ladders", json=body, headers=bearer(keys[scope])), 403)
        assert client.get("/v1/ladders/duel").status_code == 404  # nothing was written
        response = client.post("/v1/ladders", json=body, headers=bearer(keys["admin"]))
        assert response.status_code == 201

    def test_recording_needs_write(
        self, client: TestClient, keys: dict[str, str], ladder: str
    ) -> None:
        match = {"teams": [["ann"], ["bob"]]}
        assert_problem(client.post(f"{ladder}/matches", json=match), 401)
        assert_problem(
            client.post(f"{ladder}/matches", json=match, headers=bearer(keys["read"])), 403
        )
        response = client.post(f"{ladder}/matches", json=match, headers=bearer(keys["write"]))
        assert response.status_code == 201

    def test_reads_are_open(self, client: TestClient, ladder: str) -> None:
        assert client.get(f"{ladder}/leaderboard").status_code == 200
        response = client.post(f"{ladder}/quality", json={"teams": [["ann"], ["bob"]]})
        assert response.status_code == 200


class TestBadBodies:
    @pytest.mark.parametrize(
        ("content", "field"),
        [
            ('{"teams": [["a"], ["b"]], "weights": [[NaN], [1]]}', "body.weights.0.0"),
            ('{"teams": [["a"], ["b"]], "scores": [Infinity, 1]}', "body.scores.0"),
            ('{"teams": [["a"], ["b"]], "ranks": [-Infinity, 1]}', "body.ranks.0"),
        ],
    )
    def test_non_finite_numbers_are_422(
        self, client: TestClient, keys: dict[str, str], ladder: str, content: str, field: str
    ) -> None:
        response = client.post(
            f"{ladder}/matches", content=content, headers={**JSON, **bearer(keys["write"])}
        )
        body = assert_problem(response, 422)
        assert body["detail"].startswith(field)

    def test_non_utf8_match_is_422(
        self, client: TestClient, keys: dict[str, str], ladder: str
    ) -> None:
        content = '{"teams": [["Zoë"], ["bob"]]}'.encode("latin-1")
        response = client.post(
            f"{ladder}/matches", content=content, headers={**JSON, **bearer(keys["write"])}
        )
        assert "UTF-8" in assert_problem(response, 422)["detail"]

    def test_truncated_json_is_422(
        self, client: TestClient, keys: dict[str, str], ladder: str
    ) -> None:
        response = client.post(
            f"{ladder}/matches",
            content=b'{"teams": [["a"]',
            headers={**JSON, **bearer(keys["write"])},
        )
        assert "JSON" in assert_problem(response, 422)["detail"]
        assert client.get(f"{ladder}/leaderboard").json()["entries"] == []


class TestLimitAndMetrics:
    @pytest.fixture
    def small_client(self, db_url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[TestClient]:
        monkeypatch.setenv("RATINGS_MAX_BODY_BYTES", "4096")
        get_settings.cache_clear()
        with TestClient(create_app(), raise_server_exceptions=False) as test_client:
            yield test_client

    def test_oversized_match_is_413_and_changes_nothing(
        self, small_client: TestClient, keys: dict[str, str], ladder: str
    ) -> None:
        match = {"teams": [[f"player-{i}"] for i in range(64)], "meta": {"note": "n" * 3500}}
        response = small_client.post(f"{ladder}/matches", json=match, headers=bearer(keys["write"]))
        assert "4096" in assert_problem(response, 413)["detail"]
        assert small_client.get(f"{ladder}/leaderboard").json()["entries"] == []

    def test_requests_labelled_by_route_template(
        self, client: TestClient, keys: dict[str, str], ladder: str
    ) -> None:
        labels = {"method": "POST", "route": "/v1/ladders/{ladder}/matches", "status": "201"}
        before = REGISTRY.get_sample_value("ratings_http_requests_total", labels) or 0.0
        for i in range(2):
            response = client.post(
                f"{ladder}/matches",
                json={"teams": [[f"a{i}"], [f"b{i}"]]},
                headers=bearer(keys["write"]),
            )
            assert response.status_code == 201
        assert REGISTRY.get_sample_value("ratings_http_requests_total", labels) == before + 2
        text = client.get("/metrics").text
        # Path values never become labels of the requests (the ladder's accuracy gauges,
        # ratings_ladder_*, are labelled by ladder on purpose).
        requests = [line for line in text.splitlines() if line.startswith("ratings_http_")]
        assert requests and not any("arena-ffa" in line for line in requests)
