"""The quality query: proposed teams, and their quality, win and draw probabilities and
predicted finishing order."""

from __future__ import annotations

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
)

from app.domain.documents.shared import TeamsBody

# -- predictions ----------------------------------------------------------------------------


class QualityRequest(TeamsBody):
    """Proposed teams; players never seen count at the ladder's prior."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {"teams": [["alice", "bob"], ["carol", "dave"]]},
                {"teams": [["alice"], ["bob"], ["carol"]], "weights": [[1.0], [0.5], [1.0]]},
            ]
        },
    )


class PredictedRankOut(BaseModel):
    """One team's predicted place in the finishing order."""

    rank: int = Field(description="1 is first; teams with equal chances share a rank.")
    probability: float = Field(
        description="The team's mean chance of beating each other team, normalised over "
        "the teams to sum to 1; the ranks follow it, highest first."
    )


class QualityOut(BaseModel):
    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "quality": 0.4472135954999579,
                    "win_probabilities": [0.5, 0.5],
                    "draw_probability": 0.1,
                    "predicted_ranks": [
                        {"rank": 1, "probability": 0.5},
                        {"rank": 1, "probability": 0.5},
                    ],
                }
            ]
        }
    )

    quality: float = Field(description="How balanced the match is, in (0, 1].")
    win_probabilities: list[float] = Field(description="One per team, summing to 1.")
    draw_probability: float | None = Field(description="Null where the model has no draws.")
    predicted_ranks: list[PredictedRankOut] = Field(
        description="The predicted finishing order: one entry per team, in the teams' order."
    )
