"""Use cases: a ladder's seasons, opening the next one with the soft reset, and the
archived standings of the closed ones.

Opening a season is one transaction that holds the ladder alone (as a re-rating does:
``ladders.hold_ladder``), so no match or seed of the ladder is in flight: it draws the
match seq and history id the new season begins at (everything recorded before has smaller
ones, everything after larger), archives every rated player's final standing in the
closing season (rating, rank, the season's matches), resets every rating toward the prior
(``app.rating.seasons``) and writes each reset as a history entry (kind ``season_reset``).

A season's matches and history entries are found by those numbers, so recording is
untouched by seasons. Re-ratings (``app.services.rerate``) replay the resets at their
places and rewrite the archives they reach (:func:`rewrite_standings`).
"""

from __future__ import annotations

import bisect
import logging
import math
import time
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import partial
from operator import itemgetter
from typing import Any, Literal

import numpy as np
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from app.config import get_settings
from app.domain.cursors import decode_cursor, encode_cursor
from app.domain.documents.players import LeaderboardEntry, LeaderboardPage
from app.domain.documents.seasons import SeasonCreate, SeasonOut, SeasonPage
from app.domain.ladders import LadderConfig, ladder_config
from app.domain.results import rfc3339
from app.domain.tiers import by_percentile, tier_of, tier_of_rank
from app.domain.times import utc
from app.errors import Conflict, InvalidInput, NotFound, ServiceUnavailable
from app.rating.seasons import reset_mu, reset_sigma
from app.services import events
from app.services.ladders import hold_ladder
from app.services.periodic import Periodic, lease
from app.storage import blocks
from app.storage.models import Ladder
from app.storage.repositories import ladders as ladder_repo
from app.storage.repositories import ratings as rating_repo
from app.storage.repositories import rerating as rerating_repo
from app.storage.repositories import seasons as season_repo
from app.storage.repositories.seasons import SeasonRow
from app.storage.unit_of_work import Transact

_log = logging.getLogger(__name__)

#: How long a step of an opening should take: the next step's size follows the time the
#: last one took, so that a match waits about this long at most for a player in one.
STEP_SECONDS = 0.2
#: The first step's players, and the bounds of any step's.
FIRST_STEP, MIN_STEP, MAX_STEP = 1_000, 100, 20_000
#: Players a re-rating that finishes an opening resets at a time (in its one transaction).
STEP = 5_000


@dataclass(frozen=True, slots=True)
class Seasons:
    """A ladder's seasons in order, and which one a match or a history entry belongs to."""

    rows: list[SeasonRow]

    def of_history(self, history_id: int) -> SeasonRow:
        """The season of the history entry ``history_id``."""
        starts = [row.first_history_id for row in self.rows]
        return self.rows[max(bisect.bisect_right(starts, history_id) - 1, 0)]

    def of_match(self, seq: int) -> SeasonRow:
        """The season of the match ``seq``."""
        starts = [row.first_seq for row in self.rows]
        return self.rows[max(bisect.bisect_right(starts, seq) - 1, 0)]

    def end_seq(self, season: SeasonRow) -> int | None:
        """The first match seq past ``season`` (None: it is the current one)."""
        return self.rows[season.ordinal].first_seq if season.ordinal < len(self.rows) else None

    def opened_by(self, reset_id: int) -> SeasonRow:
        """The season a reset entry opened (the season the entry belongs to)."""
        return self.of_history(reset_id)


def seasons_of(*, session: Session, ladder_id: str) -> Seasons:
    return Seasons(season_repo.seasons_of(session=session, ladder_id=ladder_id))


def open_season(
    *, session: Session, ladder: Ladder, body: SeasonCreate, now: datetime, owner: str
) -> SeasonOut:
    """Close the ladder's current season and open ``body.id``, in a short transaction
    holding the ladder; its opening, ``owner``'s, is then run by :func:`settle_opening`.
    With ``starts_at``, schedule it instead (:func:`schedule_season`). A season id the
    ladder has had, or has scheduled, is a 409."""
    if body.starts_at is not None:
        return schedule_season(session=session, ladder=ladder, body=body, now=now)
    ladder = hold_ladder(session=session, ladder_id=ladder.id)
    scheduled = season_repo.scheduled(session=session, ladder_id=ladder.id)
    if scheduled is not None and scheduled.id == body.id:
        raise Conflict(
            f"id: season {body.id!r} of ladder {ladder.id!r} is scheduled to open at "
            f"{rfc3339(scheduled.starts_at)}"
        )
    keep = ladder.season_keep if body.keep is None else body.keep
    return _open(session=session, ladder=ladder, season_id=body.id, keep=keep, now=now, owner=owner)


