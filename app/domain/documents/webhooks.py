"""Webhooks: a receiver registered for some types of event (of some ladders, or all), and
its deliveries."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, JsonValue, field_validator

from app.domain.documents.events import EventType
from app.domain.documents.shared import LadderId

_HOOK: dict[str, JsonValue] = {
    "id": "wh_3f2c9a7e5b1d4c8e",
    "url": "https://game.example.com/hooks/ratings",
    "events": ["match.recorded", "season.started"],
    "ladders": ["arena-duel"],
    "created_at": "2026-11-28T12:00:00Z",
}


class WebhookCreate(BaseModel):
    """A receiver to register."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={"examples": [{k: _HOOK[k] for k in ("url", "events", "ladders")}]},
    )

    url: str = Field(
        min_length=1,
        max_length=2048,
        description="Where each event is POSTed: an `http` or `https` URL.",
    )
    events: list[EventType] = Field(
        min_length=1, max_length=16, description="The types of event it receives."
    )
    ladders: list[LadderId] | None = Field(
        default=None,
        max_length=1000,
        description="The ladders whose events it receives; null: every ladder, those made "
        "later too.",
    )

    @field_validator("url")
    @classmethod
    def _http_url(cls, url: str) -> str:
        scheme, sep, rest = url.partition("://")
        if not sep or scheme.lower() not in ("http", "https") or not rest or rest[0] in "/?#":
            raise ValueError("an http:// or https:// URL with a host")
        if any(ch.isspace() or ord(ch) < 32 for ch in url):
            raise ValueError("no spaces or control characters")
        return url

    @field_validator("events")
    @classmethod
    def _distinct_events(cls, events: list[str]) -> list[str]:
        if len(set(events)) != len(events):
            raise ValueError("a type is named twice")
        return events

    @field_validator("ladders")
    @classmethod
    def _ladder_ids(cls, ladders: list[str] | None) -> list[str] | None:
        if ladders is None:
            return None
        if not ladders:
            raise ValueError("name at least one ladder, or null for every ladder")
        if len(set(ladders)) != len(ladders):
            raise ValueError("a ladder is named twice")
        return ladders


class WebhookOut(BaseModel):
    """A registered receiver; its secret is shown once, when it is made."""

    model_config = ConfigDict(json_schema_extra={"examples": [_HOOK]})

    id: str
    url: str
    events: list[EventType]
    ladders: list[str] | None
    created_at: datetime


class WebhookCreated(WebhookOut):
    """A receiver just registered, with the secret its deliveries are signed with."""

    model_config = ConfigDict(
        json_schema_extra={"examples": [{**_HOOK, "secret": "whsec_k3J9...Qz"}]}
    )

    secret: str = Field(
        description="The key of each delivery's `Ratings-Signature` (HMAC-SHA256 of "
        "`<t>.<body>`); shown this once."
    )


class WebhookList(BaseModel):
    model_config = ConfigDict(json_schema_extra={"examples": [{"webhooks": [_HOOK]}]})

    webhooks: list[WebhookOut]


DeliveryStatus = Literal["delivered", "retrying", "failed"]


class DeliveryOut(BaseModel):
    """One event sent to a receiver: delivered, being retried, or given up on."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "event_id": "5f0c2b7e9a1d4e3f8b6a2c1d0e9f8a7b",
                    "event_type": "match.recorded",
                    "ladder": "arena-duel",
                    "status": "retrying",
                    "attempts": 3,
                    "last_error": "HTTP 503",
                    "first_attempt_at": "2026-11-28T12:00:00Z",
                    "last_attempt_at": "2026-11-28T12:00:07Z",
                    "next_attempt_at": "2026-11-28T12:00:15Z",
                }
            ]
        }
    )

    event_id: str
    event_type: EventType
    ladder: str
    status: DeliveryStatus
    attempts: int
    last_error: str | None
    first_attempt_at: datetime
    last_attempt_at: datetime
    next_attempt_at: datetime | None


class DeliveryPage(BaseModel):
    """A receiver's deliveries, the latest attempted first."""

    deliveries: list[DeliveryOut]
    next_cursor: str | None
