"""Use cases: the leaderboard, a player's rating, rank and history, and seeding a rating."""

from __future__ import annotations

import json
import math
import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypeVar, cast

from sqlalchemy.orm import Session

from app.domain.cursors import decode_cursor, encode_cursor
from app.domain.documents.players import (
    HistoryEntry,
    HistoryPage,
    LeaderboardEntry,
    LeaderboardPage,
    PlayerOut,
    PlayerSeed,
)
from app.domain.ladders import (
    BAYESIAN,
    LadderConfig,
    config_of,
    ladder_config,
    parameter_table,
)
from app.domain.placement import is_provisional
from app.domain.tiers import (
    Key,
    Tiering,
    at_or_above,
    by_percentile,
    rank_limits,
    tier_names,
    tier_of,
    tier_of_rank,
    tier_range,
)
from app.domain.times import utc
from app.errors import InvalidInput, NotFound
from app.rating.base import Rating
from app.services import events
from app.services.seasons import reset_unreached, seasons_of
from app.storage import versions
from app.storage.models import Ladder, PlayerRating, RatingHistory
from app.storage.repositories import ladders as ladder_repo
from app.storage.repositories import matches as match_repo
from app.storage.repositories import ratings as rating_repo
from app.storage.repositories.ratings import Standing

T = TypeVar("T")


def rating_of(row: PlayerRating) -> Rating:
    return Rating(row.mu, row.sigma if row.sigma is not None else 0.0)


def leaderboard(
    *,
    session: Session,
    ladder: Ladder,
    limit: int,
    cursor: str | None,
    min_matches: int,
    around: str | None = None,
    tier: str | None = None,
    include_provisional: bool = False,
) -> LeaderboardPage:
    """A page of the leaderboard: the first, the one a cursor names (after its key, or
    before it for a ``prev_cursor``), or the one centred on the player ``around``; with
    ``tier``, of that tier's players alone (ranked on the whole leaderboard). Provisional
    players are left out unless ``include_provisional``."""
    if tier is not None and tier not in tier_names(ladder.tiers):
        names = ", ".join(repr(name) for name in tier_names(ladder.tiers)) or "none"
        raise InvalidInput(
            f"tier: ladder {ladder.id!r} has no tier {tier[:32]!r} (its tiers: {names})"
        )
    # Tiers by percentile: an entry's rank gives its tier, unless the ranks count only the
    # players with min_matches: then each tier's cutoff on the leaderboard does.
    board = _Board(
        ladder, min_matches, include_provisional, tiering(session, ladder, min_matches > 0)
    )
    if around is not None:
        if cursor is not None or tier is not None:
            raise InvalidInput("around: give around alone, not with a cursor or a tier")
        return _around(session=session, board=board, limit=limit, player_id=around)
    key, backward = _leaderboard_key(cursor)
    if tier is not None and by_percentile(ladder.tiers):
        return _percentile_tier(session, board, tier, key, backward, limit)
    bounds = tier_range(ladder.tiers, tier) if tier is not None else None
    rows = board.rows(session, after=key, limit=limit + 1, backward=backward, bounds=bounds)
    more = len(rows) > limit
    rows = rows[:limit]
    # A tier's first page starts at the tier's top: its first rank is counted too.
    counted = bounds is not None
    if backward:  # the rows before the key, nearest first: then the key's side
        return _page(session, board, rows[::-1], before=more, after=True, counted=counted)
    return _page(session, board, rows, before=key is not None, after=more, counted=counted)