def _open(
    *, session: Session, ladder: Ladder, season_id: str, keep: float, now: datetime, owner: str
) -> SeasonOut:
    """Open the season ``season_id`` on the ladder this transaction holds alone: the
    closing season closed, the new one current, and its opening under way (``owner``'s),
    whose steps (:func:`run_opening`) archive the standings and reset the ratings. An
    opening still under way finishes here first."""
    finish_opening(session=session, ladder=ladder, now=now)
    seasons = seasons_of(session=session, ladder_id=ladder.id)
    if any(row.id == season_id for row in seasons.rows):
        raise Conflict(f"id: ladder {ladder.id!r} has a season {season_id!r} already")
    current = seasons.rows[-1]
    first_seq, first_history_id = season_repo.next_numbers(session=session)
    season_repo.close_season(
        session=session, ladder_id=ladder.id, ordinal=current.ordinal, ended_at=now
    )
    opened = SeasonRow(
        ordinal=current.ordinal + 1,
        id=season_id,
        keep=keep,
        started_at=now,
        ended_at=None,
        first_seq=first_seq,
        first_history_id=first_history_id,
    )
    season_repo.add_season(session=session, ladder_id=ladder.id, season=opened)
    season_repo.start_opening(
        session=session,
        ladder_id=ladder.id,
        season=opened.ordinal,
        first_history_id=first_history_id,
        owner=owner,
        lease_until=now + lease(),
    )
    players = season_repo.count_ratings(session=session, ladder_id=ladder.id)
    started = _season_out(opened, matches=0, players=players, opening=True)
    events.changed(session, ladder_id=ladder.id, type="season.started", data=started, now=now)
    return started


def settle_opening(
    *,
    transact: Transact,
    ladder_id: str,
    owner: str,
    clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    size: int | None = None,
    stopping: Callable[[], bool] = lambda: False,
) -> SeasonOut:
    """Run the steps of the ladder's opening held by ``owner`` (:func:`run_opening`), then
    the season as it stands: ``opening`` false once they are done."""
    run_opening(
        transact=transact,
        ladder_id=ladder_id,
        owner=owner,
        clock=clock,
        size=size,
        stopping=stopping,
    )

    def current(session: Session) -> SeasonOut:
        seasons = seasons_of(session=session, ladder_id=ladder_id)
        row = seasons.rows[-1]
        return _season_out(
            row,
            matches=season_repo.match_counts(
                session=session, ladder_id=ladder_id, first_seq=row.first_seq, end_seq=None
            ),
            players=season_repo.count_ratings(session=session, ladder_id=ladder_id),
            opening=season_repo.opening_of(session=session, ladder_id=ladder_id, lock=False)
            is not None,
        )

    return transact(current, read_only=True)


def _next_size(size: int, seconds: float) -> int:
    """The size of the step after one of ``size`` players that took ``seconds``: halfway
    (geometrically) to the size that would take :data:`STEP_SECONDS`."""
    aim = size * STEP_SECONDS / max(seconds, 1e-3)
    return max(MIN_STEP, min(MAX_STEP, round(math.sqrt(size * aim))))


def run_opening(
    *,
    transact: Transact,
    ladder_id: str,
    owner: str,
    clock: Callable[[], datetime],
    size: int | None = None,
    stopping: Callable[[], bool] = lambda: False,
) -> bool:
    """The steps of the ladder's opening, ``owner``'s (its lease moved on at each): first
    the players by id, each step resetting those not reset yet; then the closing season's
    archive, written from the reset entries in rank order. Each step is a short
    transaction that share-locks the ladder as recording does, so matches are recorded
    between steps and wait at most one for a player in it; each takes about
    :data:`STEP_SECONDS` (``size``: a fixed number of players instead). Whether the opening
    is done (False: another worker holds it now, or this one stops)."""
    order: list[Standing] | None = None
    players = size or FIRST_STEP
    state: Step = "archive"  # the opening read once first: its phase may be either
    while not stopping():
        if state == "archive" and order is None:
            found = transact(
                lambda session: season_repo.opening_of(session=session, ladder_id=ladder_id),
                read_only=True,
            )
            if found is None:
                return True  # done (here, or by a re-rating that finished it)
            if found.owner != owner:
                return False
            if found.ranked is not None:
                order = transact(
                    partial(_archive_order, ladder_id=ladder_id, first=found.first_history_id),
                    read_only=True,
                )
        step = partial(
            _opening_step,
            ladder_id=ladder_id,
            owner=owner,
            size=players,
            now=clock(),
            order=order,
        )
        started = time.perf_counter()
        state = transact(step, bulk=True)
        if size is None and state in ("reset", "archive"):
            players = _next_size(players, time.perf_counter() - started)
        if state == "lost":
            return False  # taken over: this worker's lease ran out
        if state == "done":
            _log.info("seasons: ladder %r opened its season", ladder_id)
            return True
    return False


