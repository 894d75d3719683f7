"""The response body of a ladder's prediction accuracy (``GET /v1/ladders/{ladder}/accuracy``).

What each figure means: ``app.domain.accuracy`` and ``docs/accuracy.md``.
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["AccuracyOut", "CalibrationBinOut"]


class CalibrationBinOut(BaseModel):
    """One bin of the calibration table: the predictions whose probability fell in it."""

    low: float = Field(description="The bin's lower bound (included).")
    high: float = Field(description="The bin's upper bound (excluded; the last bin's included).")
    count: int = Field(description="Predictions in the bin: one per team of each match scored.")
    mean_predicted: float | None = Field(
        description="The mean predicted probability of finishing first in the bin; null when "
        "it is empty."
    )
    observed: float | None = Field(
        description="The fraction of the bin's teams that did finish first; null when it is "
        "empty. A calibrated ladder has it close to `mean_predicted`."
    )


#: The calibration of the README's walk-through (five matches of "arena-ffa"): (count,
#: mean predicted, observed) per bin.
_EXAMPLE_BINS: list[tuple[int, float | None, float | None]] = [
    (0, None, None),
    (1, 0.198655943, 0.0),
    (1, 0.259530863, 1.0),
    (3, 0.333333333, 0.3333333333333333),
    (0, None, None),
    (0, None, None),
    (0, None, None),
    (1, 0.740469137, 0.0),
    (1, 0.801344057, 1.0),
    (0, None, None),
]


class AccuracyOut(BaseModel):
    """How well the ladder's stored pre-match win probabilities predicted its matches."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "ladder": "arena-ffa",
                    "scope": "all",
                    "window": None,
                    "since": None,
                    "matches": 5,
                    "pairs": 5,
                    "prediction_error": 0.5,
                    "decided": 3,
                    "log_loss": 0.8896522773333334,
                    "brier": 0.30703068666666666,
                    "calibration": [
                        {
                            "low": b / 10,
                            "high": (b + 1) / 10,
                            "count": row[0],
                            "mean_predicted": row[1],
                            "observed": row[2],
                        }
                        for b, row in enumerate(_EXAMPLE_BINS)
                    ],
                }
            ]
        }
    )

    ladder: str
    scope: Literal["all", "window"] = Field(
        description="`all`: every match of the ladder that counts, from its running tally "
        "(no scan); `window`: the newest `window` matches that count (with `since`, those of "
        "them played at or after it)."
    )
    window: int | None = Field(description="The matches the window looked at, at most.")
    since: datetime | None = Field(description="Only matches played at or after this time.")
    matches: int = Field(
        description="Matches scored: those that count (not voided) and have stored win "
        "probabilities (matches recorded before they were stored have none until the ladder "
        "is rebuilt)."
    )
    pairs: int = Field(description="Pairs of teams that did not draw, over the matches scored.")
    prediction_error: float | None = Field(
        description="The fraction of those pairs the win probabilities ordered wrongly (the "
        "team given the higher probability finished behind); a pair given exactly equal "
        "probabilities counts one half. Null without pairs."
    )
    decided: int = Field(
        description="Matches scored with a single winner (one team alone in first place): "
        "those the log loss, the Brier score and the calibration are over."
    )
    log_loss: float | None = Field(
        description="The mean of -log P(winner), P the winner's probability of finishing "
        "first (clipped to [1e-15, 1 - 1e-15]); log 2 = 0.693 is a coin toss between two "
        "teams, log k for k teams. Null without a decided match."
    )
    brier: float | None = Field(
        description="The mean of half the sum over the teams of (p - y)^2, y 1 for the winner "
        "and 0 otherwise: for two teams (p - y)^2 of either team; 0.25 is a coin toss. Null "
        "without a decided match."
    )
    calibration: list[CalibrationBinOut] = Field(
        description="Ten bins of predicted probability, [0, 0.1) to [0.9, 1]: every team of "
        "every decided match is one prediction."
    )
