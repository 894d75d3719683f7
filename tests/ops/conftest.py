"""Fixtures of the operations tests: a migrated database per test (``database_url`` of
tests/conftest.py), an app with probe routes guarded by each scope, a way to make keys."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest
from fastapi import APIRouter, FastAPI
from fastapi.testclient import TestClient
from pydantic import BaseModel, Field, field_validator
from sqlalchemy.exc import OperationalError
from sqlalchemy.orm import Session

from app.api import deps
from app.config import get_settings
from app.main import create_app
from app.rating.base import RatingInputError
from app.services import auth
from app.storage.engine import dispose_engines, get_engine, session_factory

probe = APIRouter(prefix="/probe")


class Numbers(BaseModel):
    x: float = Field(allow_inf_nan=False)
    teams: list[list[str]] = Field(default_factory=list)

    @field_validator("teams")
    @classmethod
    def _distinct(cls, teams: list[list[str]]) -> list[list[str]]:
        players = [player for team in teams for player in team]
        if len(set(players)) != len(players):
            raise ValueError("a player appears twice")
        return teams


def _nothing(session: Session) -> None:
    return None


@probe.get("/read")
async def probe_read(access: deps.ReadAccess) -> dict[str, str]:
    await deps.run(access, _nothing)
    return {"scope": "read"}


@probe.post("/write")
async def probe_write(access: deps.WriteAccess) -> dict[str, str]:
    await deps.run(access, _nothing)
    return {"scope": "write"}


@probe.post("/admin")
async def probe_admin(access: deps.AdminAccess) -> dict[str, str]:
    await deps.run(access, _nothing)
    return {"scope": "admin"}


@probe.post("/numbers")
def probe_numbers(body: Numbers) -> dict[str, float]:
    return {"x": body.x}


@probe.post("/rating-error")
def probe_rating_error() -> None:
    raise RatingInputError("weights", "must lie in [0, 1]")


@probe.get("/database-down")
def probe_database_down() -> None:
    raise OperationalError("SELECT 1", {}, Exception("connection refused"))


@probe.get("/boom")
def probe_boom() -> None:
    raise RuntimeError("secret internals")


@pytest.fixture
def db_url(database_url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A migrated, empty database (SQLite, and PostgreSQL when configured; see
    tests/conftest.py), and the settings pointing at it."""
    monkeypatch.setenv("RATINGS_DATABASE_URL", database_url)
    get_settings.cache_clear()
    yield database_url
    dispose_engines()
    get_settings.cache_clear()


@pytest.fixture
def app(db_url: str) -> FastAPI:
    application = create_app()
    application.include_router(probe)
    return application


@pytest.fixture
def client(app: FastAPI) -> Iterator[TestClient]:
    with TestClient(app, raise_server_exceptions=False) as test_client:
        yield test_client


@pytest.fixture
def make_key(db_url: str) -> Callable[[str, str], auth.NewKey]:
    """``make_key(scope, name)``: a committed key."""

    def make(scope: str, name: str) -> auth.NewKey:
        session = session_factory(get_engine(db_url))()
        try:
            new = auth.create_key(session, name=name, scope=scope)
            session.commit()
            return new
        finally:
            session.close()

    return make


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def assert_problem(response: httpx.Response, status: int) -> dict[str, Any]:
    """Assert an RFC 9457 problem document with ``status``; return its body."""
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/problem+json"
    body: dict[str, Any] = response.json()
    assert set(body) == {"type", "title", "status", "detail"}
    assert body["status"] == status
    assert isinstance(body["detail"], str) and body["detail"]
    return body