#: What an opening's step leaves next: more players to reset, the archive's steps (whose
#: order the caller reads first), nothing (the opening is done), or another worker's
#: steps (this one's lease ran out).
Step = Literal["reset", "archive", "done", "lost"]

#: A player's final standing in a closing season, but for its rank and matches: player
#: id, mu, sigma (None on an Elo ladder), conservative rating, volatility.
Standing = tuple[str, float, float | None, float, float | None]


def _archive_order(session: Session, *, ladder_id: str, first: int) -> list[Standing]:
    """The closing season's standings as the opening's resets started from (each reset
    entry's "before"), best first (conservative rating, highest first; ties by player id):
    the archive's rows in rank order, but for the season's matches."""
    ladder = ladder_repo.read_ladder(session=session, ladder_id=ladder_id)
    assert ladder is not None
    config = ladder_config(ladder.algorithm, ladder.params)
    resets = season_repo.resets_since(session=session, ladder_id=ladder_id, first_history_id=first)
    resets.sort(key=itemgetter(0))  # by player id, which the stable sort below keeps for ties
    mu = np.array([reset[1] for reset in resets], dtype=np.float64)
    if config.bayesian:
        conservative = mu - config.conservative_k * np.array(
            [reset[2] for reset in resets], dtype=np.float64
        )
    else:
        conservative = mu
    values = conservative.tolist()
    return [
        (player, mu_before, sigma if config.bayesian else None, values[n], volatility)
        for n in np.argsort(-conservative, kind="stable").tolist()
        for player, mu_before, sigma, volatility in [resets[n]]
    ]


def _archive(
    session: Session,
    *,
    ladder_id: str,
    season: SeasonRow,
    end_seq: int,
    rows: Sequence[Standing],
    first_rank: int,
) -> None:
    """Archive ``rows`` of :func:`_archive_order`, ranked from ``first_rank`` on, as
    ``season``'s standings, with each player's matches in it and the latest played_at
    among them."""
    played = season_repo.played_in(
        session=session,
        ladder_id=ladder_id,
        first_seq=season.first_seq,
        end_seq=end_seq,
        player_ids=[row[0] for row in rows],
    )
    season_repo.insert_standings(
        session=session,
        ladder_id=ladder_id,
        season=season.ordinal,
        rows=[
            (player, rank, mu, sigma, conservative, volatility, *played.get(player, (0, None)))
            for rank, (player, mu, sigma, conservative, volatility) in enumerate(
                rows, start=first_rank
            )
        ],
    )


def _opening_step(
    session: Session,
    *,
    ladder_id: str,
    owner: str,
    size: int,
    now: datetime,
    order: list[Standing] | None,
) -> Step:
    """One step of the ladder's opening (:func:`run_opening`), and what is next."""
    # The ladder share-locked first, as every writer takes it before anything else.
    ladder = ladder_repo.lock_ladder(session=session, ladder_id=ladder_id, share=True)
    found = season_repo.opening_of(session=session, ladder_id=ladder_id)
    if ladder is None or found is None:
        return "done"  # by a re-rating, or the ladder is gone
    if found.owner != owner:
        return "lost"
    held = {"owner": owner, "lease_until": now + lease()}
    if found.ranked is None:
        rows = season_repo.lock_step(
            session=session, ladder_id=ladder_id, after_id=found.after_id, size=size
        )
        _reset_ladder(session=session, ladder=ladder, rows=rows, now=now)
        if len(rows.player_id) == size:
            season_repo.move_opening(
                session=session, ladder_id=ladder_id, after_id=rows.player_id[-1], **held
            )
            return "reset"
        season_repo.move_opening(session=session, ladder_id=ladder_id, ranked=0, **held)
        return "archive"
    if order is None:
        return "archive"  # the archive's turn: the caller reads its order first
    seasons = seasons_of(session=session, ladder_id=ladder_id)
    opened = seasons.rows[found.season - 1]
    _archive(
        session,
        ladder_id=ladder_id,
        season=seasons.rows[found.season - 2],
        end_seq=opened.first_seq,
        rows=order[found.ranked : found.ranked + size],
        first_rank=found.ranked + 1,
    )
    if found.ranked + size < len(order):
        season_repo.move_opening(
            session=session, ladder_id=ladder_id, ranked=found.ranked + size, **held
        )
        return "archive"
    season_repo.end_opening(session=session, ladder_id=ladder_id)
    return "done"


