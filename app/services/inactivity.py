"""Use cases: inactivity on the leaderboard.

On a ladder that ages ratings (``tau_per_day``; Glicko-2's ``deviation_per_day``) a
player's next match widens their sigma for the days since their last one. The leaderboard
shows that before the match comes: each stored conservative rating stands at the ladder's
``aged_at``, widened for the player's time away up to it (``LadderConfig.standing``), so
an inactive player's conservative rating falls and they sink below active players. Every
write of a rating (a match, a re-rating, a seed, a season's reset) stores it so, and the
stored mu and sigma stay the rating itself: nothing is replayed differently, and a void or
a rebuild gives the same ratings whatever the pass did.

Once ``aged_at`` is older than ``RATINGS_AGING_EVERY_S`` (a day), a pass brings it to now:
one transaction moves ``aged_at`` and starts the pass (its row in ``aging_passes``, whose
primary key lets one worker of any instance start it); then steps of :data:`STEP` players
by id, each a short transaction that locks its players' rows as recording does and
rewrites their conservative ratings, and the pass's cursor with them. Recording goes on
between steps and waits at most one step for a player in it. A worker that stops mid-pass
leaves the cursor: when its lease runs out another worker goes on from there (a step is
idempotent: it computes from the stored ratings). Until the pass ends, the players it has
not reached stand at the previous ``aged_at``.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from app.config import get_settings
from app.domain.ladders import LadderConfig, config_of
from app.domain.times import utc
from app.errors import NotFound, ServiceUnavailable
from app.services import events
from app.services.periodic import Periodic, lease
from app.storage.repositories import inactivity as aging_repo
from app.storage.repositories import ladders as ladder_repo
from app.storage.repositories import ratings as rating_repo
from app.storage.unit_of_work import Transact

_log = logging.getLogger(__name__)

#: Players a step of the pass rewrites, in one short transaction.
STEP = 5_000


def age_due_ladders(
    *,
    transact: Transact,
    clock: Callable[[], datetime],
    every: timedelta,
    size: int = STEP,
    stopping: Callable[[], bool] = lambda: False,
) -> list[str]:
    """Run the passes that are due: every ladder that ages ratings whose ``aged_at`` is
    ``every`` old (or unset) is brought to now, and a pass whose worker stopped is taken
    over. Returns the ladders whose pass this call finished."""
    now = clock()
    due = transact(
        lambda session: aging_repo.due_ladders(session=session, due=now - every, now=now),
        read_only=True,
    )
    finished = []
    for ladder in due:
        config = config_of(ladder.algorithm, ladder.params)
        if not config.ages:
            continue
        try:
            if _run_pass(transact, ladder.id, config, clock, every, size, stopping):
                finished.append(ladder.id)
        except (ServiceUnavailable, NotFound) as exc:  # held by a re-rating; deleted
            _log.info("inactivity: ladder %r not aged this round: %s", ladder.id, exc)
        if stopping():
            break
    return finished


def _run_pass(
    transact: Transact,
    ladder_id: str,
    config: LadderConfig,
    clock: Callable[[], datetime],
    every: timedelta,
    size: int,
    stopping: Callable[[], bool],
) -> bool:
    """Start the ladder's pass or take over a stopped one, then run its steps; whether it
    finished here (False: another worker holds it, or this one is stopping)."""
    owner = uuid.uuid4().hex

    def claim(session: Session) -> bool:
        now = clock()
        found = aging_repo.pass_of(session=session, ladder_id=ladder_id)
        if found is None:
            # The ladder held alone a moment (recordings in flight finish first), so that
            # workers that start together start one pass: the others find it, or the
            # ladder aged, once it is theirs.
            ladder = ladder_repo.hold_ladder_row(
                session=session, ladder_id=ladder_id, patient=False
            )
            if ladder is None:
                return False
            if aging_repo.pass_of(session=session, ladder_id=ladder_id, lock=False):
                return False  # started meanwhile
            if ladder.aged_at is not None and utc(ladder.aged_at) > now - every:
                return False  # brought forward meanwhile
            aging_repo.start_pass(
                session=session,
                ladder_id=ladder_id,
                as_of=now,
                owner=owner,
                lease_until=now + lease(),
            )
            return True
        if found.lease_until >= now and found.owner != owner:
            return False  # its worker is on it
        aging_repo.move_pass(
            session=session,
            ladder_id=ladder_id,
            after_id=found.after_id,
            owner=owner,
            lease_until=now + lease(),
        )
        return True

    try:
        # Bulk writes: on SQLite a match waiting for its turn goes before the next step.
        if not transact(claim, bulk=True):
            return False
    except IntegrityError:  # another worker started it at the same moment
        return False
    while not stopping():
        done = transact(
            lambda session: step(
                session=session,
                ladder_id=ladder_id,
                config=config,
                owner=owner,
                size=size,
                now=clock(),
            ),
            bulk=True,
        )
        if done is None:
            return False  # taken over: this worker's lease ran out
        if done:
            _log.info("inactivity: ladder %r aged", ladder_id)
            return True
    return False


def step(
    *,
    session: Session,
    ladder_id: str,
    config: LadderConfig,
    owner: str,
    size: int,
    now: datetime,
) -> bool | None:
    """One step of the ladder's pass: the next ``size`` players by id brought to the
    pass's time. Whether the pass is done (None: another worker holds it now)."""
    found = aging_repo.pass_of(session=session, ladder_id=ladder_id)
    if found is None or found.owner != owner:
        return None
    # Share-locked as recording locks it: a re-rating holding the ladder finishes first.
    ladder = ladder_repo.lock_ladder(session=session, ladder_id=ladder_id, share=True)
    rows = aging_repo.lock_step(
        session=session, ladder_id=ladder_id, after_id=found.after_id, size=size
    )
    changed = []
    moved: list[str] = []
    for row in rows:
        state = row.state
        conservative = config.standing(state.mu, state.sigma, state.last_played_at, found.as_of)[1]
        if conservative != row.conservative:
            changed.append({"player_id": state.player_id, "conservative": conservative})
            moved.append(state.player_id)
    watch = events.ladder_tier_watch(ladder) if ladder is not None else None
    if watch is not None and changed:
        before = watch.read(session, moved)
        rating_repo.update_ratings(session=session, ladder_id=ladder_id, rows=changed)
        watch.emit_changes(
            session, before=before, after=watch.read(session, moved), cause="ratings.aged", now=now
        )
    else:
        rating_repo.update_ratings(session=session, ladder_id=ladder_id, rows=changed)
    if len(rows) < size:
        aging_repo.end_pass(session=session, ladder_id=ladder_id)
        return True
    aging_repo.move_pass(
        session=session,
        ladder_id=ladder_id,
        after_id=rows[-1].state.player_id,
        owner=owner,
        lease_until=now + lease(),
    )
    return False


def aging_clock(transact: Transact) -> Periodic:
    """The worker's thread that runs the inactivity passes that are due, every
    ``RATINGS_AGING_CLOCK_S``; a pass stops between steps when the worker stops."""
    settings = get_settings()
    every = timedelta(seconds=settings.aging_every_s)
    clock: Periodic

    def tick() -> object:
        return age_due_ladders(
            transact=transact,
            clock=lambda: datetime.now(UTC),
            every=every,
            stopping=clock.stopping,
        )

    clock = Periodic("aging-clock", settings.aging_clock_s, tick)
    return clock
