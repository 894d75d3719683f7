"""Reading match files: JSON Lines in the body of ``POST /v1/ladders/{ladder}/matches``.

One match per line (``../shared/data/README.md``): ``match_id``, ``played_at``,
``teams`` (lists of player ids), ``ranks`` (lower is better, equal is a draw) or
``scores`` (higher is better) or neither (teams listed winner first), optional
``weights`` (partial play in [0, 1], the shape of ``teams``), ``advantage`` (each team's
share in [0, 1] of the ladder's advantage: home ground, first move) and ``meta``
(ignored).
Plain or gzip-compressed (a name ending in ``.gz``). Blank lines are skipped.

Player ids become small integers (indices into a ratings table) in order of first
appearance. Matches are returned in time order (a stable sort on ``played_at``: matches
at the same time keep their file order; one without ``played_at`` takes the time of the
match before it).

A match that names the same player twice (the Formula 1 file has shared drives, two
drivers' results credited to one driver) cannot be rated by a model that keeps one
belief per player, so it is left out and counted in ``MatchFile.skipped``.
"""

from __future__ import annotations

import gzip
import io
import itertools
import json
import math
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

_SECONDS_PER_DAY = 86400.0


class DataError(ValueError):
    """A match file that cannot be read; the message names the file and the line."""

    def __init__(self, path: str, line: int | None, message: str) -> None:
        self.path = path
        self.line = line
        self.message = message
        where = f"{path}:{line}" if line is not None else path
        super().__init__(f"{where}: {message}")


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


def _open_text(path: Path) -> io.TextIOBase:
    if path.name.endswith(".gz"):
        return io.TextIOWrapper(gzip.open(path, "rb"), encoding="utf-8")
    return io.TextIOWrapper(open(path, "rb"), encoding="utf-8")


def _lines(path: Path) -> Iterator[tuple[int, str]]:
    try:
        stream = _open_text(path)
    except OSError as exc:
        raise DataError(str(path), None, f"cannot open: {exc.strerror or exc}") from None
    with stream:
        number = 0
        try:
            for number, text in enumerate(stream, start=1):
                yield number, text
        except (OSError, EOFError, UnicodeDecodeError) as exc:
            raise DataError(str(path), number + 1, f"cannot read: {exc}") from None


def _number(value: object) -> bool:
    return not isinstance(value, bool) and isinstance(value, int | float) and math.isfinite(value)


def parse_day(text: object) -> float:
    """``played_at`` (ISO 8601 date or date-time; no zone means UTC) in days since 1970."""
    if not isinstance(text, str):
        raise ValueError(f"played_at must be a string, got {text!r}")
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise ValueError(f"played_at is not an ISO 8601 date or date-time: {text!r}") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.timestamp() / _SECONDS_PER_DAY


def _outcome(body: dict[str, Any], k: int) -> tuple[float, ...]:
    ranks = body.get("ranks")
    scores = body.get("scores")
    if ranks is not None and scores is not None:
        raise ValueError("give ranks or scores, not both")
    if ranks is None and scores is None:
        return tuple(float(j) for j in range(k))
    name, values = ("ranks", ranks) if ranks is not None else ("scores", scores)
    if not isinstance(values, list) or len(values) != k:
        raise ValueError(f"{name} must be a list of {k} numbers (one per team)")
    if not all(_number(v) for v in values):
        raise ValueError(f"{name} must hold finite numbers, got {values!r}")
    sign = 1.0 if name == "ranks" else -1.0
    return tuple(sign * float(v) for v in values)


