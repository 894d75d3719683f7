"""Use cases: a ladder's running prediction accuracy, and keeping its tally up to date.

Every write that changes which matches count or what they predicted changes the ladder's
tally (``app.domain.accuracy.Tally``) in its own transaction: a recording adds its
matches' share (:func:`shares`, written with the matches by
``recording_repo.write_recorded``), a void takes the voided match's share away and replaces
the shares of the matches it re-rated (:func:`adjust`), a rebuild replaces the whole tally
(:func:`replace`; both from ``app.services.rerate``). A ladder's tally therefore always
equals one summed afresh from its stored matches, so reading it costs one short statement
whatever the ladder's size: what ``GET .../accuracy`` answers without a window, and what
``/metrics`` reports.

A window (the newest N matches, or those of them since a moment) is a bounded scan of the
newest matches' stored predictions instead, scored by the same rules.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from datetime import UTC, datetime

from sqlalchemy.orm import Session

from app.domain.accuracy import Tally
from app.domain.documents.accuracy import AccuracyOut, CalibrationBinOut
from app.domain.outcomes import outcome_of
from app.domain.times import utc
from app.storage.models import Ladder
from app.storage.repositories import accuracy as accuracy_repo

#: Stripes of a ladder's tally: a recording adds to one of them at random, so that
#: concurrent writers of one ladder seldom wait for the same row (on PostgreSQL).
STRIPES = 8
#: The most matches a window may hold, and the window of a ``since`` without one.
MAX_WINDOW = 10_000


def shares(tallies: Mapping[str, Tally]) -> dict[str, list[int]]:
    """What newly recorded matches scored, as ``recording_repo.write_recorded`` adds it to
    their ladders' tallies in the same statements (ladders whose matches scored nothing
    are left out)."""
    return {ladder_id: t.values for ladder_id, t in tallies.items() if t.matches}


def stripe() -> int:
    """The stripe a recording adds to, at random."""
    return random.randrange(STRIPES)


def adjust(*, session: Session, ladder_id: str, change: Tally) -> None:
    """Add ``change`` (a void's: the shares of re-rated matches new less old) to the
    ladder's tally."""
    if any(change.values):
        accuracy_repo.add_tallies(session=session, stripe=0, tallies={ladder_id: change.values})


def replace(*, session: Session, ladder_id: str, tally: Tally) -> None:
    """Make ``tally`` the ladder's whole tally (a rebuild's: every match re-rated)."""
    accuracy_repo.replace_tally(session=session, ladder_id=ladder_id, values=tally.values)


def tally_of(*, session: Session, ladder_id: str) -> Tally:
    """The ladder's tally, its stripes added up."""
    found = accuracy_repo.tallies(session=session, ladder_ids=[ladder_id]).get(ladder_id)
    return Tally.zero() if found is None else Tally.of(found)


def scan(*, session: Session, ladder_id: str, window: int, since: datetime | None) -> Tally:
    """The tally of the ladder's ``window`` newest matches that count, only those played
    at or after ``since`` if given; matches without stored probabilities are left out."""
    tally = Tally.zero()
    for row in accuracy_repo.recent_predictions(
        session=session, ladder_id=ladder_id, window=window
    ):
        probabilities = row.win_probabilities
        if probabilities is None or (since is not None and utc(row.played_at) < since):
            continue
        tally.add_match(probabilities, outcome_of(row.ranks, row.scores, len(probabilities)))
    return tally


def ladder_accuracy(
    *, session: Session, ladder: Ladder, window: int | None, since: datetime | None
) -> AccuracyOut:
    """``GET /v1/ladders/{ladder}/accuracy``: the running tally over every match that
    counts, or with ``window`` or ``since`` a scan of the newest matches."""
    since = utc(since).astimezone(UTC) if since is not None else None
    if window is None and since is None:
        tally = tally_of(session=session, ladder_id=ladder.id)
        scope = "all"
    else:
        window = MAX_WINDOW if window is None else window
        tally = scan(session=session, ladder_id=ladder.id, window=window, since=since)
        scope = "window"
    return AccuracyOut(
        ladder=ladder.id,
        scope=scope,
        window=window,
        since=since,
        matches=tally.matches,
        pairs=tally.pairs,
        prediction_error=tally.prediction_error(),
        decided=tally.decided,
        log_loss=tally.log_loss(),
        brier=tally.brier(),
        calibration=[
            CalibrationBinOut(
                low=b.low,
                high=b.high,
                count=b.count,
                mean_predicted=b.mean_predicted,
                observed=b.observed,
            )
            for b in tally.calibration()
        ],
    )
