"""Re-rating recorded matches: voiding a match, rebuilding a whole ladder.

Both replay matches with the engine of ``app.rating.replay`` (through ``rating.rate``,
the path new matches take) and rewrite what they computed: ratings, the history rows of the
re-rated matches, their result documents (quality included) and win probabilities, and the
ladder's accuracy tally (``app.services.accuracy``).

Seeds (``PUT .../players/{id}``, history "adjustments") keep their place: a player's history
rows are ordered by id and re-rating rewrites them in place, so an adjustment sits between
the same two matches of that player. A replay sets the player's rating to the seeded value
there, as the seed did; the adjustment's "before" becomes the replayed rating at that point.
Time away (``tau_per_day``) still runs from the player's latest match across a seed.
"""

from __future__ import annotations

import bisect
import json
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any, Literal

import numpy as np
from sqlalchemy.orm import Session

from app.domain import jsontext
from app.domain.accuracy import Tally
from app.domain.documents.ladders import LadderUpdate, LadderUpdated, RebuildResult
from app.domain.documents.matches import VoidResult
from app.domain.ladders import LadderConfig, full_params, ladder_config
from app.domain.outcomes import dense_ranks, outcome_of
from app.domain.pseudonyms import is_pseudonym
from app.domain.results import result_parts, rfc3339, with_seq
from app.domain.times import utc
from app.errors import Conflict, NotFound
from app.services import accuracy, erasure, events
from app.services.ladders import hold_ladder, ladder_view, stored_tiers
from app.services.rating import Planned, Rated, RatingTable, day_of, rate
from app.services.recording import history_rows
from app.services.seasons import (
    Seasons,
    finish_opening,
    refresh_played,
    reset_values,
    rewrite_standings,
    seasons_of,
)
from app.storage import blocks
from app.storage.models import Ladder, Match, RatingHistory
from app.storage.repositories import ladders as ladder_repo
from app.storage.repositories import matches as match_repo
from app.storage.repositories import ratings as rating_repo
from app.storage.repositories import rerating as rerating_repo
from app.storage.repositories import seasons as season_repo
from app.storage.repositories.rerating import HistoryRow, MatchRow
from app.storage.repositories.seasons import SeasonRow


@dataclass(frozen=True, slots=True)
class _Scope:
    """What a re-rating replays: the matches in order, the players with the rating and the
    latest played_at each starts from, and the history rows to rewrite (in id order)."""

    matches: list[MatchRow]
    start: dict[str, tuple[float, float | None]]
    latest: dict[str, datetime | None]
    history: list[HistoryRow]
    #: Glicko-2: the volatility each player starts from (missing: the prior's).
    start_volatility: dict[str, float | None] = field(default_factory=dict)
    #: Each pseudonym's rating counts from the match of this seq on: a season that opens
    #: after it resets it (a player's resets are history rows; a pseudonym has none).
    rated_from: dict[str, int] = field(default_factory=dict)


def _planned(row: MatchRow) -> Planned:
    request = row.request
    teams: list[list[str]] = request["teams"]
    return Planned(
        match_id=row.match_id,
        played_at=utc(row.played_at),
        teams=teams,
        outcome=outcome_of(request.get("ranks"), request.get("scores"), len(teams)),
        weights=request.get("weights"),
        advantage=request.get("advantage"),
        scores=request.get("scores"),
        player_scores=request.get("player_scores"),
    )


#: Matches a re-rating rates and writes per step; it reports its progress after each.
PROGRESS_STEP = 5_000

#: What a re-rating reports after each step: (matches re-rated and written, of how many).
Progress = Callable[[int, int], None]


def _silent(done: int, total: int) -> None:
    """The progress of a re-rating nobody follows."""