def finish_opening(*, session: Session, ladder: Ladder, now: datetime) -> None:
    """Finish the ladder's opening under way, if any, in this transaction, which holds the
    ladder alone (a re-rating, an erasure, the next opening): every player not reset yet
    reset, the rest of the archive written. Whichever worker ran its steps stops at its
    next one."""
    found = season_repo.opening_of(session=session, ladder_id=ladder.id)
    if found is None:
        return
    after = found.after_id if found.ranked is None else None
    while after is not None:
        rows = season_repo.lock_step(
            session=session, ladder_id=ladder.id, after_id=after, size=STEP
        )
        _reset_ladder(session=session, ladder=ladder, rows=rows, now=now)
        after = rows.player_id[-1] if len(rows.player_id) == STEP else None
    order = _archive_order(session, ladder_id=ladder.id, first=found.first_history_id)
    seasons = seasons_of(session=session, ladder_id=ladder.id)
    _archive(
        session,
        ladder_id=ladder.id,
        season=seasons.rows[found.season - 2],
        end_seq=seasons.rows[found.season - 1].first_seq,
        rows=order[found.ranked or 0 :],
        first_rank=(found.ranked or 0) + 1,
    )
    season_repo.end_opening(session=session, ladder_id=ladder.id)
    ladder.opening_from = None


def reset_unreached(
    *,
    session: Session,
    ladder_id: str,
    config: LadderConfig,
    aged_at: datetime | None,
    opening_from: int | None,
    states: Sequence[rating_repo.RatingState],
    now: datetime,
    bulk: bool = False,
) -> list[rating_repo.RatingState]:
    """While the ladder's season opens (``opening_from``, its first history id): those of
    ``states`` (ratings this transaction has row-locked) that the opening has not reset
    yet, reset now, each reset written as a history entry (whose "before" the opening
    archives as the player's standing in the closing season when its steps end), as the
    opening's steps would have; returns ``states`` with those ratings reset. A recording,
    a batch and a seed call it for their players before rating them."""
    if opening_from is None or not states:
        return list(states)
    before = season_repo.Ratings(*(list(column) for column in zip(*states, strict=True)))
    reset = _reset_columns(
        session=session,
        ladder_id=ladder_id,
        config=config,
        aged_at=aged_at,
        opening_from=opening_from,
        rows=before,
        now=now,
        bulk=bulk,
    )
    return [reset.get(state.player_id, state) for state in states]


def _reset_columns(
    *,
    session: Session,
    ladder_id: str,
    config: LadderConfig,
    aged_at: datetime | None,
    opening_from: int,
    rows: season_repo.Ratings,
    now: datetime,
    bulk: bool,
) -> dict[str, rating_repo.RatingState]:
    """:func:`reset_unreached` of ratings as columns: the states of those it reset, by
    player."""
    unreached = season_repo.not_reset(
        session=session,
        ladder_id=ladder_id,
        player_ids=rows.player_id,
        first_history_id=opening_from,
    )
    chosen = [n for n, player in enumerate(rows.player_id) if player in unreached]
    if not chosen:
        return {}
    if len(chosen) < len(rows.player_id):
        rows = rows.take(chosen)
    opened = seasons_of(session=session, ladder_id=ladder_id).of_history(opening_from)
    mu, sigma = _write_resets(
        session=session,
        ladder_id=ladder_id,
        config=config,
        before=rows,
        keep=opened.keep,
        aged_at=aged_at,
        now=now,
        at=opened.started_at,
        bulk=bulk,
    )
    if bulk:
        return {}  # a step of the opening: nobody reads the states after
    return {
        state.player_id: state._replace(mu=mu[n], sigma=sigma[n])
        for n, state in enumerate(rating_repo.RatingState(*row) for row in zip(*rows, strict=True))
    }