def _percentile_tier(
    session: Session,
    board: _Board,
    tier: str,
    key: Key | None,
    backward: bool,
    limit: int,
) -> LeaderboardPage:
    """A page of a tier by percentile: the leaderboard from the cutoff of the tiers above
    (after it) to the tier's own (at or above it)."""
    top, bottom = _span(session, board.ladder, tier)
    if bottom is None:  # the tier holds nobody now
        return LeaderboardPage(entries=[], next_cursor=None, prev_cursor=None)
    rows = board.rows(session, after=key or top, limit=limit + 1, backward=backward)
    if backward:  # nearest first, up to the top of the tier
        rows = [r for r in rows if top is None or not at_or_above(r.conservative, r.player_id, top)]
        more = len(rows) > limit
        return _page(session, board, rows[:limit][::-1], before=more, after=True, counted=True)
    rows = [r for r in rows if at_or_above(r.conservative, r.player_id, bottom)]
    more = len(rows) > limit
    return _page(session, board, rows[:limit], before=key is not None, after=more, counted=True)


#: Tier bounds found on a ladder's leaderboard, kept for the reads that come before its
#: next write: keyed by the ladder's creation and version, which every write moves.
_FOUND: OrderedDict[tuple[Any, ...], Any] = OrderedDict()
_FOUND_LOCK = threading.Lock()
#: Entries :data:`_FOUND` holds at most (the oldest go first).
FOUND_MAX = 256


def _found(session: Session, ladder: Ladder, what: tuple[Any, ...], find: Callable[[], T]) -> T:
    """``find()`` on the ladder's leaderboard, or what it gave before at the same version.
    What it finds is kept only if no write committed while it ran (the version read after
    is the one read before), so an entry always describes the state of its version."""
    before = versions.session_state(session, ladder.id)
    key = (id(session.get_bind()), ladder.id, before.created_at, before.version, *what)
    with _FOUND_LOCK:
        if key in _FOUND:
            _FOUND.move_to_end(key)
            return cast(T, _FOUND[key])
    value = find()
    if versions.session_state(session, ladder.id).version == before.version:
        with _FOUND_LOCK:
            _FOUND[key] = value
            while len(_FOUND) > FOUND_MAX:
                _FOUND.popitem(last=False)
    return value


def _span(session: Session, ladder: Ladder, tier: str) -> tuple[Key | None, Key | None]:
    """Tier ``tier`` by percentile on the leaderboard now: after the cutoff of the tiers
    above (None: from the top), down to its own cutoff (None: it holds nobody). Two
    lookups of a key at a rank, whatever the number of tiers, kept until the next write."""
    what = ("span", tier, json.dumps(ladder.tiers), ladder.placement_matches)
    return _found(session, ladder, what, lambda: _find_span(session, ladder, tier))


def _find_span(session: Session, ladder: Ladder, tier: str) -> tuple[Key | None, Key | None]:
    assert ladder.tiers is not None
    counts = rating_repo.bucket_counts(session=session, ladder_id=ladder.id)
    limits = rank_limits(ladder.tiers, sum(players for _, players in counts))
    n = tier_names(ladder.tiers).index(tier)
    above = limits[n - 1] if n else 0
    if limits[n] <= above:
        return None, None
    top, bottom = rating_repo.keys_at_ranks(
        session=session,
        ladder_id=ladder.id,
        width=ladder.bucket_width,
        placement=ladder.placement_matches,
        counts=counts,
        ranks=[above, limits[n]],
    )
    return top, bottom


def tiering(session: Session, ladder: Ladder, keys: bool = True) -> Tiering:
    """The ladder's tiers as a request applies them: by percentile, the ranked players
    (counted by the rating buckets) and, with ``keys``, each tier's cutoff found on the
    leaderboard now."""
    if not by_percentile(ladder.tiers):
        return Tiering(ladder.tiers)
    assert ladder.tiers is not None
    if not keys:
        counted = ladder_repo.count_players(session=session, ladder_ids=[ladder.id])
        return Tiering(ladder.tiers, limits=rank_limits(ladder.tiers, counted.get(ladder.id, 0)))
    what = ("cutoffs", json.dumps(ladder.tiers), ladder.placement_matches)
    return _found(session, ladder, what, lambda: _find_cutoffs(session, ladder))


