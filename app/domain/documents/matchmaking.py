"""Request and response bodies of matchmaking (``http-api.md``, "Predictions and matchmaking").

The shape checks follow ``app.domain.documents.shared``: unknown fields are refused, and a
validator's message starts with the field it is about.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator

from app.domain.documents.shared import MAX_ID_LENGTH, MAX_PLAYERS, MAX_TEAMS, PlayerId

__all__ = ["MatchmakingOut", "MatchmakingRequest"]


class MatchmakingRequest(BaseModel):
    """Players to split into balanced teams; players never seen count at the ladder's prior."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {"players": ["alice", "bob", "carol", "dave"], "teams": 2},
                {"players": ["p1", "p2", "p3", "p4", "p5", "p6", "p7", "p8", "p9"], "teams": 3},
            ]
        },
    )

    players: list[PlayerId] = Field(
        min_length=2,
        max_length=MAX_PLAYERS,
        description=f"Player ids, each once: at least `teams` and at most {MAX_PLAYERS}.",
    )
    teams: Annotated[int, Field(strict=True, ge=2, le=MAX_TEAMS)] = Field(
        default=2,
        description=f"How many teams to make: 2 to {MAX_TEAMS} (default 2).",
    )

    @field_validator("players")
    @classmethod
    def _players_once(cls, players: list[str]) -> list[str]:
        seen: set[str] = set()
        for player in players:
            if player in seen:
                raise ValueError(f"players: player {player[:MAX_ID_LENGTH]!r} appears twice")
            seen.add(player)
        return players

    @field_validator("teams")
    @classmethod
    def _enough_players(cls, teams: int, info: ValidationInfo) -> int:
        players = info.data.get("players")
        if players is not None and len(players) < teams:
            raise ValueError(
                f"players: {len(players)} players cannot make {teams} teams; "
                f"at least {teams} are needed"
            )
        return teams


class MatchmakingOut(BaseModel):
    """The most balanced split found, with its match quality."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "teams": [["alice", "dave"], ["bob", "carol"]],
                    "quality": 0.4472135954999579,
                    "exact": True,
                }
            ]
        }
    )

    teams: list[list[str]] = Field(
        description="Player ids per team. Sizes are equal, or differ by one (larger teams "
        "first); within a team players keep their order in the request."
    )
    quality: float = Field(
        description="The match quality of these teams, in (0, 1]: what `POST .../quality` "
        "answers for them."
    )
    exact: bool = Field(
        description="True when the split is proven best (at most 12 players, every split "
        "evaluated); false for the heuristic used beyond."
    )