def _reset_ladder(
    *, session: Session, ladder: Ladder, rows: season_repo.Ratings, now: datetime
) -> None:
    """:func:`reset_unreached` for a step of the ladder's players (ratings this
    transaction locked, in id order, as columns)."""
    if ladder.opening_from is None or not rows.player_id:
        return
    _reset_columns(
        session=session,
        ladder_id=ladder.id,
        config=ladder_config(ladder.algorithm, ladder.params),
        aged_at=ladder.aged_at,
        opening_from=ladder.opening_from,
        rows=rows,
        now=now,
        bulk=True,
    )


def schedule_season(
    *, session: Session, ladder: Ladder, body: SeasonCreate, now: datetime
) -> SeasonOut:
    """Hold ``body`` to open at its ``starts_at`` (in the future): the season clock of
    some worker opens it then (:func:`open_due_seasons`). A ladder holds one scheduled
    season at a time."""
    assert body.starts_at is not None
    if body.starts_at <= now:
        raise InvalidInput(
            f"starts_at: {rfc3339(body.starts_at)} is not in the future; leave it out to "
            "open the season now"
        )
    # Share-locked as a recording locks it: an opening (which holds it alone) either
    # committed before, and its id is read below, or waits for this.
    ladder_repo.lock_ladder(session=session, ladder_id=ladder.id, share=True)
    seasons = seasons_of(session=session, ladder_id=ladder.id)
    if any(row.id == body.id for row in seasons.rows):
        raise Conflict(f"id: ladder {ladder.id!r} has a season {body.id!r} already")
    pending = season_repo.scheduled(session=session, ladder_id=ladder.id)
    keep = ladder.season_keep if body.keep is None else body.keep
    row = season_repo.ScheduledRow(id=body.id, keep=keep, starts_at=body.starts_at)
    try:
        if pending is None:
            season_repo.add_scheduled(session=session, ladder_id=ladder.id, season=row, now=now)
    except IntegrityError:
        pending = season_repo.scheduled(session=session, ladder_id=ladder.id)
    if pending is not None:
        raise Conflict(
            f"starts_at: ladder {ladder.id!r} has season {pending.id!r} scheduled at "
            f"{rfc3339(pending.starts_at)} already; cancel it first (DELETE "
            f".../seasons/{pending.id})"
        )
    return _scheduled_out(row, ordinal=seasons.rows[-1].ordinal + 1)


def _scheduled_out(row: season_repo.ScheduledRow, *, ordinal: int) -> SeasonOut:
    return SeasonOut(
        id=row.id,
        ordinal=ordinal,
        state="scheduled",
        keep=row.keep,
        starts_at=utc(row.starts_at),
        started_at=None,
        ended_at=None,
        matches=0,
        players=0,
    )


def cancel_season(*, session: Session, ladder: Ladder, season: str) -> SeasonOut:
    """Cancel the ladder's scheduled season ``season`` (an open or closed one cannot be:
    409; an unknown one is a 404)."""
    ladder_repo.lock_ladder(session=session, ladder_id=ladder.id, share=True)
    seasons = seasons_of(session=session, ladder_id=ladder.id)
    pending = season_repo.scheduled(session=session, ladder_id=ladder.id)
    if (
        pending is not None
        and pending.id == season
        and season_repo.cancel_scheduled(session=session, ladder_id=ladder.id, season_id=season)
    ):
        return _scheduled_out(pending, ordinal=seasons.rows[-1].ordinal + 1)
    _season(seasons, ladder.id, season)  # a 404 for a season the ladder never had
    raise Conflict(f"season: {season[:64]!r} has opened: only a scheduled season is cancelled")


def new_owner() -> str:
    """A name for the worker that runs an opening's steps (its lease's holder)."""
    return uuid.uuid4().hex


