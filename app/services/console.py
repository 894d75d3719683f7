"""Use cases of the console (``app.console``): what its pages show beyond the API's reads.

The console's pages call the API's own services for what the API answers (ladders, the
leaderboard, a player, their history, the accuracy tally); this module adds what only a
page needs: a ladder's player count alone, a search by player id, a player's whole
trajectory as arrays, their matches with opponents and outcome, and the ladder's
prediction health over its newest matches (:mod:`app.domain.health`). Read-only.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from sqlalchemy.orm import Session

from app.domain import health
from app.domain.documents.accuracy import AccuracyOut
from app.domain.documents.players import HistoryEntry, PlayerOut
from app.domain.documents.shared import RatingOut
from app.domain.ladders import BAYESIAN, ladder_config
from app.domain.outcomes import outcome_of
from app.domain.times import utc
from app.errors import NotFound
from app.rating.base import Rating
from app.services import accuracy, players
from app.storage.models import Ladder
from app.storage.repositories import accuracy as accuracy_repo
from app.storage.repositories import ladders as ladder_repo
from app.storage.repositories import matches as match_repo
from app.storage.repositories import ratings as rating_repo

#: How many of the newest matches the prediction health reads (the accuracy window's
#: bound: one range scan of the matches index, whatever the ladder's size).
HEALTH_WINDOW = accuracy.MAX_WINDOW
#: How many periods the prediction health cuts its matches into.
HEALTH_PERIODS = 20
#: Names of opponents (and teammates) listed per match; the rest are counted.
NAMES_SHOWN = 5


@dataclass(frozen=True, slots=True)
class LadderSummary:
    """A ladder as its leaderboard page heads it: its players are counted from the rating
    buckets (a few rows), its matches not at all (a scan of the ladder's match index)."""

    id: str
    algorithm: str
    params: dict[str, Any]
    description: str | None
    created_at: datetime
    players: int
    bayesian: bool
    #: The current season's id, and whether the ladder has tiers.
    season: str = "1"
    tiers: bool = False
    #: The ladder's placement matches (0: none).
    placement_matches: int = 0


def ladder_summary(*, session: Session, ladder: Ladder) -> LadderSummary:
    counted = ladder_repo.count_players(session=session, ladder_ids=[ladder.id])
    return LadderSummary(
        id=ladder.id,
        algorithm=ladder.algorithm,
        params=dict(ladder.params),
        description=ladder.description,
        created_at=utc(ladder.created_at),
        players=counted.get(ladder.id, 0),
        bayesian=ladder.algorithm in BAYESIAN,
        season=ladder.season,
        tiers=bool(ladder.tiers),
        placement_matches=ladder.placement_matches,
    )


def find_player(*, session: Session, ladder: Ladder, player_id: str) -> PlayerOut | None:
    """The player with this exact id, with their rank; None when the ladder has none."""
    try:
        return players.get_player(session=session, ladder=ladder, player_id=player_id)
    except NotFound:
        return None


# -- a player's trajectory --------------------------------------------------------------------


#: Decimal places of the trajectory's values: far below a pixel at any rating scale (Elo's
#: thousands, TrueSkill's tens), and a third of the bytes of full floats.
DIGITS = 4


@dataclass(frozen=True, slots=True)
class Trajectory:
    """A player's rating after each change (index 0: before the first), as arrays of one
    length: the mean, the conservative rating, and the band mean +- sigma (None without a
    sigma: Elo); ``matches`` flags the changes that were matches (the others seeded
    ratings); ``played`` is when each was played (the first point: before the first)."""

    mu: list[float]
    conservative: list[float]
    lower: list[float] | None
    upper: list[float] | None
    matches: list[int]
    conservative_k: float | None
    played: list[str]
    #: Glicko-2's names: rating and RD, not mean and sigma.
    glicko: bool = False

    def as_json(self) -> dict[str, Any]:
        return {
            "x": list(range(len(self.mu))),
            "mu": self.mu,
            "conservative": self.conservative,
            "lower": self.lower,
            "upper": self.upper,
            "match": self.matches,
            "conservative_k": self.conservative_k,
            "played": self.played,
            "glicko": self.glicko,
        }


def trajectory(*, session: Session, ladder: Ladder, player_id: str) -> Trajectory:
    """The player's whole trajectory: one indexed range of their history."""
    if rating_repo.read_rating(session=session, ladder_id=ladder.id, player_id=player_id) is None:
        raise players.unknown_player(ladder, player_id)
    config = ladder_config(ladder.algorithm, ladder.params)
    rows = match_repo.trajectory(session=session, ladder_id=ladder.id, player_id=player_id)
    mus: list[float] = []
    sigmas: list[float] = []
    flags: list[int] = []
    played: list[str] = []
    if rows:
        mus.append(rows[0].mu_before)
        sigmas.append(rows[0].sigma_before or 0.0)
        flags.append(0)
        played.append(_day_and_time(rows[0].played_at))
    for row in rows:
        mus.append(row.mu_after)
        sigmas.append(row.sigma_after or 0.0)
        flags.append(0 if row.match_seq is None else 1)
        played.append(_day_and_time(row.played_at))
    k = config.conservative_k if config.bayesian else None
    return Trajectory(
        mu=[round(mu, DIGITS) for mu in mus],
        conservative=[
            round(config.conservative(Rating(mu, sigma)), DIGITS)
            for mu, sigma in zip(mus, sigmas, strict=True)
        ],
        lower=[round(m - s, DIGITS) for m, s in zip(mus, sigmas, strict=True)]
        if config.bayesian
        else None,
        upper=[round(m + s, DIGITS) for m, s in zip(mus, sigmas, strict=True)]
        if config.bayesian
        else None,
        matches=flags,
        conservative_k=k,
        played=played,
        glicko=ladder.algorithm == "glicko2",
    )


def _day_and_time(moment: datetime) -> str:
    return utc(moment).strftime("%Y-%m-%d %H:%M")


# -- a player's matches ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PlayedMatch:
    """One row of a player's match history: the rating change and, for a match, how the
    player's team placed and against whom."""

    kind: str
    match_id: str | None
    played_at: datetime
    before: RatingOut
    after: RatingOut
    #: "won", "lost", "drew", or "2nd of 4" (a tie: "tied 2nd of 4"); None: an adjustment.
    outcome: str | None = None
    teammates: list[str] = field(default_factory=list)
    opponents: list[str] = field(default_factory=list)
    #: Players beyond the names listed.
    more_opponents: int = 0
    voided: bool = False
    #: The player's own statistic in the match (``player_scores``), where it was given.
    statistic: float | None = None

    @property
    def change(self) -> float:
        return self.after.mu - self.before.mu


@dataclass(frozen=True, slots=True)
class MatchHistory:
    entries: list[PlayedMatch]
    next_cursor: str | None


def _ordinal(n: int) -> str:
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def _placing(ranks: list[int], own: int) -> str:
    """How the team at index ``own`` placed among teams of ``ranks`` (lower is better)."""
    mine = ranks[own]
    ahead = sum(1 for r in ranks if r < mine)
    tied = sum(1 for r in ranks if r == mine) > 1
    if len(ranks) == 2:
        return "drew" if tied else ("won" if ahead == 0 else "lost")
    place = f"{_ordinal(ahead + 1)} of {len(ranks)}"
    return f"tied {place}" if tied else place


def _played(entry: HistoryEntry, player_id: str, document: str | None) -> PlayedMatch:
    base = PlayedMatch(
        kind=entry.kind,
        match_id=entry.match_id,
        played_at=entry.played_at,
        before=entry.before,
        after=entry.after,
    )
    if document is None:
        return base
    result = json.loads(document)
    teams = result.get("teams", [])
    ranks = [int(team["rank"]) for team in teams]
    own = next(
        (
            j
            for j, team in enumerate(teams)
            if any(p["player_id"] == player_id for p in team["players"])
        ),
        None,
    )
    if own is None:  # not in the stored document (cannot happen for a match of theirs)
        return base
    mates = [p["player_id"] for p in teams[own]["players"] if p["player_id"] != player_id]
    others = [p["player_id"] for j, team in enumerate(teams) if j != own for p in team["players"]]
    return replace(
        base,
        outcome=_placing(ranks, own),
        teammates=mates[:NAMES_SHOWN],
        opponents=others[:NAMES_SHOWN],
        more_opponents=max(0, len(others) - NAMES_SHOWN),
        voided=bool(result.get("voided")),
    )


def match_history(
    *, session: Session, ladder: Ladder, player_id: str, limit: int, cursor: str | None
) -> MatchHistory:
    """A page of the player's rating changes, newest first (the API's history read, and
    its cursor), each match with the placing, teammates and opponents of its stored result
    document (one indexed lookup for the page's matches)."""
    page = players.player_history(
        session=session, ladder=ladder, player_id=player_id, limit=limit, cursor=cursor
    )
    ids = [entry.match_id for entry in page.entries if entry.match_id is not None]
    stored = match_repo.find_matches(session=session, ladder_id=ladder.id, match_ids=ids)
    statistics = match_repo.statistics_of(
        session=session, ladder_id=ladder.id, match_ids=ids, player_id=player_id
    )
    return MatchHistory(
        entries=[
            replace(
                _played(
                    entry,
                    player_id,
                    stored[entry.match_id].result if entry.match_id in stored else None,
                ),
                statistic=statistics.get(entry.match_id) if entry.match_id else None,
            )
            for entry in page.entries
        ],
        next_cursor=page.next_cursor,
    )


# -- a ladder's prediction health --------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Health:
    """A ladder's prediction health: the running tally over every match that counts
    (``overall``), and over its newest matches (at most :data:`HEALTH_WINDOW`) the
    periods, the draws per quality bin and the paper's draws curve."""

    overall: AccuracyOut
    window: int
    read: int
    scored: int
    periods: list[health.Period]
    with_quality: int
    quality_bins: list[health.QualityBin]
    curve_x: list[float]
    curve_y: list[float]


def prediction_health(*, session: Session, ladder: Ladder) -> Health:
    overall = accuracy.ladder_accuracy(session=session, ladder=ladder, window=None, since=None)
    rows = accuracy_repo.recent_predictions(
        session=session, ladder_id=ladder.id, window=HEALTH_WINDOW
    )
    rows.reverse()  # oldest first
    scored = []
    draws = []
    for row in rows:
        teams = len(row.win_probabilities) if row.win_probabilities is not None else None
        if teams is None and row.ranks is not None:
            teams = len(row.ranks)
        if teams is None and row.scores is not None:
            teams = len(row.scores)
        if teams is None:
            continue
        outcome = outcome_of(row.ranks, row.scores, teams)
        if row.win_probabilities is not None:
            scored.append((utc(row.played_at), row.win_probabilities, outcome))
        drawn = health.drawn_share(outcome)
        if row.quality is not None and drawn is not None:
            draws.append((row.quality, drawn))
    curve_x, curve_y = health.draw_curve(draws)
    return Health(
        overall=overall,
        window=HEALTH_WINDOW,
        read=len(rows),
        scored=len(scored),
        periods=health.periods(scored, HEALTH_PERIODS),
        with_quality=len(draws),
        quality_bins=health.quality_bins(draws),
        curve_x=curve_x,
        curve_y=curve_y,
    )