def _find_cutoffs(session: Session, ladder: Ladder) -> Tiering:
    assert ladder.tiers is not None
    counts = rating_repo.bucket_counts(session=session, ladder_id=ladder.id)
    ranked = sum(players for _, players in counts)
    if ranked == 0:  # every tier holds nobody
        return Tiering(ladder.tiers, [None] * len(ladder.tiers))
    cutoffs = rating_repo.keys_at_ranks(
        session=session,
        ladder_id=ladder.id,
        width=ladder.bucket_width,
        placement=ladder.placement_matches,
        counts=counts,
        ranks=rank_limits(ladder.tiers, ranked),
    )
    return Tiering(ladder.tiers, cutoffs)


@dataclass(frozen=True, slots=True)
class _Board:
    """The leaderboard a request reads: the ladder's, of the players with ``min_matches``
    matches, placed ones only unless ``include_provisional`` (ranks count placed ones
    only either way)."""

    ladder: Ladder
    min_matches: int
    include_provisional: bool
    tiering: Tiering

    @property
    def shown(self) -> int:
        """The placement matches a player needs to be on this board."""
        return 0 if self.include_provisional else self.ladder.placement_matches

    def provisional(self, row: rating_repo.RatingRow | PlayerRating) -> bool:
        return is_provisional(self.ladder.placement_matches, row.matches, row.season_base)

    def rows(
        self,
        session: Session,
        *,
        after: tuple[float, str] | None,
        limit: int,
        backward: bool = False,
        bounds: tuple[float, float] | None = None,
    ) -> list[rating_repo.RatingRow]:
        return rating_repo.leaderboard(
            session=session,
            ladder_id=self.ladder.id,
            after=after,
            limit=limit,
            min_matches=self.min_matches,
            backward=backward,
            bounds=bounds,
            placement=self.shown,
        )

    def ahead(self, session: Session, row: rating_repo.RatingRow | PlayerRating) -> int:
        """How many ranked players of the board are ahead of ``row``."""
        return rating_repo.count_ahead(
            session=session,
            ladder_id=self.ladder.id,
            bucket_width=self.ladder.bucket_width,
            conservative=row.conservative,
            player_id=row.player_id,
            min_matches=self.min_matches,
            placement=self.ladder.placement_matches,
        )


#: What a ``prev_cursor`` carries after its key: the page before it.
_BEFORE = "before"


def _leaderboard_key(cursor: str | None) -> tuple[tuple[float, str] | None, bool]:
    """The key a leaderboard cursor names, and whether the page is the one before it."""
    if cursor is None:
        return None, False
    key = decode_cursor(cursor)
    if not (
        isinstance(key, list)
        and len(key) in (2, 3)
        and isinstance(key[0], int | float)
        and not isinstance(key[0], bool)
        and math.isfinite(key[0])
        and isinstance(key[1], str)
        and (len(key) == 2 or key[2] == _BEFORE)
    ):
        raise InvalidInput("cursor: not a cursor of this leaderboard")
    return (float(key[0]), key[1]), len(key) == 3