def open_due_seasons(
    *,
    transact: Transact,
    clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    stopping: Callable[[], bool] = lambda: False,
) -> list[SeasonOut]:
    """Open every scheduled season due now, each in a transaction of its own that holds
    its ladder, takes (deletes) the schedule's row and opens the season: whichever worker
    or instance takes the row opens it, once; a transaction that fails (a crash, a lost
    connection, the ladder held past the statement timeout) leaves the row for the next
    round. Then the opening's steps (:func:`run_opening`); and the steps of every opening
    whose worker stopped (its lease ran out), taken over. Returns the seasons this call
    opened."""
    now = clock()
    due = transact(
        lambda session: season_repo.due_ladders(session=session, now=now), read_only=True
    )
    opened: list[SeasonOut] = []
    for ladder_id in due:
        owner = new_owner()

        def work(
            session: Session, ladder_id: str = ladder_id, owner: str = owner
        ) -> SeasonOut | None:
            ladder = hold_ladder(session=session, ladder_id=ladder_id)
            row = season_repo.take_due(session=session, ladder_id=ladder_id, now=now)
            if row is None:
                return None  # another worker opened it
            return _open(
                session=session,
                ladder=ladder,
                season_id=row.id,
                keep=row.keep,
                now=now,
                owner=owner,
            )

        try:
            season = transact(work)
        except (ServiceUnavailable, NotFound) as exc:
            _log.info("seasons: ladder %r not opened this round: %s", ladder_id, exc)
            continue
        except Conflict as exc:
            # Its id was taken meanwhile by a season opened at once: the schedule goes.
            _log.warning("seasons: scheduled season of %r dropped: %s", ladder_id, exc)
            transact(
                lambda session, ladder_id=ladder_id: season_repo.take_due(  # type: ignore[misc]
                    session=session, ladder_id=ladder_id, now=now
                )
            )
            continue
        if season is not None:
            _log.info("seasons: opened season %r of ladder %r", season.id, ladder_id)
            opened.append(season)
            _steps(transact, ladder_id, owner, clock, stopping)
    for ladder_id in transact(
        lambda session: season_repo.stalled_openings(session=session, now=clock()),
        read_only=True,
    ):
        if stopping():
            break
        owner = new_owner()

        def take_over(session: Session, ladder_id: str = ladder_id, owner: str = owner) -> bool:
            found = season_repo.opening_of(session=session, ladder_id=ladder_id)
            if found is None or found.lease_until >= clock():
                return False  # done, or taken over by another worker meanwhile
            season_repo.move_opening(
                session=session, ladder_id=ladder_id, owner=owner, lease_until=clock() + lease()
            )
            return True

        if transact(take_over):
            _log.info("seasons: taking over the opening of ladder %r", ladder_id)
            _steps(transact, ladder_id, owner, clock, stopping)
    return opened


def _steps(
    transact: Transact,
    ladder_id: str,
    owner: str,
    clock: Callable[[], datetime],
    stopping: Callable[[], bool],
) -> None:
    """:func:`run_opening`, a failure logged (the lease then runs out: another round takes
    the opening over)."""
    try:
        run_opening(
            transact=transact, ladder_id=ladder_id, owner=owner, clock=clock, stopping=stopping
        )
    except (ServiceUnavailable, NotFound) as exc:
        _log.info("seasons: the opening of ladder %r waits for a later round: %s", ladder_id, exc)


def season_clock(transact: Transact) -> Periodic:
    """The worker's thread that opens the scheduled seasons that are due and takes over
    the openings whose worker stopped, every ``RATINGS_SEASON_CLOCK_S``
    (:func:`open_due_seasons`); an opening's steps stop between two when the worker
    stops."""
    clock: Periodic

    def tick() -> object:
        return open_due_seasons(transact=transact, stopping=clock.stopping)

    clock = Periodic("season-clock", get_settings().season_clock_s, tick)
    return clock


def _conservative(config: LadderConfig, mu: float, sigma: float | None) -> float:
    return mu - config.conservative_k * sigma if config.bayesian and sigma is not None else mu


def reset_values(
    config: LadderConfig, mu: np.ndarray, sigma: np.ndarray, keep: float
) -> tuple[np.ndarray, np.ndarray]:
    """The ratings ``(mu, sigma)`` after a soft reset by ``keep`` (sigma unused on an Elo
    ladder: returned as it is)."""
    prior = config.model.rating()
    new_mu = reset_mu(mu, prior_mu=prior.mu, keep=keep)
    if not config.bayesian:
        return new_mu, sigma
    return new_mu, reset_sigma(sigma, prior_sigma=prior.sigma, keep=keep)


