"""Use case: quality, win and draw probabilities and the predicted finishing order of
proposed teams (nothing is written)."""

from __future__ import annotations

from sqlalchemy.orm import Session

from app.domain.documents.predictions import PredictedRankOut, QualityOut, QualityRequest
from app.domain.ladders import (
    NUMERIC_ERRORS,
    degenerate,
    ladder_config,
)
from app.errors import InvalidInput
from app.rating.base import RatingInputError
from app.rating.quality import predict_rank
from app.services.players import rating_of
from app.storage.models import Ladder
from app.storage.repositories import ratings as rating_repo


def _invalid(exc: RatingInputError) -> InvalidInput:
    return InvalidInput(f"{exc.argument}: {exc.message}")


def predict(*, session: Session, ladder: Ladder, body: QualityRequest) -> QualityOut:
    """Quality, win and draw probabilities and predicted ranks of proposed teams; nothing
    is written."""
    config = ladder_config(ladder.algorithm, ladder.params)
    player_ids = [player for team in body.teams for player in team]
    rows = rating_repo.get_ratings(session=session, ladder_id=ladder.id, player_ids=player_ids)
    prior = config.model.rating()
    teams = [
        [rating_of(rows[player]) if player in rows else prior for player in team]
        for team in body.teams
    ]
    try:
        quality = config.model.quality(teams, body.weights, body.advantage)
        win = config.model.win_probabilities(teams, body.weights, body.advantage)
        draw = config.model.draw_probability(teams, body.weights, body.advantage)
        ranks = predict_rank(config.model, teams, body.weights, body.advantage)
    except RatingInputError as exc:
        raise _invalid(exc) from None
    except NUMERIC_ERRORS as exc:
        raise degenerate(ladder.id, exc) from None
    numbers = [quality, *win, *(r.probability for r in ranks)] + ([] if draw is None else [draw])
    if not all(0.0 <= x <= 1.0 for x in numbers):
        raise degenerate(ladder.id, ArithmeticError(f"probabilities {numbers!r}"))
    return QualityOut(
        quality=quality,
        win_probabilities=win,
        draw_probability=draw,
        predicted_ranks=[PredictedRankOut(rank=r.rank, probability=r.probability) for r in ranks],
    )
