"""Use cases: create ladders, record matches, read leaderboards, players and predictions.

Services coordinate repositories and the rating core; they raise the domain errors of
``app.errors`` and never commit (the request's transaction does).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import logging
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import lru_cache
from typing import Any

from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from app.api.schemas import (
    MAX_MU,
    MAX_SIGMA,
    HistoryEntry,
    HistoryPage,
    LadderCreate,
    LadderOut,
    LadderPage,
    LeaderboardEntry,
    LeaderboardPage,
    MatchCreate,
    PlayerOut,
    PlayerSeed,
    QualityOut,
    QualityRequest,
    RatingOut,
)
from app.errors import Conflict, InvalidInput, NotFound
from app.rating.base import CONSERVATIVE_K, Rating, RatingInputError, RatingModel
from app.rating.registry import make_model
from app.storage import repositories
from app.storage.models import Ladder, PlayerRating, RatingHistory

#: Ladder-level parameters of the Bayesian models (not the model's own).
LADDER_PARAMS: dict[str, float] = {"tau_per_day": 0.0, "conservative_k": CONSERVATIVE_K}
BAYESIAN = frozenset({"trueskill", "plackett_luce"})
SECONDS_PER_DAY = 86_400.0
#: What a model's arithmetic may raise on degenerate numbers besides RatingInputError.
NUMERIC_ERRORS = (ArithmeticError, ValueError)
#: The largest magnitude stored for mu or sigma (the schema's CHECK allows up to 1e308).
MAX_FINITE = 1e300

_log = logging.getLogger(__name__)
LADDER_ID = re.compile(r"[a-z0-9_-]{1,64}")


def utc(moment: datetime) -> datetime:
    """SQLite returns naive datetimes even for timezone-aware columns; they are UTC."""
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


# -- ladders --------------------------------------------------------------------------------


@lru_cache(maxsize=256)
def _model(algorithm: str, params_json: str) -> RatingModel:
    # Models are immutable values: one per distinct configuration is enough.
    return make_model(algorithm, json.loads(params_json))


@dataclass(frozen=True)
class LadderConfig:
    """A ladder's model and its ladder-level parameters."""

    model: RatingModel
    bayesian: bool
    tau_per_day: float
    conservative_k: float

    def conservative(self, rating: Rating) -> float:
        return rating.conservative(self.conservative_k) if self.bayesian else rating.mu

    def out(self, rating: Rating) -> RatingOut:
        return RatingOut(
            mu=rating.mu,
            sigma=rating.sigma if self.bayesian else None,
            conservative=self.conservative(rating),
        )

    def stored_sigma(self, rating: Rating) -> float | None:
        return rating.sigma if self.bayesian else None


def _split_params(
    algorithm: str, params: Mapping[str, int | float | str]
) -> tuple[dict[str, Any], dict[str, float]]:
    model_params = dict(params)
    ladder_params: dict[str, float] = {}
    if algorithm in BAYESIAN:
        for name, default in LADDER_PARAMS.items():
            value = model_params.pop(name, default)
            if isinstance(value, str) or not math.isfinite(value) or value < 0:
                raise InvalidInput(f"params.{name}: must be a finite number >= 0")
            ladder_params[name] = float(value)
        if ladder_params["tau_per_day"] > MAX_SIGMA:
            raise InvalidInput(f"params.tau_per_day: must be at most {MAX_SIGMA:g}")
        if ladder_params["conservative_k"] > 100:
            raise InvalidInput("params.conservative_k: must be at most 100")
    return model_params, ladder_params


def ladder_config(ladder: Ladder) -> LadderConfig:
    model_params, ladder_params = _split_params(ladder.algorithm, ladder.params)
    return LadderConfig(
        model=_model(ladder.algorithm, json.dumps(model_params, sort_keys=True)),
        bayesian=ladder.algorithm in BAYESIAN,
        tau_per_day=ladder_params.get("tau_per_day", 0.0),
        conservative_k=ladder_params.get("conservative_k", CONSERVATIVE_K),
    )


def full_params(algorithm: str, params: Mapping[str, int | float | str]) -> dict[str, float | str]:
    """Every parameter with its default filled in; ``InvalidInput`` naming a bad one."""
    known = set(_model(algorithm, "{}").params)
    if algorithm in BAYESIAN:
        known.update(LADDER_PARAMS)
    for name in params:
        if name not in known:
            raise InvalidInput(
                f"params.{name}: unknown parameter for {algorithm}; "
                f"expected some of {', '.join(sorted(known))}"
            )
    model_params, ladder_params = _split_params(algorithm, params)
    try:
        model = _model(algorithm, json.dumps(model_params, sort_keys=True))
    except RatingInputError as exc:
        field = (
            exc.argument if exc.argument in ("algorithm", "params") else f"params.{exc.argument}"
        )
        raise InvalidInput(f"{field}: {exc.message}") from None
    full: dict[str, float | str] = dict(model.params)
    full.update(ladder_params)
    prior = model.rating()
    if not abs(prior.mu) <= MAX_MU:
        name = "mu" if algorithm in BAYESIAN else "initial"
        raise InvalidInput(f"params.{name}: |value| must be at most {MAX_MU:g}")
    if not 0.0 <= prior.sigma <= MAX_SIGMA:
        raise InvalidInput(f"params.sigma: must be in (0, {MAX_SIGMA:g}]")
    _probe(model)
    return full