def _around(*, session: Session, board: _Board, limit: int, player_id: str) -> LeaderboardPage:
    """The page of ``limit`` entries centred on the player (as near the centre as the
    ends of the leaderboard allow)."""
    ladder = board.ladder
    row = rating_repo.read_rating(session=session, ladder_id=ladder.id, player_id=player_id)
    if (
        row is None
        or row.matches < board.min_matches
        or is_provisional(board.shown, row.matches, row.season_base)
    ):
        raise NotFound(
            f"around: no player {player_id[:128]!r} on this leaderboard of ladder {ladder.id!r}"
        )
    key = (row.conservative, row.player_id)
    above = board.rows(session, after=key, limit=limit, backward=True)
    below = board.rows(session, after=key, limit=limit)
    ahead = min(len(above), max((limit - 1) // 2, limit - 1 - len(below)))
    behind = min(len(below), limit - 1 - ahead)
    rows = [*above[:ahead][::-1], row, *below[:behind]]
    return _page(session, board, rows, before=len(above) > ahead, after=len(below) > behind)


def _page(
    session: Session,
    board: _Board,
    rows: list[rating_repo.RatingRow],
    *,
    before: bool,
    after: bool,
    counted: bool = False,
) -> LeaderboardPage:
    """The page of ``rows`` (in leaderboard order), ranked; ``before`` and ``after``: whether
    the page goes on before the first and after the last (each then a cursor);
    ``counted``: the first may follow others though the page has none before it (a
    tier's first page). A provisional row has no rank and no tier; the ranks count the
    ranked rows."""
    ladder = board.ladder
    next_rank = 1
    if rows and (before or counted):
        next_rank += board.ahead(session, rows[0])
    bayesian = ladder.algorithm in BAYESIAN
    aged = _aged(ladder.algorithm, ladder.params, ladder.aged_at)
    entries = []
    for row in rows:
        provisional = board.provisional(row)
        rank = None if provisional else next_rank
        next_rank += 0 if provisional else 1
        # Typed values from the database: constructed without validating them again,
        # which cost a first page more CPU time than reading its rows.
        entries.append(
            LeaderboardEntry.model_construct(
                rank=rank,
                player_id=row.player_id,
                mu=row.mu,
                sigma=_sigma(aged, row) if bayesian else None,
                conservative=row.conservative,
                matches=row.matches,
                last_played_at=utc(row.last_played_at) if row.last_played_at else None,
                volatility=row.volatility,
                tier=None
                if provisional
                else board.tiering.of_rank(row.conservative, row.player_id, rank),
                provisional=provisional,
            )
        )
    next_cursor = None
    prev_cursor = None
    if rows and after:
        next_cursor = encode_cursor([rows[-1].conservative, rows[-1].player_id])
    if rows and before:
        prev_cursor = encode_cursor([rows[0].conservative, rows[0].player_id, _BEFORE])
    return LeaderboardPage(
        entries=entries,
        next_cursor=next_cursor,
        prev_cursor=prev_cursor,
        as_of=aged[1] if aged is not None else None,
    )


#: A ladder that ages ratings and the time they are aged to.
_Aged = tuple[LadderConfig, datetime]


def _aged(algorithm: str, params: Any, aged_at: datetime | None) -> _Aged | None:
    """The ladder's configuration and ``aged_at`` where its ratings are aged (None: they
    are shown as stored)."""
    if aged_at is None:
        return None
    text = params if isinstance(params, str) else json.dumps(params, sort_keys=True)
    config = config_of(algorithm, text)
    return (config, utc(aged_at)) if config.ages else None


def _sigma(aged: _Aged | None, row: rating_repo.RatingRow | PlayerRating) -> float | None:
    """The sigma a rating shows: as it stands at the ladder's ``aged_at`` (the stored
    conservative rating's), widened for the time since the player's last match."""
    if aged is None:
        return row.sigma
    return aged[0].standing(row.mu, row.sigma, row.last_played_at, aged[1])[0]


def _player_view(
    *,
    session: Session,
    ladder: Ladder,
    row: PlayerRating | rating_repo.RatingRow,
    own_writes: bool = False,
) -> PlayerOut:
    ahead = rating_repo.count_ahead(
        session=session,
        ladder_id=ladder.id,
        bucket_width=ladder.bucket_width,
        conservative=row.conservative,
        player_id=row.player_id,
        min_matches=0,
        own_writes=own_writes,
        placement=ladder.placement_matches,
    )
    answer = rating_repo.PlayerAnswer(
        rating_repo.RatingRow(*(getattr(row, name) for name in rating_repo.RatingRow._fields)),
        ahead,
        ladder.season,
        ladder.tiers,
        ladder.placement_matches,
        ladder.algorithm,
        json.dumps(ladder.params, sort_keys=True),
        ladder.aged_at,
        ladder_repo.count_players(session=session, ladder_ids=[ladder.id]).get(ladder.id, 0)
        if by_percentile(ladder.tiers)
        else 0,
    )
    return _player_out(ladder.id, answer)


def _player_out(ladder_id: str, answer: rating_repo.PlayerAnswer) -> PlayerOut:
    row = answer.rating
    provisional = is_provisional(answer.placement, row.matches, row.season_base)
    aged = _aged(answer.algorithm, answer.params, answer.aged_at)
    rank = None if provisional else answer.ahead + 1
    if by_percentile(answer.tiers):
        tier = tier_of_rank(answer.tiers, rank, answer.ranked)
    else:
        tier = None if provisional else tier_of(answer.tiers, row.conservative)
    return PlayerOut(
        ladder=ladder_id,
        player_id=row.player_id,
        mu=row.mu,
        sigma=_sigma(aged, row),
        conservative=row.conservative,
        rank=rank,
        matches=row.matches,
        last_played_at=utc(row.last_played_at) if row.last_played_at else None,
        volatility=row.volatility,
        season=answer.season,
        tier=tier,
        season_matches=row.matches - row.season_base,
        provisional=provisional,
        as_of=aged[1] if aged is not None else None,
    )


def unknown_player(ladder: Ladder | str, player_id: str) -> NotFound:
    """The 404 of a player the ladder (or the ladder of this id) does not have."""
    ladder_id = ladder if isinstance(ladder, str) else ladder.id
    return NotFound(f"player_id: no player {player_id[:128]!r} in ladder {ladder_id!r}")


def get_player(*, session: Session, ladder: Ladder, player_id: str) -> PlayerOut:
    row = rating_repo.read_rating(session=session, ladder_id=ladder.id, player_id=player_id)
    if row is None:
        raise unknown_player(ladder, player_id)
    return _player_view(session=session, ladder=ladder, row=row)


def player_bodies(
    dbapi_connection: Any, dialect: str, requests: list[tuple[str, dict[str, Any]]]
) -> list[bytes | Exception]:
    """``get_player``'s answers as JSON for many (ladder id, {"player_id": ...}) at once,
    from one statement on a DB-API connection (the read path's: no session, no
    transaction to begin and commit): each a body or the 404 to answer with. The ladders
    exist: the reads' validators said so."""
    pairs = [(ladder_id, str(args["player_id"])) for ladder_id, args in requests]
    found = rating_repo.read_players(dbapi_connection, dialect, pairs)
    bodies: list[bytes | Exception] = []
    for (ladder_id, player_id), player in zip(pairs, found, strict=True):
        if player is None:
            bodies.append(unknown_player(ladder_id, player_id))
        else:
            body = _player_out(ladder_id, player)
            bodies.append(body.model_dump_json().encode())
    return bodies


def seed_player(
    *, session: Session, ladder: Ladder, player_id: str, body: PlayerSeed, now: datetime
) -> PlayerOut:
    """Set a player's rating (creating the player); history records an adjustment."""
    if not 1 <= len(player_id) <= 128:
        raise InvalidInput("player_id: 1 to 128 characters")
    config = ladder_config(ladder.algorithm, ladder.params)
    prior = config.model.rating()
    if not config.bayesian and body.sigma is not None:
        raise InvalidInput("sigma: an Elo rating has no sigma; omit it")
    if body.volatility is not None:
        _check_volatility(config, body.volatility)
    # The ladder share-locked, as recording a match does: a re-rating holding it (void,
    # rebuild) reads every seed and rating of the ladder, so the seed waits for it.
    locked = ladder_repo.lock_ladder(session=session, ladder_id=ladder.id, share=True)
    created = rating_repo.insert_missing_ratings(
        session=session,
        ladder_id=ladder.id,
        player_ids=[player_id],
        mu=prior.mu,
        sigma=config.stored_sigma(prior),
        conservative=config.conservative(prior),
        now=now,
        volatility=prior.volatility,
    )
    if locked is not None and locked.opening_from is not None and not created:
        # A season opening under way that has not reached the player resets them first:
        # the seed comes after the reset in their history.
        reset_unreached(
            session=session,
            ladder_id=ladder.id,
            config=config,
            aged_at=locked.aged_at,
            opening_from=locked.opening_from,
            states=rating_repo.lock_rating_states(
                session=session, ladder_id=ladder.id, player_ids=[player_id]
            ),
            now=now,
        )
    row = rating_repo.lock_rating(session=session, ladder_id=ladder.id, player_id=player_id)
    if row is None:  # inserted just above, in this transaction
        raise unknown_player(ladder, player_id)
    old = rating_of(row)
    was = Standing(row.conservative, row.matches, row.season_base)
    # Without a sigma a Bayesian rating keeps its own (the prior's for a new player).
    new = Rating(body.mu, body.sigma if body.sigma is not None else old.sigma)
    old_volatility = row.volatility
    row.mu = new.mu
    row.sigma = config.stored_sigma(new)
    # As it stands at the ladder's aged_at: widened for the time since the last match,
    # as the next match will widen it (inactivity).
    row.conservative = config.standing(new.mu, row.sigma, row.last_played_at, ladder.aged_at)[1]
    row.updated_at = now
    if config.volatile and body.volatility is not None:
        row.volatility = body.volatility
    watch = events.ladder_tier_watch(ladder)
    if watch is not None:
        watch.emit_changes(
            session,
            before={} if created else {player_id: was},
            after={player_id: Standing(row.conservative, row.matches, row.season_base)},
            cause="player.seeded",
            now=now,
        )
    match_repo.add_history(
        session=session,
        entry=RatingHistory(
            ladder_id=ladder.id,
            player_id=player_id,
            match_seq=None,
            played_at=now,
            mu_before=old.mu,
            sigma_before=config.stored_sigma(old),
            mu_after=new.mu,
            sigma_after=config.stored_sigma(new),
            volatility_before=old_volatility,
            volatility_after=row.volatility,
        ),
    )
    return _player_view(session=session, ladder=ladder, row=row, own_writes=True)


def _check_volatility(config: LadderConfig, volatility: float) -> None:
    """A seeded volatility: Glicko-2 ladders only, in the range of the prior's."""
    if not config.volatile:
        raise InvalidInput("volatility: only a Glicko-2 rating has a volatility; omit it")
    spec = next(spec for spec in parameter_table("glicko2") if spec.name == "volatility")
    problem = spec.problem(volatility)
    if problem is not None:
        raise InvalidInput(f"volatility: {problem}")


def player_history(
    *, session: Session, ladder: Ladder, player_id: str, limit: int, cursor: str | None
) -> HistoryPage:
    if rating_repo.read_rating(session=session, ladder_id=ladder.id, player_id=player_id) is None:
        raise unknown_player(ladder, player_id)
    before_id = None
    if cursor is not None:
        key = decode_cursor(cursor)
        if not (isinstance(key, list) and len(key) == 1 and type(key[0]) is int):
            raise InvalidInput("cursor: not a cursor of this history")
        before_id = key[0]
    config = ladder_config(ladder.algorithm, ladder.params)
    rows = match_repo.history(
        session=session,
        ladder_id=ladder.id,
        player_id=player_id,
        before_id=before_id,
        limit=limit + 1,
    )
    more = len(rows) > limit
    rows = rows[:limit]
    seasons = seasons_of(session=session, ladder_id=ladder.id)
    entries = [
        HistoryEntry(
            season=seasons.of_history(row.id).id,
            kind=row.kind,
            match_id=row.match_id,
            played_at=utc(row.played_at),
            before=config.out(
                Rating(row.mu_before, row.sigma_before or 0.0), row.volatility_before
            ),
            after=config.out(Rating(row.mu_after, row.sigma_after or 0.0), row.volatility_after),
        )
        for row in rows
    ]
    if ladder.tiers:
        tiers = tiering(session, ladder)
        for entry in entries:
            entry.tier_before = tiers.of(entry.before.conservative, player_id)
            entry.tier_after = tiers.of(entry.after.conservative, player_id)
    return HistoryPage(entries=entries, next_cursor=encode_cursor([rows[-1].id]) if more else None)
