"""Request and response bodies of fitting a ladder (``POST /v1/ladders/{ladder}/fit``).

The shape checks follow ``app.domain.documents.shared``: unknown fields are refused, and a
validator's message starts with the field it is about.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool

from app.domain.documents.ladders import LadderUpdated
from app.domain.documents.shared import Algorithm

__all__ = ["FitCandidate", "FitMeasures", "FitOnBound", "FitOutcome", "FitRequest"]

#: The most replays of the training part one fit may ask for (per candidate).
MAX_FIT_EVALUATIONS = 200


class FitRequest(BaseModel):
    """What to fit: the ladder's own algorithm (null), another, or every one (`auto`)."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {"algorithm": None, "train_fraction": 0.5, "apply": True},
                {"algorithm": "auto", "train_fraction": 0.5, "apply": False},
            ]
        },
    )

    algorithm: Algorithm | Literal["auto"] | None = Field(
        default=None,
        description="null: the ladder's own algorithm, from its current parameters; another "
        "algorithm from its defaults; `auto`: every algorithm, choosing the lowest training "
        "loss. Only the ladder's own algorithm can be applied (a ladder keeps its algorithm).",
    )
    train_fraction: float = Field(
        default=0.5,
        gt=0.0,
        lt=1.0,
        description="The share of the ladder's matches (oldest first, in the order it rates "
        "them) fitted on; the rest measures the result.",
    )
    apply: StrictBool = Field(
        default=False,
        description="Change the ladder's parameters to the fitted ones and rebuild it, in "
        "the job's one transaction.",
    )
    max_evaluations: Annotated[int, Field(strict=True, ge=1, le=MAX_FIT_EVALUATIONS)] = Field(
        default=40,
        description="At most this many replays of the training part per algorithm fitted "
        f"fully (1 to {MAX_FIT_EVALUATIONS}).",
    )


class FitMeasures(BaseModel):
    """How parameters predict the later part (ratings learnt from every match before)."""

    prediction_error: float | None = Field(
        description="Wrongly ordered pairs of teams that did not draw (a pair predicted even "
        "counts one half)."
    )
    log_loss: float | None = Field(
        description="Of the first team's win probability, decisive two-team matches; null "
        "when there are none."
    )
    pair_log_loss: float | None = Field(
        description="Mean -log P(a beats b) over every decisive pair of teams."
    )
    brier: float | None


class FitOnBound(BaseModel):
    """A fitted parameter left on an edge of its searched range."""

    parameter: str
    side: Literal["low", "high"]
    bound: float
    limit: bool = Field(description="True when the edge is the parameter's documented limit.")


class FitCandidate(BaseModel):
    """One algorithm searched: its training loss at its start and where the search ended."""

    algorithm: Algorithm
    params: dict[str, float | str] = Field(description="The model's parameters found.")
    train_log_loss_start: float | None
    train_log_loss: float | None
    stage: Literal["full", "short"] = Field(
        description="`full`: fitted as `ratings fit` fits it; `short`: screened out."
    )
    replays: int


class FitOutcome(BaseModel):
    """What a fit found, how it does on the later part against the ladder's current
    parameters, and what applying it changed."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "ladder": "duels",
                    "algorithm": "trueskill",
                    "params": {
                        "mu": 25.0,
                        "sigma": 8.333333333333334,
                        "beta": 6.003526479377388,
                        "tau": 0.5962704734303921,
                        "draw_probability": 0.1,
                        "tau_per_day": 0.0,
                        "conservative_k": 3.0,
                    },
                    "fitted": {
                        "beta": 6.003526479377388,
                        "tau": 0.5962704734303921,
                        "draw_probability": 0.1,
                    },
                    "matches": 6227,
                    "train_matches": 3113,
                    "test_matches": 3114,
                    "train_log_loss_start": 0.589280551280522,
                    "train_log_loss": 0.5837091716414008,
                    "later": {
                        "current": {
                            "prediction_error": 0.30914343983684567,
                            "log_loss": 0.5807838555524233,
                            "pair_log_loss": 0.5807838555524233,
                            "brier": 0.1977550332477602,
                        },
                        "fitted": {
                            "prediction_error": 0.3050645819170632,
                            "log_loss": 0.5725423049143787,
                            "pair_log_loss": 0.5725423049143789,
                            "brier": 0.19536048796097447,
                        },
                    },
                    "gain": {
                        "prediction_error": 0.004078857919782464,
                        "log_loss": 0.008241550638044548,
                    },
                    "candidates": [
                        {
                            "algorithm": "trueskill",
                            "params": {
                                "mu": 25.0,
                                "sigma": 8.333333333333334,
                                "beta": 6.003526479377388,
                                "tau": 0.5962704734303921,
                                "draw_probability": 0.1,
                            },
                            "train_log_loss_start": 0.589280551280522,
                            "train_log_loss": 0.5837091716414008,
                            "stage": "full",
                            "replays": 39,
                        }
                    ],
                    "on_bound": [],
                    "applied": False,
                    "update": None,
                }
            ]
        }
    )

    ladder: str
    algorithm: Algorithm = Field(description="The algorithm fitted (with `auto`: chosen).")
    params: dict[str, float | str] = Field(
        description="Every parameter of a ladder of that algorithm with the fitted ones: "
        "for the ladder's own algorithm its parameters with the fitted ones changed."
    )
    fitted: dict[str, float] = Field(description="The fitted parameters alone.")
    matches: int = Field(description="The ladder's matches that count, when the fit read them.")
    train_matches: int
    test_matches: int
    train_log_loss_start: float | None = Field(
        description="Pair log loss on the training part where the search started (the "
        "ladder's current parameters, or the algorithm's defaults)."
    )
    train_log_loss: float | None = Field(description="The same with the fitted parameters.")
    later: dict[Literal["current", "fitted", "best_default"], FitMeasures] = Field(
        description="The later part: the ladder's algorithm at its current parameters, the "
        "fitted parameters and, with `auto`, the algorithm whose defaults had the lowest "
        "training loss."
    )
    gain: dict[Literal["prediction_error", "log_loss"], float | None] = Field(
        description="current minus fitted on the later part: above 0, the fit predicts better."
    )
    candidates: list[FitCandidate]
    on_bound: list[FitOnBound]
    applied: bool
    update: LadderUpdated | None = Field(
        description="When applied: the ladder with its new parameters and its rebuild."
    )
