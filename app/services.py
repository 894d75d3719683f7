"""Use cases: create ladders, record matches, read leaderboards, players and predictions.

Services coordinate repositories and the rating core; they raise the domain errors of
``app.errors`` and never commit (the request's transaction does).
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from datetime import datetime

from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from app.api.schemas import (
    HistoryEntry,
    HistoryPage,
    LadderCreate,
    LadderOut,
    LadderPage,
    LeaderboardEntry,
    LeaderboardPage,
    PlayerOut,
    PlayerSeed,
    QualityOut,
    QualityRequest,
)
from app.domain.cursors import decode_cursor, encode_cursor
from app.domain.ladders import (
    BAYESIAN,
    LADDER_ID,
    NUMERIC_ERRORS,
    bucket_width,
    degenerate,
    full_params,
    ladder_config,
)
from app.domain.times import utc
from app.errors import Conflict, InvalidInput, NotFound
from app.rating.base import Rating, RatingInputError
from app.storage import repositories
from app.storage.models import Ladder, PlayerRating, RatingHistory

# -- ladders --------------------------------------------------------------------------------


def create_ladder(*, session: Session, body: LadderCreate, now: datetime) -> tuple[LadderOut, bool]:
    """Create the ladder, or find the identical one. Returns (ladder, created)."""
    params = full_params(body.algorithm, body.params)
    existing = repositories.get_ladder(session=session, ladder_id=body.id)
    if existing is None:
        ladder = Ladder(
            id=body.id,
            algorithm=body.algorithm,
            params=params,
            description=body.description,
            created_at=now,
            bucket_width=bucket_width(body.algorithm, params),
        )
        try:
            repositories.add_ladder(session=session, ladder=ladder)
        except IntegrityError:
            existing = repositories.get_ladder(session=session, ladder_id=body.id)
            if existing is None:
                raise
        else:
            return ladder_view(session=session, ladder=ladder), True
    same = existing.algorithm == body.algorithm and existing.params == params
    if body.description is not None and body.description != existing.description:
        same = False
    if not same:
        raise Conflict(f"id: ladder {body.id!r} exists with a different configuration")
    return ladder_view(session=session, ladder=existing), False


def ladder_view(*, session: Session, ladder: Ladder) -> LadderOut:
    return _ladder_views(session=session, ladders=[ladder])[0]


def _ladder_views(*, session: Session, ladders: Sequence[Ladder]) -> list[LadderOut]:
    ids = [ladder.id for ladder in ladders]
    players = repositories.count_players(session=session, ladder_ids=ids) if ids else {}
    matches = repositories.count_matches(session=session, ladder_ids=ids) if ids else {}
    return [
        LadderOut(
            id=ladder.id,
            algorithm=ladder.algorithm,
            params=ladder.params,
            description=ladder.description,
            created_at=utc(ladder.created_at),
            players=players.get(ladder.id, 0),
            matches=matches.get(ladder.id, 0),
        )
        for ladder in ladders
    ]


def list_ladders(*, session: Session, limit: int, cursor: str | None) -> LadderPage:
    after = None
    if cursor is not None:
        key = decode_cursor(cursor)
        if not (isinstance(key, list) and len(key) == 1 and isinstance(key[0], str)):
            raise InvalidInput("cursor: not a cursor of this list")
        after = key[0]
    ladders = repositories.list_ladders(session=session, after=after, limit=limit + 1)
    more = len(ladders) > limit
    ladders = ladders[:limit]
    return LadderPage(
        entries=_ladder_views(session=session, ladders=ladders),
        next_cursor=encode_cursor([ladders[-1].id]) if more else None,
    )


def get_ladder(*, session: Session, ladder_id: str, detached: bool = False) -> Ladder:
    """The ladder, or a 404. ``detached``: for a read, which never changes the ladder (see
    :func:`repositories.read_ladder`)."""
    # An id that breaks the id rules cannot exist; it is not even looked up.
    ladder = None
    if LADDER_ID.fullmatch(ladder_id):
        read = repositories.read_ladder if detached else repositories.get_ladder
        ladder = read(session=session, ladder_id=ladder_id)
    if ladder is None:
        raise NotFound(f"ladder: no ladder {ladder_id[:64]!r}")
    return ladder


# -- cursors --------------------------------------------------------------------------------


# -- matches --------------------------------------------------------------------------------


def _rating_of(row: PlayerRating) -> Rating:
    return Rating(row.mu, row.sigma if row.sigma is not None else 0.0)


def _invalid(exc: RatingInputError) -> InvalidInput:
    return InvalidInput(f"{exc.argument}: {exc.message}")


def match_result(*, session: Session, ladder: Ladder, match_id: str) -> str:
    match = repositories.find_match(session=session, ladder_id=ladder.id, match_id=match_id)
    if match is None:
        raise NotFound(f"match_id: no match {match_id[:128]!r} in ladder {ladder.id!r}")
    return match.result


def list_matches(
    *,
    session: Session,
    ladder: Ladder,
    player_id: str | None,
    limit: int,
    cursor: str | None,
) -> str:
    """A page of match results, newest first, as JSON text (the stored documents verbatim)."""
    before_seq = None
    if cursor is not None:
        key = decode_cursor(cursor)
        if not (isinstance(key, list) and len(key) == 1 and type(key[0]) is int):
            raise InvalidInput("cursor: not a cursor of this list")
        before_seq = key[0]
    matches = repositories.list_matches(
        session=session,
        ladder_id=ladder.id,
        player_id=player_id,
        before_seq=before_seq,
        limit=limit + 1,
    )
    more = len(matches) > limit
    matches = matches[:limit]
    next_cursor = encode_cursor([matches[-1].seq]) if more else None
    entries = ",".join(match.result for match in matches)
    return f'{{"entries":[{entries}],"next_cursor":{json.dumps(next_cursor)}}}'


# -- players and leaderboard ----------------------------------------------------------------


def leaderboard(
    *, session: Session, ladder: Ladder, limit: int, cursor: str | None, min_matches: int
) -> LeaderboardPage:
    after: tuple[float, str] | None = None
    if cursor is not None:
        key = decode_cursor(cursor)
        if not (
            isinstance(key, list)
            and len(key) == 2
            and isinstance(key[0], int | float)
            and not isinstance(key[0], bool)
            and math.isfinite(key[0])
            and isinstance(key[1], str)
        ):
            raise InvalidInput("cursor: not a cursor of this leaderboard")
        after = (float(key[0]), key[1])
    rows = repositories.leaderboard(
        session=session, ladder_id=ladder.id, after=after, limit=limit + 1, min_matches=min_matches
    )
    more = len(rows) > limit
    rows = rows[:limit]
    first_rank = 1
    if rows and after is not None:
        first_rank += repositories.count_ahead(
            session=session,
            ladder_id=ladder.id,
            bucket_width=ladder.bucket_width,
            conservative=rows[0].conservative,
            player_id=rows[0].player_id,
            min_matches=min_matches,
        )
    bayesian = ladder.algorithm in BAYESIAN
    # Typed values from the database: constructed without validating them again, which
    # cost a first page more CPU time than reading its rows.
    entries = [
        LeaderboardEntry.model_construct(
            rank=first_rank + n,
            player_id=row.player_id,
            mu=row.mu,
            sigma=row.sigma if bayesian else None,
            conservative=row.conservative,
            matches=row.matches,
            last_played_at=utc(row.last_played_at) if row.last_played_at else None,
        )
        for n, row in enumerate(rows)
    ]
    next_cursor = encode_cursor([rows[-1].conservative, rows[-1].player_id]) if more else None
    return LeaderboardPage(entries=entries, next_cursor=next_cursor)


def _player_view(
    *,
    session: Session,
    ladder: Ladder,
    row: PlayerRating | repositories.RatingRow,
    own_writes: bool = False,
) -> PlayerOut:
    ahead = repositories.count_ahead(
        session=session,
        ladder_id=ladder.id,
        bucket_width=ladder.bucket_width,
        conservative=row.conservative,
        player_id=row.player_id,
        min_matches=0,
        own_writes=own_writes,
    )
    return PlayerOut(
        ladder=ladder.id,
        player_id=row.player_id,
        mu=row.mu,
        sigma=row.sigma,
        conservative=row.conservative,
        rank=ahead + 1,
        matches=row.matches,
        last_played_at=utc(row.last_played_at) if row.last_played_at else None,
    )


def _unknown_player(ladder: Ladder, player_id: str) -> NotFound:
    return NotFound(f"player_id: no player {player_id[:128]!r} in ladder {ladder.id!r}")


def get_player(*, session: Session, ladder: Ladder, player_id: str) -> PlayerOut:
    row = repositories.read_rating(session=session, ladder_id=ladder.id, player_id=player_id)
    if row is None:
        raise _unknown_player(ladder, player_id)
    return _player_view(session=session, ladder=ladder, row=row)


def seed_player(
    *, session: Session, ladder: Ladder, player_id: str, body: PlayerSeed, now: datetime
) -> PlayerOut:
    """Set a player's rating (creating the player); history records an adjustment."""
    if not 1 <= len(player_id) <= 128:
        raise InvalidInput("player_id: 1 to 128 characters")
    config = ladder_config(ladder)
    prior = config.model.rating()
    if config.bayesian:
        new = Rating(body.mu, body.sigma if body.sigma is not None else prior.sigma)
    elif body.sigma is not None:
        raise InvalidInput("sigma: an Elo rating has no sigma; omit it")
    else:
        new = Rating(body.mu, 0.0)
    repositories.insert_missing_ratings(
        session=session,
        ladder_id=ladder.id,
        player_ids=[player_id],
        mu=prior.mu,
        sigma=config.stored_sigma(prior),
        conservative=config.conservative(prior),
        now=now,
    )
    row = repositories.lock_rating(session=session, ladder_id=ladder.id, player_id=player_id)
    if row is None:  # inserted just above, in this transaction
        raise _unknown_player(ladder, player_id)
    old = _rating_of(row)
    row.mu = new.mu
    row.sigma = config.stored_sigma(new)
    row.conservative = config.conservative(new)
    row.updated_at = now
    repositories.add_history(
        session=session,
        entry=RatingHistory(
            ladder_id=ladder.id,
            player_id=player_id,
            kind="adjustment",
            match_seq=None,
            match_id=None,
            played_at=now,
            mu_before=old.mu,
            sigma_before=config.stored_sigma(old),
            mu_after=new.mu,
            sigma_after=config.stored_sigma(new),
        ),
    )
    return _player_view(session=session, ladder=ladder, row=row, own_writes=True)