def _write_resets(
    *,
    session: Session,
    ladder_id: str,
    config: LadderConfig,
    before: season_repo.Ratings,
    keep: float,
    aged_at: datetime | None,
    now: datetime,
    at: datetime,
    bulk: bool = False,
) -> tuple[list[float], list[float | None]]:
    """Every rating of ``before`` (columns, in player id order) reset, and its history
    entry (played at ``at``, the season's start); the new mu and sigma (None on an Elo
    ladder) of each. ``bulk``: the ratings are a step of players, whose moves between the
    rank counts are grouped."""
    new_mu, new_sigma = reset_values(
        config,
        np.array(before.mu, dtype=np.float64),
        np.array([sigma or 0.0 for sigma in before.sigma], dtype=np.float64),
        keep,
    )
    mu: list[float] = new_mu.tolist()
    sigma: list[float | None]
    if not config.bayesian:
        sigma = [None] * len(mu)
        conservative = mu
    elif config.ages and aged_at is not None:
        # As it stands at the ladder's aged_at (inactivity), as every rating does.
        sigma = new_sigma.tolist()
        conservative = [
            config.standing(m, s, played, aged_at)[1]
            for m, s, played in zip(mu, sigma, before.last_played_at, strict=True)
        ]
    else:  # config.standing's mu - k sigma, element by element
        sigma = new_sigma.tolist()
        conservative = (new_mu - config.conservative_k * new_sigma).tolist()
    write = partial(
        season_repo.write_resets,
        session=session,
        ladder_id=ladder_id,
        before=before._replace(sigma=before.sigma if config.bayesian else [None] * len(mu)),
        mu=mu,
        sigma=sigma,
        conservative=conservative,
        played_at=at,
        updated_at=now,
    )
    if bulk:  # a step's range of players: the rank counts moved in two statements
        with blocks.rewriting(
            session,
            ladder_id=ladder_id,
            first_id=before.player_id[0],
            last_id=before.player_id[-1],
        ):
            write()
    else:
        write()
    return mu, sigma


def _season_out(row: SeasonRow, *, matches: int, players: int, opening: bool = False) -> SeasonOut:
    return SeasonOut(
        opening=opening,
        starts_at=None,
        id=row.id,
        ordinal=row.ordinal,
        state="open" if row.ended_at is None else "closed",
        keep=row.keep,
        started_at=utc(row.started_at),
        ended_at=utc(row.ended_at) if row.ended_at is not None else None,
        matches=matches,
        players=players,
    )


def list_seasons(*, session: Session, ladder: Ladder, limit: int, cursor: str | None) -> SeasonPage:
    """The ladder's seasons, newest first, with their counts."""
    before: int | None = None
    if cursor is not None:
        key = decode_cursor(cursor)
        if not (isinstance(key, list) and len(key) == 1 and type(key[0]) is int):
            raise InvalidInput("cursor: not a cursor of this list")
        before = key[0]
    seasons = seasons_of(session=session, ladder_id=ladder.id)
    pending = season_repo.scheduled(session=session, ladder_id=ladder.id)
    entries = []
    if pending is not None and before is None:
        entries.append(_scheduled_out(pending, ordinal=seasons.rows[-1].ordinal + 1))
    chosen = [row for row in reversed(seasons.rows) if before is None or row.ordinal < before]
    page = chosen[: limit - len(entries)]
    archived = season_repo.count_standings(session=session, ladder_id=ladder.id)
    opening = season_repo.opening_of(session=session, ladder_id=ladder.id, lock=False)
    for row in page:
        matches = season_repo.match_counts(
            session=session,
            ladder_id=ladder.id,
            first_seq=row.first_seq,
            end_seq=seasons.end_seq(row),
        )
        players = (
            season_repo.count_ratings(session=session, ladder_id=ladder.id)
            if row.ended_at is None
            else archived.get(row.ordinal, 0)
        )
        entries.append(
            _season_out(
                row,
                matches=matches,
                players=players,
                opening=row.ended_at is None and opening is not None,
            )
        )
    more = len(chosen) > len(page)
    return SeasonPage(
        entries=entries, next_cursor=encode_cursor([page[-1].ordinal]) if more else None
    )


def _season(seasons: Seasons, ladder_id: str, season_id: str) -> SeasonRow:
    for row in seasons.rows:
        if row.id == season_id:
            return row
    raise NotFound(f"season: no season {season_id[:64]!r} in ladder {ladder_id!r}")


