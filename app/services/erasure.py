"""Use cases: erasing a player (a data-protection request), and what a re-rating does with
the pseudonyms erasure leaves in stored matches.

Erasing removes the player's rating (so their leaderboard entry) and their history, and
names them by a fresh pseudonym (``app.domain.pseudonyms``) in every stored match, voided
ones included: the request (its ``meta`` too), the result document and the participants
rows, and in the ladder's jobs. A rank block fenced at the id merges into the one before
it (``app.storage.blocks.forget_fences``). No other rating, history row or number changes.

A pseudonym is a transient player of a replay (``app.services.rerate``): its rating before
the first re-rated match is read from that match's result document (its ``before``), or is
the prior in a rebuild; it is set to the seeded value a stored request keeps for it; and it
is never written back as a rating. So a later void or rebuild rates everyone else exactly
as if the erased player were still there, and the pseudonym never reaches the leaderboard.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from typing import Any

from sqlalchemy.orm import Session

from app.domain import jsontext
from app.domain.documents.players import ErasureResult
from app.domain.outcomes import body_hash
from app.domain.pseudonyms import (
    Seed,
    is_pseudonym,
    new_pseudonym,
    pseudonymised_json,
    pseudonymised_request,
    pseudonymised_result,
    seeds_of,
    with_seeds,
)
from app.errors import NotFound
from app.services import events
from app.services.seasons import finish_opening
from app.storage import blocks
from app.storage.models import Ladder
from app.storage.repositories import erasure as erasure_repo
from app.storage.repositories import jobs as job_repo
from app.storage.repositories import ladders as ladder_repo
from app.storage.repositories import ratings as rating_repo
from app.storage.repositories import rerating as rerating_repo
from app.storage.repositories import seasons as season_repo
from app.storage.repositories.rerating import MatchRow


def erase_player(*, session: Session, ladder: Ladder, player_id: str) -> ErasureResult:
    """Erase ``player_id`` from the ladder, in one transaction; an unknown player (no rating
    and no stored match: never seen, or erased before) is a 404.

    The ladder's row is locked first, alone (as a change of parameters locks it): matches
    being recorded or re-rated in it finish before, and none starts until this commits, so
    none rates or rewrites a match with the old id meanwhile. The wait for it is bounded
    as a re-rating request's is (``ladder_repo.hold_ladder_row``).
    """
    locked = ladder_repo.hold_ladder_row(session=session, ladder_id=ladder.id, patient=False)
    if locked is None:
        raise NotFound(f"ladder: no ladder {ladder.id!r}")
    rerating_repo.lift_statement_timeout(session=session)
    # A season opening under way finishes first: its archive is whole when the id leaves.
    finish_opening(session=session, ladder=locked, now=datetime.now(UTC))
    rating = rating_repo.lock_rating(session=session, ladder_id=ladder.id, player_id=player_id)
    seqs = erasure_repo.player_match_seqs(session=session, ladder_id=ladder.id, player_id=player_id)
    if rating is None and not seqs:
        raise NotFound(f"player_id: no player {player_id[:128]!r} in ladder {ladder.id!r}")
    pseudonym = new_pseudonym()
    seeds = _seeds_before_matches(
        erasure_repo.player_changes(session=session, ladder_id=ladder.id, player_id=player_id)
    )
    rows = []
    for stored in erasure_repo.lock_match_documents(session=session, seqs=seqs):
        request = pseudonymised_request(
            stored.request, old=player_id, new=pseudonym, seed=seeds.get(stored.seq)
        )
        rows.append(
            {
                "seq": stored.seq,
                "request": request,
                "body_hash": body_hash(request),
                "result": pseudonymised_result(stored.result, old=player_id, new=pseudonym),
            }
        )
    erasure_repo.rewrite_requests(session=session, rows=rows)
    erasure_repo.rename_participant(
        session=session, ladder_id=ladder.id, old=player_id, new=pseudonym
    )
    _pseudonymise_jobs(session, ladder.id, old=player_id, new=pseudonym)
    removed = erasure_repo.delete_player_history(
        session=session, ladder_id=ladder.id, player_id=player_id
    )
    # The id may stand as a fence of the rank blocks (in any bucket, even one the player
    # has left): those blocks merge into the ones before them, before the rating goes.
    blocks.forget_fences(session, ladder_id=ladder.id, player_id=player_id)
    if rating is not None:
        # Their archived standings go with the rating; the others of those seasons move up.
        archived = season_repo.seasons_of_players(
            session=session, ladder_id=ladder.id, player_ids=[player_id]
        )
        rerating_repo.delete_ratings(session=session, ladder_id=ladder.id, player_ids=[player_id])
        for season in sorted(archived):
            season_repo.rerank(session=session, ladder_id=ladder.id, season=season)
    erasure_repo.rename_in_events(
        session=session,
        ladder_id=ladder.id,
        match_seqs=seqs,
        rename=lambda document: pseudonymised_result(document, old=player_id, new=pseudonym),
    )
    erasure_repo.rename_player_events(
        session=session,
        ladder_id=ladder.id,
        player_id=player_id,
        rename=lambda data: jsontext.compact({**json.loads(data), "player_id": pseudonym}),
    )
    result = ErasureResult(
        ladder=ladder.id,
        player_id=player_id,
        matches_pseudonymised=len(rows),
        history_entries_removed=removed,
    )
    events.changed(
        session,
        ladder_id=ladder.id,
        type="player.erased",
        data=result,
        now=datetime.now(UTC),
        player_id=player_id,
    )
    return result


def _pseudonymise_jobs(session: Session, ladder_id: str, *, old: str, new: str) -> None:
    """The ladder's jobs (their requests, results and problems) with ``old`` named ``new``
    wherever it stands whole (``pseudonyms.pseudonymised_json``)."""
    rows = []
    for job_id, *documents in job_repo.job_documents(session=session, ladder_id=ladder_id):
        renamed = [pseudonymised_json(document, old=old, new=new) for document in documents]
        if renamed != documents:
            request, result, error = renamed
            rows.append({"id": job_id, "request": request, "result": result, "error": error})
    job_repo.rewrite_job_documents(session=session, rows=rows)


def _seeds_before_matches(changes: Sequence[erasure_repo.ChangeRow]) -> dict[int, Seed]:
    """For each match (by seq) that a seed came before (since the player's previous match),
    the latest such seeded rating, carried through the season resets after it: what a
    replay must set the pseudonym to there. (A reset with no seed before it is replayed
    from the pseudonym's rating at the season's start, as every player's.)"""
    out: dict[int, Seed] = {}
    pending: Seed | None = None
    for change in changes:
        if change.match_seq is not None:
            if pending is not None:
                out[change.match_seq] = pending
                pending = None
        elif not change.reset or pending is not None:
            pending = (change.mu_after, change.sigma_after, change.volatility_after)
    return out


# -- pseudonyms in a re-rating (app.services.rerate) -----------------------------------------


def _players(request: dict[str, Any]) -> Iterable[str]:
    return (player for team in request["teams"] for player in team)


def pseudonym_starts(
    *,
    session: Session,
    reached: Iterable[str],
    voided_seq: int,
    voided_request: dict[str, Any],
    joined: dict[str, int],
) -> dict[str, Seed]:
    """Where each pseudonym a void reaches starts: its ``before`` in the voided match's
    result document, or in that of the match where it joined the re-rating (mu, sigma,
    and a Glicko-2 volatility)."""
    in_voided = set(_players(voided_request))
    where = {
        player: voided_seq if player in in_voided else joined[player]
        for player in reached
        if is_pseudonym(player)
    }
    documents = erasure_repo.match_results(session=session, seqs=sorted(set(where.values())))
    starts: dict[str, Seed] = {}
    for player, seq in where.items():
        for team in json.loads(documents[seq])["teams"]:
            for entry in team["players"]:
                if entry["player_id"] == player:
                    before = entry["before"]
                    starts[player] = (before["mu"], before["sigma"], before.get("volatility"))
    return starts


def pseudonym_priors(
    matches: Iterable[MatchRow], prior: tuple[float, float | None]
) -> dict[str, tuple[float, float | None]]:
    """Every pseudonym of ``matches``, at ``prior``: where a rebuild starts them."""
    return {
        player: prior for row in matches for player in _players(row.request) if is_pseudonym(player)
    }


def seeds_at(matches: Sequence[MatchRow]) -> dict[int, dict[str, Seed]]:
    """The seeded ratings the stored requests keep, by the match's place in ``matches``: a
    replay sets them before that match."""
    out: dict[int, dict[str, Seed]] = {}
    for n, row in enumerate(matches):
        seeds = seeds_of(row.request)
        if seeds:
            out[n] = seeds
    return out


def carry_seeds(
    *, session: Session, voided_request: dict[str, Any], affected: Sequence[MatchRow]
) -> list[MatchRow]:
    """A voided match no longer counts, so a seed kept in its request moves to the
    pseudonym's next match that does (unless that one keeps a later seed): ``affected``
    with those requests rewritten, in the database too."""
    carried = seeds_of(voided_request)
    if not carried:
        return list(affected)
    out = []
    rows = []
    for row in affected:
        players = set(_players(row.request))
        here = {player: seed for player, seed in carried.items() if player in players}
        if here:
            for player in here:
                del carried[player]
            request = with_seeds(row.request, here)
            rows.append({"seq": row.seq, "request": request, "body_hash": body_hash(request)})
            row = row._replace(request=request)
        out.append(row)
    erasure_repo.rewrite_requests(session=session, rows=rows)
    return out
