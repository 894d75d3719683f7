"""API keys over HTTP: what an admin sends to make one, and what is shown of keys (the
secret once, when it is made; never again)."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, JsonValue

from app.domain.documents.shared import LadderId

Scope = Literal["read", "write", "admin"]

#: A key as listed, for the examples.
_LISTED: dict[str, JsonValue] = {
    "name": "game-server-eu",
    "scope": "write",
    "prefix": "rk_1a2b3c4d",
    "created_at": "2026-11-28T10:00:00Z",
    "last_used_at": "2026-11-28T10:05:00Z",
    "revoked_at": None,
    "ladders": None,
}

_LADDERS = Field(
    default=None,
    description="The ladders the key is good for, and only their routes "
    "(`/v1/ladders/{ladder}/...`): another ladder's, and every route that is not one "
    "ladder's (the ladder list, making a ladder, keys, webhooks), is a 403. Null: every "
    "ladder and route its scope allows.",
)

_NAME = Field(
    min_length=1,
    max_length=128,
    description="A name to recognise the key by; unique among the active keys.",
)


class KeyCreate(BaseModel):
    """A key to make."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {"name": "game-server-eu", "scope": "write"},
                {"name": "arena-server", "scope": "write", "ladders": ["arena-duel"]},
            ]
        },
    )

    name: str = _NAME
    scope: Scope = Field(description="read < write < admin: each allows the weaker ones too.")
    ladders: list[LadderId] | None = Field(
        default=None,
        min_length=1,
        max_length=1_000,
        description="Limit the key to these ladders (each must exist): it is good for "
        "their routes alone. Null or absent: every ladder.",
    )


class KeyOut(BaseModel):
    """A key as listed: never its secret."""

    model_config = ConfigDict(json_schema_extra={"examples": [_LISTED]})

    name: str
    scope: Scope
    prefix: str = Field(description="The key's public part: what revokes it.")
    created_at: datetime
    last_used_at: datetime | None = Field(
        description="When a request last used it (written at most once a minute)."
    )
    revoked_at: datetime | None
    ladders: list[str] | None = _LADDERS


class KeyCreated(BaseModel):
    """A key just made: ``key`` is shown this once and kept nowhere (only its hash is)."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "name": "game-server-eu",
                    "scope": "write",
                    "prefix": "rk_1a2b3c4d",
                    "key": "rk_1a2b3c4d_X9m2Lq0aVvR3nZk7pW1sYb4tHc8dEf6gJi5oUu2yTq0",
                    "created_at": "2026-11-28T10:00:00Z",
                    "ladders": None,
                }
            ]
        }
    )

    name: str
    scope: Scope
    prefix: str
    key: str = Field(description="`Authorization: Bearer <key>`. Shown this once.")
    created_at: datetime
    ladders: list[str] | None = _LADDERS


class KeyList(BaseModel):
    """Every key, revoked ones too, oldest first."""

    model_config = ConfigDict(json_schema_extra={"examples": [{"keys": [_LISTED]}]})

    keys: list[KeyOut]
