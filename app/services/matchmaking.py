"""Use case: split players into the most balanced teams of a ladder (nothing is written)."""

from __future__ import annotations

import logging

from sqlalchemy.orm import Session

from app.domain.documents.matchmaking import MatchmakingOut, MatchmakingRequest
from app.domain.ladders import NUMERIC_ERRORS, ladder_config
from app.errors import InvalidInput
from app.rating.base import Rating, RatingInputError
from app.rating.matchmaking import balanced_split
from app.storage.models import Ladder
from app.storage.repositories import ratings as rating_repo

__all__ = ["matchmake"]

_log = logging.getLogger(__name__)


def matchmake(*, session: Session, ladder: Ladder, body: MatchmakingRequest) -> MatchmakingOut:
    """The split of ``body.players`` into ``body.teams`` teams with the highest quality.

    Stored ratings are used as they are (as ``POST .../quality`` does); players the ladder
    does not know count at its prior and are not created. Exact up to 12 players, the
    heuristic of ``app.rating.matchmaking`` beyond.
    """
    config = ladder_config(ladder.algorithm, ladder.params)
    rows = rating_repo.get_ratings(session=session, ladder_id=ladder.id, player_ids=body.players)
    prior = config.model.rating()
    pool = []
    for player in body.players:
        row = rows.get(player)
        if row is None:
            pool.append(prior)
        else:
            pool.append(Rating(row.mu, row.sigma if row.sigma is not None else 0.0))
    try:
        split = balanced_split(config.model, pool, body.teams)
    except RatingInputError as exc:
        raise InvalidInput(f"{exc.argument}: {exc.message}") from None
    except NUMERIC_ERRORS as exc:
        raise _degenerate(ladder, exc) from None
    if not 0.0 <= split.quality <= 1.0:
        raise _degenerate(ladder, ArithmeticError(f"quality {split.quality!r}"))
    return MatchmakingOut(
        teams=[[body.players[i] for i in team] for team in split.teams],
        quality=split.quality,
        exact=split.exact,
    )


def _degenerate(ladder: Ladder, exc: Exception) -> InvalidInput:
    """The model's arithmetic broke down on these ratings (extreme parameters or values)."""
    _log.warning("ladder %s: matchmaking failed: %r", ladder.id, exc)
    return InvalidInput(
        f"players: ladder {ladder.id!r} cannot compute a quality for these players: the "
        "numbers overflow or underflow with its parameters and these ratings"
    )
