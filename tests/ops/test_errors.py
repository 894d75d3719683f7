"""Every error is an RFC 9457 problem document naming the field, never a 500 for bad input."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from app.config import get_settings
from app.main import create_app
from tests.ops.conftest import assert_problem, probe


class TestRouting:
    def test_unknown_route_is_404(self, client: TestClient) -> None:
        body = assert_problem(client.get("/no/such/thing"), 404)
        assert "/no/such/thing" in body["detail"]

    def test_wrong_method_is_405_with_allow(self, client: TestClient) -> None:
        response = client.delete("/healthz")
        body = assert_problem(response, 405)
        assert "DELETE" in body["detail"]
        assert response.headers["allow"] == "GET, HEAD"

    @pytest.mark.parametrize(
        ("path", "allowed"),
        [
            ("/v1/ladders/x/matches", "GET, HEAD, POST"),
            ("/v1/ladders/x/players/p", "DELETE, GET, HEAD, PUT"),
            ("/v1/ladders/x", "DELETE, GET, HEAD, PATCH"),
            ("/v1/jobs/j", "DELETE, GET, HEAD"),
        ],
    )
    def test_allow_lists_every_method_of_the_path(
        self, client: TestClient, path: str, allowed: str
    ) -> None:
        response = client.request("TRACE", path)
        assert_problem(response, 405)
        assert response.headers["allow"] == allowed


class TestValidation:
    @pytest.mark.parametrize("literal", ["NaN", "Infinity", "-Infinity"])
    def test_non_finite_number_is_422_naming_field(self, client: TestClient, literal: str) -> None:
        response = client.post(
            "/probe/numbers",
            content=f'{{"x": {literal}}}',
            headers={"content-type": "application/json"},
        )
        body = assert_problem(response, 422)
        assert body["detail"].startswith("body.x: ")
        assert "finite" in body["detail"]
        assert literal.lstrip("-") not in body["detail"]  # the input is not echoed

    def test_nested_location_is_named(self, client: TestClient) -> None:
        response = client.post("/probe/numbers", json={"x": 1.0, "teams": [["a"], [3]]})
        body = assert_problem(response, 422)
        assert body["detail"].startswith("body.teams.1.0: ")

    def test_validator_message_without_prefix(self, client: TestClient) -> None:
        response = client.post("/probe/numbers", json={"x": 1.0, "teams": [["a"], ["a"]]})
        body = assert_problem(response, 422)
        assert body["detail"] == "body.teams: a player appears twice"

    def test_missing_field_is_named(self, client: TestClient) -> None:
        body = assert_problem(client.post("/probe/numbers", json={}), 422)
        assert body["detail"] == "body.x: Field required"

    def test_huge_input_is_not_echoed(self, client: TestClient) -> None:
        response = client.post("/probe/numbers", json={"x": "y" * 100_000})
        body = assert_problem(response, 422)
        assert "yyyy" not in body["detail"]
        assert len(response.content) < 1000

    def test_non_json_body_is_422(self, client: TestClient) -> None:
        response = client.post(
            "/probe/numbers", content=b"x=1&y=2", headers={"content-type": "application/json"}
        )
        body = assert_problem(response, 422)
        assert "not valid JSON" in body["detail"]
        assert body["detail"].startswith("body.0: ")

    def test_non_utf8_body_is_422(self, client: TestClient) -> None:
        response = client.post(
            "/probe/numbers",
            content='{"x": 1, "name": "é"}'.encode("latin-1"),
            headers={"content-type": "application/json"},
        )
        body = assert_problem(response, 422)
        assert "UTF-8" in body["detail"]

    def test_utf16_body_is_422(self, client: TestClient) -> None:
        response = client.post(
            "/probe/numbers",
            content='{"x": 1}'.encode("utf-16"),
            headers={"content-type": "application/json; charset=utf-16"},
        )
        assert_problem(response, 422)

    def test_rating_input_error_is_422(self, client: TestClient) -> None:
        body = assert_problem(client.post("/probe/rating-error"), 422)
        assert body["detail"] == "weights: must lie in [0, 1]"
        assert body["type"] == "/problems/invalid-input"


class TestBodyLimit:
    @pytest.fixture
    def small_client(self, db_url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[TestClient]:
        monkeypatch.setenv("RATINGS_MAX_BODY_BYTES", "2048")
        get_settings.cache_clear()
        application: FastAPI = create_app()
        application.include_router(probe)
        with TestClient(application, raise_server_exceptions=False) as test_client:
            yield test_client

    def test_declared_length_over_limit_is_413(self, small_client: TestClient) -> None:
        response = small_client.post("/probe/numbers", json={"x": 1, "pad": "p" * 3000})
        body = assert_problem(response, 413)
        assert "2048" in body["detail"]

    def test_chunked_body_over_limit_is_413(self, small_client: TestClient) -> None:
        def chunks() -> Iterator[bytes]:
            yield b'{"x": 1, "pad": "'
            for _ in range(10):
                yield b"p" * 500
            yield b'"}'

        response = small_client.post(
            "/probe/numbers", content=chunks(), headers={"content-type": "application/json"}
        )
        assert "content-length" not in response.request.headers
        assert_problem(response, 413)

    def test_chunked_body_under_limit_passes(self, small_client: TestClient) -> None:
        def chunks() -> Iterator[bytes]:
            yield b'{"x": '
            yield b"2.5}"

        response = small_client.post(
            "/probe/numbers", content=chunks(), headers={"content-type": "application/json"}
        )
        assert response.status_code == 200
        assert response.json() == {"x": 2.5}

    def test_body_at_limit_passes(self, small_client: TestClient) -> None:
        prefix = b'{"x": 1, "pad": "'
        body = prefix + b"p" * (2048 - len(prefix) - 2) + b'"}'
        assert len(body) == 2048
        response = small_client.post(
            "/probe/numbers", content=body, headers={"content-type": "application/json"}
        )
        assert response.status_code == 200


class TestServerErrors:
    def test_database_down_is_503(self, client: TestClient) -> None:
        response = client.get("/probe/database-down")
        body = assert_problem(response, 503)
        assert body["detail"].startswith("database:")
        assert "refused" not in body["detail"]
        assert response.headers["retry-after"] == "1"

    def test_unexpected_error_is_generic_500(self, client: TestClient) -> None:
        response = client.get("/probe/boom")
        body = assert_problem(response, 500)
        assert "secret" not in response.text
        assert body["type"] == "/problems/internal"