def player_history(
    *, session: Session, ladder: Ladder, player_id: str, limit: int, cursor: str | None
) -> HistoryPage:
    if repositories.read_rating(session=session, ladder_id=ladder.id, player_id=player_id) is None:
        raise _unknown_player(ladder, player_id)
    before_id = None
    if cursor is not None:
        key = decode_cursor(cursor)
        if not (isinstance(key, list) and len(key) == 1 and type(key[0]) is int):
            raise InvalidInput("cursor: not a cursor of this history")
        before_id = key[0]
    config = ladder_config(ladder)
    rows = repositories.history(
        session=session,
        ladder_id=ladder.id,
        player_id=player_id,
        before_id=before_id,
        limit=limit + 1,
    )
    more = len(rows) > limit
    rows = rows[:limit]
    entries = [
        HistoryEntry(
            kind=row.kind,
            match_id=row.match_id,
            played_at=utc(row.played_at),
            before=config.out(Rating(row.mu_before, row.sigma_before or 0.0)),
            after=config.out(Rating(row.mu_after, row.sigma_after or 0.0)),
        )
        for row in rows
    ]
    return HistoryPage(entries=entries, next_cursor=encode_cursor([rows[-1].id]) if more else None)


# -- predictions ----------------------------------------------------------------------------


def predict(*, session: Session, ladder: Ladder, body: QualityRequest) -> QualityOut:
    """Quality, win and draw probabilities of proposed teams; nothing is written."""
    config = ladder_config(ladder)
    player_ids = [player for team in body.teams for player in team]
    rows = repositories.get_ratings(session=session, ladder_id=ladder.id, player_ids=player_ids)
    prior = config.model.rating()
    teams = [
        [_rating_of(rows[player]) if player in rows else prior for player in team]
        for team in body.teams
    ]
    try:
        quality = config.model.quality(teams, body.weights)
        win = config.model.win_probabilities(teams, body.weights)
        draw = config.model.draw_probability(teams, body.weights)
    except RatingInputError as exc:
        raise _invalid(exc) from None
    except NUMERIC_ERRORS as exc:
        raise degenerate(ladder, exc) from None
    numbers = [quality, *win] + ([] if draw is None else [draw])
    if not all(0.0 <= x <= 1.0 for x in numbers):
        raise degenerate(ladder, ArithmeticError(f"probabilities {numbers!r}"))
    return QualityOut(quality=quality, win_probabilities=win, draw_probability=draw)