def standings(
    *, session: Session, ladder: Ladder, season: str, limit: int, cursor: str | None
) -> LeaderboardPage:
    """A season's final standings, best first: the archive of a closed season, paged like
    the leaderboard. The current season has none yet (its standings are the leaderboard):
    a 409 that says so."""
    seasons = seasons_of(session=session, ladder_id=ladder.id)
    row = _season(seasons, ladder.id, season)
    if row.ended_at is None:
        raise Conflict(
            f"season: {season[:64]!r} is the current season: its standings are the "
            "leaderboard until the next season opens"
        )
    opening = season_repo.opening_of(session=session, ladder_id=ladder.id, lock=False)
    if opening is not None and opening.season == row.ordinal + 1:
        raise Conflict(
            f"season: the standings of {season[:64]!r} are being archived while the next "
            "season opens; try again shortly",
            headers={"Retry-After": "5"},
        )
    after = 0
    if cursor is not None:
        key = decode_cursor(cursor)
        if not (isinstance(key, list) and len(key) == 1 and type(key[0]) is int):
            raise InvalidInput("cursor: not a cursor of these standings")
        after = key[0]
    rows = season_repo.standings_page(
        session=session, ladder_id=ladder.id, season=row.ordinal, after_rank=after, limit=limit + 1
    )
    more = len(rows) > limit
    rows = rows[:limit]
    ranked = 0
    if by_percentile(ladder.tiers):  # percentiles of the season's own standings
        ranked = season_repo.last_rank(session=session, ladder_id=ladder.id, season=row.ordinal)
    entries = [
        LeaderboardEntry.model_construct(
            rank=entry.rank,
            player_id=entry.player_id,
            mu=entry.mu,
            sigma=entry.sigma,
            conservative=entry.conservative,
            matches=entry.matches,
            last_played_at=utc(entry.last_played_at) if entry.last_played_at else None,
            volatility=entry.volatility,
            tier=(
                tier_of_rank(ladder.tiers, entry.rank, ranked)
                if ranked
                else tier_of(ladder.tiers, entry.conservative)
            ),
        )
        for entry in rows
    ]
    return LeaderboardPage(
        entries=entries, next_cursor=encode_cursor([rows[-1].rank]) if more else None
    )


# -- re-ratings through resets (app.services.rerate, app.services.erasure) ------------------


def rewrite_standings(
    *,
    session: Session,
    ladder_id: str,
    config: LadderConfig,
    seasons: Seasons,
    resets: Iterable[dict[str, Any]],
    left: Iterable[int] = (),
) -> None:
    """The archived standings that replayed reset entries (history rows with ``id``,
    ``player_id`` and their new "before") start from: each reset's "before" is its
    player's final rating in the season before; then those seasons, and the seasons a
    player ``left``, re-ranked."""
    by_season: dict[int, list[dict[str, Any]]] = {season: [] for season in left}
    for reset in resets:
        closed = seasons.opened_by(reset["id"]).ordinal - 1
        sigma = reset["sigma_before"] if config.bayesian else None
        by_season.setdefault(closed, []).append(
            {
                "player_id": reset["player_id"],
                "mu": reset["mu_before"],
                "sigma": sigma,
                "conservative": _conservative(config, reset["mu_before"], sigma),
                "volatility": reset["volatility_before"],
            }
        )
    for season, rows in by_season.items():
        season_repo.update_standings(session=session, ladder_id=ladder_id, season=season, rows=rows)
        season_repo.rerank(session=session, ladder_id=ladder_id, season=season)


def refresh_played(
    *,
    session: Session,
    ladder_id: str,
    seasons: Seasons,
    from_seq: int,
    player_ids: Sequence[str],
) -> None:
    """The archived matches and latest played_at of ``player_ids`` in every closed season
    from the one holding the match ``from_seq`` on, counted again (a void took a match of
    theirs away)."""
    if not player_ids:
        return
    for season in seasons.rows[seasons.of_match(from_seq).ordinal - 1 :]:
        end = seasons.end_seq(season)
        if end is None:
            break
        played = season_repo.played_in(
            session=session,
            ladder_id=ladder_id,
            first_seq=season.first_seq,
            end_seq=end,
            player_ids=player_ids,
        )
        latest = rerating_repo.latest_played_before(
            session=session, ladder_id=ladder_id, player_ids=player_ids, before_seq=end
        )
        rows = [
            {
                "player_id": player,
                "matches": played.get(player, (0, None))[0],
                "last_played_at": latest.get(player),
            }
            for player in player_ids
        ]
        season_repo.update_standings(
            session=session, ladder_id=ladder_id, season=season.ordinal, rows=rows
        )
