"""Helpers of the service tests: problem assertions, table counts, paging through lists."""

from __future__ import annotations

from typing import Any

import httpx
from fastapi.testclient import TestClient
from sqlalchemy import func, select

from app.storage.engine import get_engine
from app.storage.models import Base


def assert_problem(response: httpx.Response, status: int, field: str | None = None) -> str:
    """An RFC 9457 problem with ``status`` whose detail names ``field``; returns the detail."""
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/problem+json")
    body: dict[str, Any] = response.json()
    assert set(body) >= {"type", "title", "status", "detail"}
    assert body["status"] == status
    detail = str(body["detail"])
    if field is not None:
        assert field in detail, detail
    return detail


def table_counts(url: str) -> dict[str, int]:
    """Rows per table: a rejected request must leave every count unchanged."""
    with get_engine(url).connect() as connection:
        return {
            name: int(connection.scalar(select(func.count()).select_from(table)) or 0)
            for name, table in Base.metadata.tables.items()
        }


def all_pages(client: httpx.Client, path: str, limit: int, **params: Any) -> list[dict[str, Any]]:
    """Every entry of a paged list, following ``next_cursor``."""
    entries: list[dict[str, Any]] = []
    cursor = None
    while True:
        query = {"limit": limit, **params}
        if cursor is not None:
            query["cursor"] = cursor
        response = client.get(path, params=query)
        assert response.status_code == 200, response.text
        page = response.json()
        assert len(page["entries"]) <= limit
        entries.extend(page["entries"])
        cursor = page["next_cursor"]
        if cursor is None:
            return entries


def create_ladder(client: TestClient, ladder_id: str = "test", **config: Any) -> dict[str, Any]:
    body = {"id": ladder_id, "algorithm": "trueskill", **config}
    response = client.post("/v1/ladders", json=body)
    assert response.status_code == 201, response.text
    result: dict[str, Any] = response.json()
    return result


def post_match(client: TestClient, ladder: str, body: dict[str, Any]) -> dict[str, Any]:
    response = client.post(f"/v1/ladders/{ladder}/matches", json=body)
    assert response.status_code == 201, response.text
    result: dict[str, Any] = response.json()
    return result