def _weights(body: dict[str, Any], sizes: list[int]) -> tuple[tuple[float, ...], ...] | None:
    weights = body.get("weights")
    if weights is None:
        return None
    if not isinstance(weights, list) or len(weights) != len(sizes):
        raise ValueError(f"weights must be a list of {len(sizes)} lists (one per team)")
    out: list[tuple[float, ...]] = []
    for j, (row, size) in enumerate(zip(weights, sizes, strict=True)):
        if not isinstance(row, list) or len(row) != size:
            raise ValueError(f"weights[{j}] must be a list of {size} numbers")
        if not all(_number(w) and 0.0 <= w <= 1.0 for w in row):
            raise ValueError(f"weights[{j}] must hold numbers in [0, 1], got {row!r}")
        if not any(row):
            raise ValueError(f"weights[{j}] are all 0: the team did not play")
        out.append(tuple(float(w) for w in row))
    if all(w == 1.0 for row in out for w in row):
        return None
    return tuple(out)


def _scores(body: dict[str, Any]) -> tuple[float, ...] | None:
    scores = body.get("scores")
    return None if scores is None else tuple(float(v) for v in scores)


def _advantage(body: dict[str, Any], k: int) -> tuple[float, ...] | None:
    shares = body.get("advantage")
    if shares is None:
        return None
    if not isinstance(shares, list) or len(shares) != k:
        raise ValueError(f"advantage must be a list of {k} numbers (one per team)")
    if not all(_number(a) and 0.0 <= a <= 1.0 for a in shares):
        raise ValueError(f"advantage must hold numbers in [0, 1], got {shares!r}")
    if not any(shares):
        return None
    return tuple(float(a) for a in shares)


def read_matches(path: str | Path) -> MatchFile:
    """Read a match file (plain or ``.gz``); raise ``DataError`` naming the bad line."""
    path = Path(path)
    index: dict[str, int] = {}
    players: list[str] = []
    rows: list[tuple[float, int, Match]] = []
    skipped_lines: list[int] = []
    last_day = math.nan
    for number, text in _lines(path):
        if not text.strip():
            continue
        try:
            body = json.loads(text)
        except json.JSONDecodeError as exc:
            raise DataError(str(path), number, f"not valid JSON: {exc.msg}") from None
        try:
            if not isinstance(body, dict):
                raise ValueError("a match must be a JSON object")
            teams = body.get("teams")
            if not isinstance(teams, list) or len(teams) < 2:
                raise ValueError("teams must be a list of at least two teams")
            for j, team in enumerate(teams):
                if not isinstance(team, list) or not team:
                    raise ValueError(f"teams[{j}] must be a non-empty list of player ids")
                for pid in team:
                    if isinstance(pid, bool) or not isinstance(pid, str | int):
                        raise ValueError(f"teams[{j}] holds {pid!r}, not a player id")
            ranks = _outcome(body, len(teams))
            weights = _weights(body, [len(team) for team in teams])
            scores = _scores(body)
            advantage = _advantage(body, len(teams))
            day = last_day if body.get("played_at") is None else parse_day(body["played_at"])
            match_id = body.get("match_id", str(number))
            if not isinstance(match_id, str | int) or isinstance(match_id, bool):
                raise ValueError(f"match_id must be a string, got {match_id!r}")
        except ValueError as exc:
            raise DataError(str(path), number, str(exc)) from None
        last_day = day
        ids = [str(pid) for team in teams for pid in team]
        if len(set(ids)) != len(ids):
            skipped_lines.append(number)
            continue
        idx: list[tuple[int, ...]] = []
        for team in teams:
            row: list[int] = []
            for pid in team:
                key = str(pid)
                i = index.get(key)
                if i is None:
                    i = index[key] = len(players)
                    players.append(key)
                row.append(i)
            idx.append(tuple(row))
        match = Match(number, str(match_id), day, tuple(idx), ranks, weights, scores, advantage)
        rows.append((day, len(rows), match))
    if all(not math.isnan(day) for day, _, _ in rows):
        rows.sort(key=lambda r: (r[0], r[1]))
    return MatchFile(
        str(path),
        [m for _, _, m in rows],
        players,
        skipped=len(skipped_lines),
        skipped_lines=skipped_lines[:20],
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