def _rewrites(
    *,
    ladder: Ladder,
    config: LadderConfig,
    stored: Sequence[MatchRow],
    planned: Sequence[Planned],
    rated: Rated,
    match_rows: dict[tuple[int, str], int],
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The new match rows (quality, win probabilities, result document) and history rows of
    matches rated together (``rated``: their participants in order)."""
    before = (rated.before_mu.tolist(), rated.before_sigma.tolist())
    after = (rated.after_mu.tolist(), rated.after_sigma.tolist())
    volatility = rated.volatility()
    quality = rated.quality.tolist()
    match_updates: list[dict[str, Any]] = []
    history_updates: list[dict[str, Any]] = []
    for n, (row, plan) in enumerate(zip(stored, planned, strict=True)):
        ranks = dense_ranks(plan.outcome)
        offset = rated.offsets[n]
        chances = rated.win_probabilities[n]
        match_updates.append(
            {
                "seq": row.seq,
                "quality": quality[n],
                "win_probabilities": chances,
                "result": with_seq(
                    result_parts(
                        config=config,
                        ladder_id=ladder.id,
                        match_id=row.match_id,
                        played_at=plan.played_at,
                        recorded_at=row.recorded_at,
                        quality=quality[n],
                        teams=plan.teams,
                        ranks=ranks,
                        weights=plan.weights,
                        before=before,
                        after=after,
                        offset=offset,
                        meta=row.request.get("meta"),
                        volatility=volatility,
                        win_probabilities=chances,
                    ),
                    row.seq,
                ),
                "voided_at": None,
            }
        )
        parts = history_rows(
            config=config,
            ladder_id=ladder.id,
            seq=row.seq,
            match=plan,
            before=before,
            after=after,
            offset=offset,
            volatility=volatility,
        )
        history_updates.extend(
            {
                "id": match_rows[(row.seq, part["player_id"])],
                "mu_before": part["mu_before"],
                "sigma_before": part["sigma_before"],
                "mu_after": part["mu_after"],
                "sigma_after": part["sigma_after"],
                "volatility_before": part["volatility_before"],
                "volatility_after": part["volatility_after"],
            }
            for part in parts
            if not is_pseudonym(part["player_id"])  # no history: rated in memory only
        )
    return match_updates, history_updates


@dataclass(frozen=True, slots=True)
class _Replayed:
    """What a replay left: the ratings after, what the re-rated matches' new predictions
    scored, and the reset entries it rewrote (rows of ``rating_history``)."""

    table: RatingTable
    tally: Tally
    resets: list[dict[str, Any]]


def _stored_tally(matches: Sequence[MatchRow | Match]) -> Tally:
    """What the stored predictions of ``matches`` scored (those without any left out)."""
    tally = Tally.zero()
    for row in matches:
        chances = row.win_probabilities
        if chances is not None:
            request = row.request
            outcome = outcome_of(request.get("ranks"), request.get("scores"), len(chances))
            tally.add_match(chances, outcome)
    return tally


def _replay_scope(
    *,
    session: Session,
    ladder: Ladder,
    config: LadderConfig,
    scope: _Scope,
    seasons: Seasons,
    progress: Progress,
) -> _Replayed:
    """Replay the scope's matches over its players, seeds and season resets at their
    places, and rewrite the matches and history rows, :data:`PROGRESS_STEP` matches at a
    time (``progress`` is told after each). Returns the ratings after, what the matches'
    new predictions scored, and the reset entries rewritten."""
    table = _start_table(scope, config)
    planned = [_planned(row) for row in scope.matches]
    places = _seed_places(scope)
    # Erased players' seeds, kept in the requests of the matches they came before, and the
    # seasons that open between their matches.
    pseudonym_seeds = erasure.seeds_at(scope.matches)
    openings = _openings(scope, seasons)
    resets: list[dict[str, Any]] = []
    tally_after = Tally.zero()
    match_updates: list[dict[str, Any]] = []
    history_updates: list[dict[str, Any]] = []

    def label(n: int) -> str:
        return f"match {planned[n].match_id!r}: "

    def write(done: int) -> None:
        rerating_repo.update_matches(session=session, rows=match_updates)
        rerating_repo.update_history(session=session, rows=history_updates)
        match_updates.clear()
        history_updates.clear()
        progress(done, len(planned))

    progress(0, len(planned))
    steps = range(PROGRESS_STEP, len(planned), PROGRESS_STEP)
    begin = 0
    # Rated in runs between the places where a seed applies (and every step's end).
    for cut in [*sorted({*places.before, *pseudonym_seeds, *openings, *steps}), len(planned)]:
        if cut > begin:
            rated = rate(
                ladder=ladder,
                config=config,
                table=table,
                matches=planned[begin:cut],
                label=label,
                start=begin,
            )
            tally_after.add(rated.tally(planned[begin:cut]))
            rows, history = _rewrites(
                ladder=ladder,
                config=config,
                stored=scope.matches[begin:cut],
                planned=planned[begin:cut],
                rated=rated,
                match_rows=places.match_rows,
            )
            match_updates.extend(rows)
            history_updates.extend(history)
        for season in openings.get(cut, []):
            _reset_pseudonyms(table, config, season, scope.rated_from)
        for player, (mu, sigma, volatility) in pseudonym_seeds.get(cut, {}).items():
            _set_rating(table, player, mu, sigma, volatility)
        history_updates.extend(
            _apply_seeds(places.before.get(cut, []), table, config, seasons, resets)
        )
        begin = cut
        if len(match_updates) >= PROGRESS_STEP:
            write(cut)
    history_updates.extend(_apply_seeds(places.at_end, table, config, seasons, resets))
    write(len(planned))
    return _Replayed(table, tally_after, resets)


def _openings(scope: _Scope, seasons: Seasons) -> dict[int, list[SeasonRow]]:
    """Where the seasons that open between the scope's matches fall, by the place of the
    first match after each (only where a pseudonym is replayed: a player's resets are its
    history rows)."""
    if not scope.rated_from or len(seasons.rows) == 1:
        return {}
    seqs = [row.seq for row in scope.matches]
    out: dict[int, list[SeasonRow]] = {}
    for season in seasons.rows[1:]:
        place = bisect.bisect_left(seqs, season.first_seq)
        if 0 < place < len(seqs):
            out.setdefault(place, []).append(season)
    return out


def _reset_pseudonyms(
    table: RatingTable, config: LadderConfig, season: SeasonRow, rated_from: dict[str, int]
) -> None:
    """The soft reset of ``season`` for every pseudonym already rated when it opened."""
    players = [p for p, seq in rated_from.items() if seq < season.first_seq]
    if not players:
        return
    where = np.array([table.index[p] for p in players], dtype=np.intp)
    mu, sigma = reset_values(config, table.mu[where], table.sigma[where], season.keep)
    table.mu[where] = mu
    table.sigma[where] = sigma if config.bayesian else table.sigma[where]


def _start_table(scope: _Scope, config: LadderConfig) -> RatingTable:
    """The ratings the scope's players start from, with the day of their latest match."""
    players = sorted(scope.start)
    table = RatingTable(
        players=players,
        mu=np.array([scope.start[p][0] for p in players], dtype=np.float64),
        sigma=np.array([scope.start[p][1] or 0.0 for p in players], dtype=np.float64),
        last_day=np.array(
            [
                day_of(latest) if (latest := scope.latest.get(p)) is not None else math.nan
                for p in players
            ],
            dtype=np.float64,
        ),
    )
    if config.volatile:
        prior = config.model.rating().volatility
        table.volatility = np.array(
            [scope.start_volatility.get(p) or prior for p in players], dtype=np.float64
        )
    return table


@dataclass(frozen=True, slots=True)
class _SeedPlaces:
    """Where the seeds of a scope's history apply: before the match at each position (the
    player's next re-rated match, by history id), or after the last; and each re-rated
    (match seq, player)'s history row."""

    before: dict[int, list[HistoryRow]]
    at_end: list[HistoryRow]
    match_rows: dict[tuple[int, str], int]


def _seed_places(scope: _Scope) -> _SeedPlaces:
    position = {row.seq: n for n, row in enumerate(scope.matches)}
    before: dict[int, list[HistoryRow]] = {}
    pending: dict[str, list[HistoryRow]] = {}
    match_rows: dict[tuple[int, str], int] = {}
    for row in scope.history:
        if row.kind != "match":
            pending.setdefault(row.player_id, []).append(row)
        elif row.match_seq is not None and row.match_seq in position:
            match_rows[(row.match_seq, row.player_id)] = row.id
            waiting = pending.pop(row.player_id, None)
            if waiting:
                before.setdefault(position[row.match_seq], []).extend(waiting)
    at_end = [row for rows in pending.values() for row in rows]
    return _SeedPlaces(before, at_end, match_rows)


def _set_rating(
    table: RatingTable, player: str, mu: float, sigma: float | None, volatility: float | None
) -> None:
    p = table.index[player]
    table.mu[p] = mu
    table.sigma[p] = sigma or 0.0
    if table.volatility is not None and volatility is not None:
        table.volatility[p] = volatility


def _apply_seeds(
    seeds: list[HistoryRow],
    table: RatingTable,
    config: LadderConfig,
    seasons: Seasons,
    resets: list[dict[str, Any]],
) -> list[dict[str, Any]]:
    """Apply each seed (its rating set) and season reset (the rating pulled toward the
    prior by its season's ``keep``) in ``table``, in history order; their history rows,
    their "before" now the replayed rating at their place (a reset's "after" too; its
    rows are also added to ``resets``)."""
    rows = []
    for seed in sorted(seeds, key=lambda row: row.id):
        p = table.index[seed.player_id]
        before = (float(table.mu[p]), float(table.sigma[p]))
        volatility = float(table.volatility[p]) if table.volatility is not None else None
        after = (seed.mu_after, seed.sigma_after, seed.volatility_after)
        if seed.reset:
            keep = seasons.opened_by(seed.id).keep
            mu, sigma = reset_values(config, table.mu[p : p + 1], table.sigma[p : p + 1], keep)
            after = (float(mu[0]), float(sigma[0]) if config.bayesian else None, volatility)
        row = {
            "id": seed.id,
            "mu_before": before[0],
            "sigma_before": before[1] if config.bayesian else None,
            "mu_after": after[0],
            "sigma_after": after[1],
            "volatility_before": volatility,
            "volatility_after": after[2],
        }
        rows.append(row)
        if seed.reset:
            resets.append({**row, "player_id": seed.player_id})
        _set_rating(table, seed.player_id, *after)
    return rows


def _rating_row(
    config: LadderConfig,
    table: RatingTable,
    player: str,
    matches: int,
    last_played_at: datetime | None,
    now: datetime,
    as_of: datetime | None,
) -> dict[str, Any]:
    """A replayed rating as a row of ``ratings``: its conservative rating as it stands at
    ``as_of`` (the ladder's ``aged_at``)."""
    p = table.index[player]
    mu = float(table.mu[p])
    sigma = float(table.sigma[p]) if config.bayesian else None
    volatility = float(table.volatility[p]) if table.volatility is not None else None
    return {
        "player_id": player,
        "mu": mu,
        "sigma": sigma,
        "conservative": config.standing(mu, sigma, last_played_at, as_of)[1],
        "matches": matches,
        "last_played_at": last_played_at,
        "updated_at": now,
        "volatility": volatility,
    }


def _players(row: MatchRow) -> list[str]:
    return [player for team in row.request["teams"] for player in team]


def _closure(
    players: set[str], later: list[MatchRow]
) -> tuple[list[MatchRow], set[str], dict[str, int]]:
    """The matches ``players`` reach: each later match with one of them, whose players join
    in turn. Returns them, every player reached, and the seq where each joined."""
    reached = set(players)
    joined: dict[str, int] = {}
    affected = []
    for row in later:
        members = _players(row)
        if any(player in reached for player in members):
            affected.append(row)
            for player in members:
                if player not in reached:
                    reached.add(player)
                    joined[player] = row.seq
    return affected, reached, joined


def void_match(
    *,
    session: Session,
    ladder: Ladder,
    match_id: str,
    now: datetime,
    progress: Progress = _silent,
    patient: bool = False,
) -> VoidResult:
    """Void a match: re-rate every later match it reaches as if it had never been played.

    Voiding a voided match changes nothing (``already_voided``). In one transaction that
    holds the ladder (:func:`hold_ladder`), with the rows of every player it reaches locked
    in one ordered statement.
    """
    ladder = hold_ladder(session=session, ladder_id=ladder.id, patient=patient)
    blocks.filled(session)  # it may rewrite many ratings: their blocks are cut after it
    # A season opening under way finishes first: the replay reads every reset it makes.
    finish_opening(session=session, ladder=ladder, now=now)
    match = rerating_repo.lock_match(session=session, ladder_id=ladder.id, match_id=match_id)
    if match is None:
        raise NotFound(f"match_id: no match {match_id[:128]!r} in ladder {ladder.id!r}")
    if match.voided_at is not None:
        return VoidResult(
            match_id=match.match_id,
            ladder=ladder.id,
            voided_at=utc(match.voided_at),
            already_voided=True,
            matches_rerated=0,
            players_affected=0,
        )
    config = ladder_config(ladder.algorithm, ladder.params)
    voided_players = {player for team in match.request["teams"] for player in team}
    # No match of the ladder can be recorded while it is held, so the matches read now are
    # all there are. The reached players' rows are locked too: a seed (PUT .../players/{id})
    # of one of them waits, or was committed before and is read below.
    later = rerating_repo.matches_after(session=session, ladder_id=ladder.id, after_seq=match.seq)
    affected, reached, joined = _closure(voided_players, later)
    states = rating_repo.lock_rating_states(
        session=session, ladder_id=ladder.id, player_ids=sorted(reached)
    )
    watch = events.ladder_tier_watch(ladder)
    standings = watch.read(session, sorted(reached)) if watch is not None else {}
    affected = erasure.carry_seeds(session=session, voided_request=match.request, affected=affected)
    scope = _void_scope(
        session=session,
        ladder_id=ladder.id,
        match=match,
        later=later,
        reached=reached,
        joined=joined,
        affected=affected,
    )
    seasons = seasons_of(session=session, ladder_id=ladder.id)
    scope, left = _unrated_resets_out(
        session=session, ladder_id=ladder.id, scope=scope, match=match, seasons=seasons
    )
    latest_before = dict(scope.latest)
    replayed = _replay_scope(
        session=session,
        ladder=ladder,
        config=config,
        scope=scope,
        seasons=seasons,
        progress=progress,
    )
    # The ladder's tally: the voided match's share out, the re-rated matches' replaced.
    change = replayed.tally
    change.add(_stored_tally([*affected, match]), -1)
    accuracy.adjust(session=session, ladder_id=ladder.id, change=change)
    _mark_voided(session=session, match=match, now=now)
    if match.seq < seasons.rows[-1].first_seq:
        # A match of a closed season: its players' matches before this one go down too.
        rerating_repo.lower_season_base(
            session=session, ladder_id=ladder.id, player_ids=sorted(voided_players)
        )
    _write_void_ratings(
        session=session,
        ladder_id=ladder.id,
        config=config,
        table=replayed.table,
        states=states,
        voided_players=voided_players,
        latest_before=latest_before,
        newest=_newest_played(affected),
        now=now,
        as_of=ladder.aged_at,
    )
    rewrite_standings(
        session=session,
        ladder_id=ladder.id,
        config=config,
        seasons=seasons,
        resets=replayed.resets,
        left=left,
    )
    refresh_played(
        session=session,
        ladder_id=ladder.id,
        seasons=seasons,
        from_seq=match.seq,
        player_ids=sorted(p for p in voided_players if not is_pseudonym(p)),
    )
    result = VoidResult(
        match_id=match.match_id,
        ladder=ladder.id,
        voided_at=now,
        already_voided=False,
        matches_rerated=len(affected),
        players_affected=len(reached),
    )
    events.changed(session, ladder_id=ladder.id, type="match.voided", data=result, now=now)
    if watch is not None:
        watch.emit_changes(
            session,
            before=standings,
            after=watch.read(session, sorted(reached)),
            cause="match.voided",
            now=now,
            match_id=match.match_id,
        )
    return result


def _void_scope(
    *,
    session: Session,
    ladder_id: str,
    match: Match,
    later: list[MatchRow],
    reached: set[str],
    joined: dict[str, int],
    affected: list[MatchRow],
) -> _Scope:
    """What a void replays: the ``affected`` matches, each reached player starting where
    it stood before the voided match (or before the match it joined the re-rating at),
    with the history rows from there on."""
    seq = match.seq
    first_id = rerating_repo.first_history_id(session=session, match_seq=seq) or 0
    history = rerating_repo.history_from(
        session=session, ladder_id=ladder_id, from_seq=seq, from_id=first_id
    )
    start = rerating_repo.starting_ratings(session=session, ladder_id=ladder_id, match_seq=seq)
    first_row: dict[str, int] = {}
    start_volatility: dict[str, float | None] = {}
    for row in history:
        if row.kind != "match" or row.player_id not in reached:
            continue
        if row.match_seq == seq or row.match_seq == joined.get(row.player_id):
            first_row[row.player_id] = row.id
            start[row.player_id] = (row.mu_before, row.sigma_before)
            start_volatility[row.player_id] = row.volatility_before
    for player, (mu, sigma, volatility) in erasure.pseudonym_starts(
        session=session,
        reached=reached,
        voided_seq=seq,
        voided_request=match.request,
        joined=joined,
    ).items():
        start[player] = (mu, sigma)
        start_volatility[player] = volatility
    latest = _latest_played_before(
        session=session,
        ladder_id=ladder_id,
        seq=seq,
        later=later,
        reached=reached,
        joined=joined,
    )
    return _Scope(
        matches=affected,
        start=start,
        latest=latest,
        # From each player's first re-rated row on (the voided match's own rows are not
        # re-rated: they are deleted with it).
        history=[
            row
            for row in history
            if row.player_id in first_row and row.id >= first_row[row.player_id]
        ],
        start_volatility=start_volatility,
        rated_from=_pseudonyms_rated_from(seq, reached, joined, latest, affected),
    )


def _pseudonyms_rated_from(
    seq: int,
    reached: set[str],
    joined: dict[str, int],
    latest: dict[str, datetime | None],
    affected: list[MatchRow],
) -> dict[str, int]:
    """From which match on each pseudonym a void reaches counts as rated (a season opening
    after it resets it): where it joined the re-rating, or the voided match if it played
    a match that counts before that, else its first re-rated match."""
    out: dict[str, int] = {}
    for player in sorted(p for p in reached if is_pseudonym(p)):
        if player in joined:
            out[player] = joined[player]
        elif latest.get(player) is not None:
            out[player] = seq
        else:
            out[player] = next((row.seq for row in affected if player in _players(row)), MAX_SEQ)
    return out


#: Past every match seq.
MAX_SEQ = 2**63 - 1


def _unrated_resets_out(
    *, session: Session, ladder_id: str, scope: _Scope, match: Match, seasons: Seasons
) -> tuple[_Scope, set[int]]:
    """A reset entry of a player whose only rating before it came from the voided match
    goes (with the player's archived standing it closed): without that match the player
    was not rated when the season opened. The scope without those entries, and the
    seasons whose archives lost a player (their ranks are counted again)."""
    if len(seasons.rows) == 1:
        return scope, set()
    players = sorted({p for team in match.request["teams"] for p in team if not is_pseudonym(p)})
    unrated = season_repo.leading_resets(
        session=session, ladder_id=ladder_id, player_ids=players, ignoring_seq=match.seq
    )
    left: set[int] = set()
    for reset in unrated:
        season = seasons.opened_by(reset.id).ordinal - 1
        season_repo.delete_standings(
            session=session, ladder_id=ladder_id, season=season, player_ids=[reset.player_id]
        )
        left.add(season)
    gone = {reset.id for reset in unrated}
    season_repo.delete_history_rows(session=session, ids=sorted(gone))
    return replace(scope, history=[row for row in scope.history if row.id not in gone]), left


def _latest_played_before(
    *,
    session: Session,
    ladder_id: str,
    seq: int,
    later: list[MatchRow],
    reached: set[str],
    joined: dict[str, int],
) -> dict[str, datetime | None]:
    """Each reached player's latest played_at before its re-rating starts: its matches
    before the voided one, and for a player who joined later its unreached matches in
    between."""
    latest: dict[str, datetime | None] = {
        player: utc(played)
        for player, played in rerating_repo.latest_played_before(
            session=session, ladder_id=ladder_id, player_ids=sorted(reached), before_seq=seq
        ).items()
    }
    for earlier in later:
        for player in _players(earlier):
            if player in joined and earlier.seq < joined[player]:
                previous = latest.get(player)
                played = utc(earlier.played_at)
                if previous is None or previous < played:
                    latest[player] = played
    return latest


def _newest_played(matches: list[MatchRow]) -> dict[str, datetime]:
    """Each player's newest played_at among ``matches``."""
    newest: dict[str, datetime] = {}
    for rerated in matches:
        for player in _players(rerated):
            played = utc(rerated.played_at)
            if player not in newest or newest[player] < played:
                newest[player] = played
    return newest


def _mark_voided(*, session: Session, match: Match, now: datetime) -> None:
    """The voided match: marked in its document, out of its players' history."""
    document = json.loads(match.result)
    document["voided"] = True
    document["voided_at"] = rfc3339(now)
    rerating_repo.update_matches(
        session=session,
        rows=[
            {
                "seq": match.seq,
                "quality": match.quality,
                "result": jsontext.compact(document),
                "voided_at": now,
            }
        ],
    )
    rerating_repo.delete_match_rows(session=session, model=RatingHistory, seqs=[match.seq])


def _write_void_ratings(
    *,
    session: Session,
    ladder_id: str,
    config: LadderConfig,
    table: RatingTable,
    states: Sequence[rating_repo.RatingState],
    voided_players: set[str],
    latest_before: dict[str, datetime | None],
    newest: dict[str, datetime],
    now: datetime,
    as_of: datetime | None,
) -> None:
    """The reached players' new ratings (aged to ``as_of``); the voided match's players
    lose it from their match counts and latest played_at, and one whose only match it was
    (and who was never seeded) leaves the leaderboard: it was never rated."""
    rows = []
    gone = []
    for state in states:
        player = state.player_id
        count = state.matches
        last = utc(state.last_played_at) if state.last_played_at is not None else None
        if player in voided_players:
            count -= 1
            before = latest_before.get(player)
            candidates = [t for t in (before, newest.get(player)) if t is not None]
            last = max(candidates) if candidates else None
            if count == 0:
                gone.append(player)
        rows.append(_rating_row(config, table, player, count, last, now, as_of))
    seeded = rerating_repo.players_with_adjustments(
        session=session, ladder_id=ladder_id, player_ids=gone
    )
    gone = [player for player in gone if player not in seeded]
    rating_repo.update_ratings(
        session=session, ladder_id=ladder_id, rows=[r for r in rows if r["player_id"] not in gone]
    )
    rerating_repo.delete_ratings(session=session, ladder_id=ladder_id, player_ids=gone)


def rebuild(
    *,
    session: Session,
    ladder: Ladder,
    now: datetime,
    progress: Progress = _silent,
    patient: bool = False,
) -> RebuildResult:
    """Replay every counted match of the ladder from the prior, seeds at their places, with
    the ladder's current parameters; in one transaction that holds the ladder
    (:func:`hold_ladder`), every rating locked."""
    ladder = hold_ladder(session=session, ladder_id=ladder.id, patient=patient)
    blocks.filled(session)  # it rewrites every rating: their blocks are cut after it
    # A season opening under way finishes first: the replay reads every reset it makes.
    finish_opening(session=session, ladder=ladder, now=now)
    config = ladder_config(ladder.algorithm, ladder.params)
    states = rerating_repo.lock_ladder_ratings(session=session, ladder_id=ladder.id)
    watch = events.ladder_tier_watch(ladder)
    standings = watch.read(session, None) if watch is not None else {}
    matches = rerating_repo.matches_after(session=session, ladder_id=ladder.id, after_seq=0)
    history = rerating_repo.history_from(
        session=session, ladder_id=ladder.id, from_seq=0, from_id=0
    )
    prior = config.model.rating()
    start = {state.player_id: (prior.mu, config.stored_sigma(prior)) for state in states}
    start.update(erasure.pseudonym_priors(matches, (prior.mu, config.stored_sigma(prior))))
    seasons = seasons_of(session=session, ladder_id=ladder.id)
    rated_from: dict[str, int] = {}
    for row in matches:
        for player in _players(row):
            if is_pseudonym(player):
                rated_from.setdefault(player, row.seq)
    replayed = _replay_scope(
        session=session,
        ladder=ladder,
        config=config,
        scope=_Scope(
            matches=matches, start=start, latest={}, history=history, rated_from=rated_from
        ),
        seasons=seasons,
        progress=progress,
    )
    rewrite_standings(
        session=session,
        ladder_id=ladder.id,
        config=config,
        seasons=seasons,
        resets=replayed.resets,
    )
    table = replayed.table
    accuracy.replace(session=session, ladder_id=ladder.id, tally=replayed.tally)
    counts: dict[str, int] = {}
    # Each player's matches before the current season (placement counts the season's).
    before_season: dict[str, int] = {}
    season_start = seasons.rows[-1].first_seq
    newest: dict[str, datetime] = {}
    for row in matches:
        played = utc(row.played_at)
        for player in _players(row):
            counts[player] = counts.get(player, 0) + 1
            if row.seq < season_start:
                before_season[player] = before_season.get(player, 0) + 1
            if player not in newest or newest[player] < played:
                newest[player] = played
    rows = [
        {
            **_rating_row(
                config,
                table,
                state.player_id,
                counts.get(state.player_id, 0),
                newest.get(state.player_id),
                now,
                ladder.aged_at,
            ),
            "season_base": before_season.get(state.player_id, 0),
        }
        for state in states
    ]
    rating_repo.update_ratings(session=session, ladder_id=ladder.id, rows=rows)
    result = RebuildResult(ladder=ladder.id, matches_rerated=len(matches), players=len(states))
    events.changed(session, ladder_id=ladder.id, type="ladder.rebuilt", data=result, now=now)
    if watch is not None:
        watch.emit_changes(
            session,
            before=standings,
            after=watch.read(session, None),
            cause="ladder.rebuilt",
            now=now,
        )
    return result


def update_ladder(
    *,
    session: Session,
    ladder: Ladder,
    body: LadderUpdate,
    rebuild_now: bool,
    now: datetime,
    progress: Progress = _silent,
    patient: bool = False,
) -> LadderUpdated:
    """Change a ladder's description, tiers or parameters (named ones; the rest keep their
    values).

    New parameters change what every recorded match gives, so they are refused (409) unless
    a rebuild is asked for (``rebuild_now`` or the body's ``rebuild``): then the parameters
    change and every match is replayed with them, in this one transaction. Asking for a
    rebuild without a change replays the ladder as it is.
    """
    ladder = hold_ladder(session=session, ladder_id=ladder.id, patient=patient)
    # A season opening under way finishes first: the replay reads every reset it makes.
    finish_opening(session=session, ladder=ladder, now=now)
    wants_rebuild = rebuild_now or body.rebuild
    params = ladder.params
    if body.params:
        params = full_params(ladder.algorithm, {**ladder.params, **body.params})
    if params != ladder.params and not wants_rebuild:
        raise Conflict(
            "params: new parameters re-rate every recorded match; send the change again with "
            '?rebuild=true (or "rebuild": true) to change them and rebuild the ladder'
        )
    if body.description is not None:
        ladder.description = body.description
    if body.tiers is not None:
        ladder.tiers = stored_tiers(body.tiers)
    if body.season_keep is not None:
        ladder.season_keep = body.season_keep
    placed = (
        body.placement_matches is not None and body.placement_matches != ladder.placement_matches
    )
    if body.placement_matches is not None:
        ladder.placement_matches = body.placement_matches
    ladder.params = params
    session.flush()
    result = None
    if wants_rebuild:
        result = rebuild(
            session=session, ladder=ladder, now=now, progress=progress, patient=patient
        )
    if placed:
        # The rank counts hold the placed players only: who that is has just changed.
        blocks.recount(session, ladder_id=ladder.id)
    return LadderUpdated(ladder=ladder_view(session=session, ladder=ladder), rebuild=result)


# -- before a re-rating: what it is, and how large ----------------------------------------------


@dataclass(frozen=True, slots=True)
class Rerating:
    """A re-rating asked for, looked at before it runs (nothing held): its kind, its ladder,
    what to run (JSON: the match to void, the PATCH body, or the fit's body), and at most
    how many matches it re-rates. ``app.services.jobs`` runs a large one in the background."""

    kind: Literal["void", "rebuild", "fit"]
    ladder_id: str
    request: dict[str, Any]
    size: int


def plan_void(*, session: Session, ladder: Ladder, match_id: str) -> Rerating | VoidResult:
    """Voiding ``match_id``: an unknown match is a 404, a voided one the answer at once
    (``already_voided``); otherwise what it re-rates at most (every later match that counts)."""
    match = match_repo.find_match(session=session, ladder_id=ladder.id, match_id=match_id)
    if match is None:
        raise NotFound(f"match_id: no match {match_id[:128]!r} in ladder {ladder.id!r}")
    if match.voided_at is not None:
        return VoidResult(
            match_id=match.match_id,
            ladder=ladder.id,
            voided_at=utc(match.voided_at),
            already_voided=True,
            matches_rerated=0,
            players_affected=0,
        )
    size = rerating_repo.count_matches_after(
        session=session, ladder_id=ladder.id, after_seq=match.seq
    )
    return Rerating(kind="void", ladder_id=ladder.id, request={"match_id": match_id}, size=size)


def plan_update(
    *, session: Session, ladder: Ladder, body: LadderUpdate, rebuild_now: bool
) -> Rerating | None:
    """A PATCH of the ladder that rebuilds it (its parameters checked now: a bad one is a
    422 at once), with the ladder's match count; None when it rebuilds nothing."""
    if not (rebuild_now or body.rebuild):
        return None
    if body.params:
        full_params(ladder.algorithm, {**ladder.params, **body.params})
    request = {**body.model_dump(mode="json", exclude_none=True), "rebuild": True}
    size = ladder_repo.count_matches(session=session, ladder_ids=[ladder.id]).get(ladder.id, 0)
    return Rerating(kind="rebuild", ladder_id=ladder.id, request=request, size=size)
