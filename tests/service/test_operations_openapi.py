"""The OpenAPI document describes batch ingest, voiding and ladder changes (their bodies'
examples are checked with every other body's in test_openapi.py)."""

from __future__ import annotations

from fastapi.testclient import TestClient


def test_the_document_lists_the_operations(client: TestClient) -> None:
    paths = client.get("/openapi.json").json()["paths"]
    assert "post" in paths["/v1/ladders/{ladder}/matches/batch"]
    assert "delete" in paths["/v1/ladders/{ladder}/matches/{match_id}"]
    patch = paths["/v1/ladders/{ladder}"]["patch"]
    assert any(p["name"] == "rebuild" for p in patch["parameters"])
    result = client.get("/openapi.json").json()["components"]["schemas"]["MatchResult"]
    assert {"voided", "voided_at"} <= set(result["properties"])
