"""Match files made ready for the rating models: each line is the body of
``POST /v1/ladders/{ladder}/matches``, read as the API reads it
(:mod:`app.domain.match_files`, the reader ``ratings import`` uses too): ``match_id``,
``played_at``, ``teams`` (lists of player ids), ``ranks`` (lower is better, equal is a
draw) or ``scores`` (higher is better) or neither (teams listed winner first), optional
``weights`` (partial play in [0, 1], the shape of ``teams``), ``advantage`` (each team's
share in [0, 1] of the ladder's advantage: home ground, first move) and ``meta`` (ignored).
Plain or gzip-compressed (a name ending in ``.gz``). Blank lines are skipped.

Player ids become small integers (indices into a ratings table) in order of first
appearance. Matches are returned in time order (a stable sort on ``played_at``: matches
at the same time keep their file order; one without ``played_at`` takes the time of the
match before it).

A match that names the same player twice (the Formula 1 file has shared drives, two
drivers' results credited to one driver) cannot be rated by a model that keeps one
belief per player, so it is left out and counted in ``MatchFile.skipped``: the one
refusal of the API's that does not stop the reading.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field
from pathlib import Path

from app.domain.documents.matches import MatchCreate
from app.domain.match_files import MatchFileError, match_lines, open_match_file

_SECONDS_PER_DAY = 86400.0


#: A match file that cannot be read; the message names the file and the line.
DataError = MatchFileError


@dataclass(frozen=True, slots=True)
class Match:
    """One match, ready for a rating model.

    ``teams[j]`` holds player indices into ``MatchFile.players``; ``ranks[j]`` is lower for
    better (equal: a draw), always filled in; ``weights`` is ``None`` for full play.
    ``scores`` are the teams' scores when the file gives them (higher is better; the
    margin an algorithm may learn from), else ``None``. ``advantage`` is each team's share
    of the advantage, ``None`` when no team has any. ``day`` is ``played_at`` in days
    since 1970-01-01 UTC (NaN when the file has none).
    """

    line: int
    match_id: str
    day: float
    teams: tuple[tuple[int, ...], ...]
    ranks: tuple[float, ...]
    weights: tuple[tuple[float, ...], ...] | None = None
    scores: tuple[float, ...] | None = None
    advantage: tuple[float, ...] | None = None
    #: Each player's own statistic in the shape of ``teams`` (None: unknown), if given.
    player_scores: tuple[tuple[float | None, ...], ...] | None = None


@dataclass(slots=True)
class MatchFile:
    """The matches of one file in time order, the player ids and what was left out."""

    path: str
    matches: list[Match]
    players: list[str]
    #: Matches left out because a player appears twice in them.
    skipped: int = 0
    #: The line numbers of the skipped matches (the first few, for messages).
    skipped_lines: list[int] = field(default_factory=list)


def _day(body: MatchCreate, before: float) -> float:
    """``played_at`` in days since 1970-01-01 UTC; the match before's when it has none."""
    if body.played_at is None:
        return before
    return body.played_at.timestamp() / _SECONDS_PER_DAY


def _ranks(body: MatchCreate) -> tuple[float, ...]:
    """Lower is better: the ranks, the scores negated, or the order of the teams."""
    if body.ranks is not None:
        return tuple(float(rank) for rank in body.ranks)
    if body.scores is not None:
        return tuple(-float(score) for score in body.scores)
    return tuple(float(j) for j in range(len(body.teams)))


def _match(number: int, body: MatchCreate, day: float, teams: tuple[tuple[int, ...], ...]) -> Match:
    weights = body.weights
    advantage = body.advantage
    return Match(
        line=number,
        match_id=body.match_id if body.match_id is not None else str(number),
        day=day,
        teams=teams,
        ranks=_ranks(body),
        weights=(
            None
            if weights is None or all(w == 1.0 for row in weights for w in row)
            else tuple(tuple(row) for row in weights)
        ),
        scores=None if body.scores is None else tuple(float(s) for s in body.scores),
        advantage=None if advantage is None or not any(advantage) else tuple(advantage),
        player_scores=player_scores_of(body.player_scores),
    )


def player_scores_of(
    values: list[list[float | None]] | None,
) -> tuple[tuple[float | None, ...], ...] | None:
    """Players' statistics as a match holds them (floats, None where unknown)."""
    if values is None:
        return None
    return tuple(tuple(None if x is None else float(x) for x in row) for row in values)


def _number_of(player: str, index: dict[str, int], players: list[str]) -> int:
    """The player's number: the next one at their first appearance."""
    number = index.get(player)
    if number is None:
        number = index[player] = len(players)
        players.append(player)
    return number


def read_matches(path: str | Path) -> MatchFile:
    """Read a match file (plain or ``.gz``), each line as the API reads a match, of any
    size (``app.domain.match_files``); raise ``DataError`` naming a line it refuses."""
    path = Path(path)
    index: dict[str, int] = {}
    players: list[str] = []
    rows: list[tuple[float, int, Match]] = []
    repeated: list[int] = []
    last_day = math.nan
    _, lines = open_match_file(path)
    with lines:
        for number, body in match_lines(lines, str(path), repeated=repeated, bounded=False):
            last_day = _day(body, last_day)
            teams = tuple(
                tuple(_number_of(pid, index, players) for pid in team) for team in body.teams
            )
            rows.append((last_day, len(rows), _match(number, body, last_day, teams)))
    if all(not math.isnan(day) for day, _, _ in rows):
        rows.sort(key=lambda r: (r[0], r[1]))
    return MatchFile(
        str(path),
        [m for _, _, m in rows],
        players,
        skipped=len(repeated),
        skipped_lines=repeated[:20],
    )


def empirical_draw_probability(matches: list[Match]) -> float:
    """The fraction of draws between compared teams (the paper's section 4.1).

    Compared teams are the neighbours in the finishing order, as the factor graph
    compares them: for each match, the teams sorted by rank and each adjacent pair
    counted once; the fraction of those pairs with equal ranks. 0 for no pairs.
    """
    pairs = draws = 0
    for m in matches:
        order = sorted(m.ranks)
        pairs += len(order) - 1
        draws += sum(1 for a, b in itertools.pairwise(order) if a == b)
    return draws / pairs if pairs else 0.0