def _probe(model: RatingModel) -> None:
    """Refuse parameters the model cannot compute with (extreme scales underflow to 0):
    rate and predict a 1 v 1 and a three-team match of new players once."""
    prior = model.rating()
    try:
        for teams in ([[prior], [prior]], [[prior], [prior, prior], [prior]]):
            numbers = [model.quality(teams), *model.win_probabilities(teams)]
            numbers.extend(x for team in model.rate(teams) for r in team for x in r)
            draw = model.draw_probability(teams)
            if draw is not None:
                numbers.append(draw)
            if not all(math.isfinite(x) for x in numbers):
                raise ArithmeticError("not finite")
    except NUMERIC_ERRORS:
        raise InvalidInput(
            "params: the model cannot compute with these values (they underflow or overflow); "
            "choose less extreme ones"
        ) from None


#: Rating buckets per prior sigma (TrueSkill, Plackett-Luce) and per Elo scale: at a
#: million players the fullest bucket holds a few thousand and the ladder a few hundred
#: buckets (measured with ``benchmarks/http.py``).
BUCKETS_PER_SIGMA = 32.0
BUCKETS_PER_ELO_SCALE = 128.0


def bucket_width(algorithm: str, params: Mapping[str, float | str]) -> float:
    """The width of a new ladder's rating buckets (``rating_buckets``): a power of two, so
    dividing by it and its multiples are exact. It only tunes how fast a rank is found."""
    if algorithm in BAYESIAN:
        scale, per = params.get("sigma", 25.0 / 3.0), BUCKETS_PER_SIGMA
    else:
        scale, per = params.get("scale", 400.0), BUCKETS_PER_ELO_SCALE
    if isinstance(scale, str) or not (math.isfinite(scale) and scale > 0):
        return 1.0
    return 2.0 ** min(max(round(math.log2(scale / per)), -40), 40)


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


def encode_cursor(key: list[Any]) -> str:
    """An opaque cursor: URL-safe base64 of the last entry's key as JSON."""
    raw = json.dumps(key, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(cursor: str) -> Any:
    try:
        if len(cursor) > 1024:
            raise ValueError("too long")
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        if b"\\u0000" in raw or b"\x00" in raw:
            raise ValueError("NUL")  # never in a key this service wrote
        return json.loads(raw)
    except (ValueError, binascii.Error, UnicodeDecodeError):
        raise InvalidInput("cursor: not a cursor returned by this service") from None


# -- matches --------------------------------------------------------------------------------


def _rating_of(row: PlayerRating) -> Rating:
    return Rating(row.mu, row.sigma if row.sigma is not None else 0.0)


def canonical_request(body: MatchCreate) -> dict[str, Any]:
    """What identifies a match for idempotency: the body without ``match_id``."""
    return {
        "teams": body.teams,
        "ranks": body.ranks,
        "scores": body.scores,
        "weights": body.weights,
        "played_at": body.played_at.isoformat() if body.played_at is not None else None,
        "meta": body.meta,
    }


_canonical_json = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode


def body_hash(canonical: dict[str, Any]) -> str:
    return hashlib.sha256(_canonical_json(canonical).encode()).hexdigest()


def dense_ranks(outcome: Sequence[float]) -> list[int]:
    """1 for the best outcome, tied teams share a rank, the next distinct outcome is +1."""
    order = {value: i + 1 for i, value in enumerate(sorted(set(outcome)))}
    return [order[value] for value in outcome]


def outcome(body: MatchCreate) -> list[float]:
    """Lower is better: ranks as given, scores negated, or the listed order."""
    return outcome_of(body.ranks, body.scores, len(body.teams))


def outcome_of(
    ranks: Sequence[float] | None, scores: Sequence[float] | None, teams: int
) -> list[float]:
    if ranks is not None:
        return list(ranks)
    if scores is not None:
        return [-score for score in scores]
    return [float(j) for j in range(teams)]


def _invalid(exc: RatingInputError) -> InvalidInput:
    return InvalidInput(f"{exc.argument}: {exc.message}")


def degenerate(ladder: Ladder, exc: Exception) -> InvalidInput:
    """The model's arithmetic broke down on these ratings (extreme parameters or values)."""
    _log.warning("ladder %s: the model failed on a match: %r", ladder.id, exc)
    return InvalidInput(
        f"teams: ladder {ladder.id!r} cannot rate these teams: the numbers overflow or "
        "underflow with its parameters and these ratings"
    )


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
