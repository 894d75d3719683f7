"""Events: what a consumer acts on, each as the feed pages it and as a webhook delivers it."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

EventType = Literal[
    "match.recorded",
    "match.voided",
    "ladder.rebuilt",
    "season.started",
    "player.erased",
    "player.tier_changed",
]

_EXAMPLE: dict[str, Any] = {
    "id": "5f0c2b7e9a1d4e3f8b6a2c1d0e9f8a7b",
    "type": "match.voided",
    "ladder": "halo-ffa",
    "created_at": "2026-11-28T12:00:00Z",
    "data": {
        "match_id": "g-1042",
        "ladder": "halo-ffa",
        "voided_at": "2026-11-28T12:00:00Z",
        "already_voided": False,
        "matches_rerated": 118,
        "players_affected": 41,
    },
}


class EventOut(BaseModel):
    """A change of a ladder, written in the same transaction as the change."""

    model_config = ConfigDict(json_schema_extra={"examples": [_EXAMPLE]})

    id: str = Field(description="Unique; a webhook delivery carries it as `Ratings-Event-Id`.")
    type: EventType
    ladder: str
    created_at: datetime
    data: dict[str, Any] = Field(
        description="`match.recorded`: the match's result document (with its `seq`); "
        "`match.voided`: the void's summary; `ladder.rebuilt`: the rebuild's; "
        "`season.started`: the season; `player.erased`: the erasure's, with the erased id; "
        "`player.tier_changed`: the player, the tiers from and to, and the change that "
        "moved them (:class:`TierChange`)."
    )


class EventPage(BaseModel):
    """A ladder's events, oldest first."""

    model_config = ConfigDict(
        json_schema_extra={"examples": [{"events": [_EXAMPLE], "next_cursor": "WzQyXQ"}]}
    )

    events: list[EventOut]
    next_cursor: str = Field(
        description="Pass it as `after` for the events after these: the same cursor again "
        "when there were none (poll with it). Never skips an event."
    )


TierCause = Literal[
    "match.recorded", "match.voided", "ladder.rebuilt", "player.seeded", "ratings.aged"
]


class TierChange(BaseModel):
    """The data of ``player.tier_changed``: a write moved a player to another tier by a
    ladder's tiers by threshold (placement included: a player who places enters a tier,
    one who is provisional again leaves it)."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "player_id": "alice",
                    "from": "Silver",
                    "to": "Gold",
                    "conservative": 20.41,
                    "season": "1",
                    "cause": "match.recorded",
                    "match_id": "g-1042",
                }
            ]
        },
        populate_by_name=True,
    )

    player_id: str
    from_tier: str | None = Field(
        alias="from", description="The tier before the change (null: none, or provisional)."
    )
    to_tier: str | None = Field(
        alias="to", description="The tier after it (null: none, or provisional)."
    )
    conservative: float | None = Field(
        description="The conservative rating after the change (null: the player left the "
        "ladder, their only match voided)."
    )
    season: str = Field(description="The ladder's current season.")
    cause: TierCause = Field(
        description="What moved the rating: a match recorded, a match voided (the later "
        "matches re-rated), a rebuild, a seed (`PUT .../players/{id}`), or the daily "
        "inactivity pass (time away widened the rating)."
    )
    match_id: str | None = Field(
        default=None,
        description="`match.recorded`: the player's last match of the write; "
        "`match.voided`: the match voided; else null.",
    )
