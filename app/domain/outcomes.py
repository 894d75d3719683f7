"""A match's outcome (lower is better, dense ranks) and what identifies a match request for
idempotency (its canonical form and hash)."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from app.domain import jsontext

if TYPE_CHECKING:
    from app.domain.documents.matches import MatchCreate


def canonical_request(body: MatchCreate) -> dict[str, Any]:
    """What identifies a match for idempotency: the body without ``match_id``.

    ``advantage`` and ``player_scores`` are part of it only when given, so a match
    without them keeps the identity it had before matches could carry them.
    """
    canonical: dict[str, Any] = {
        "teams": body.teams,
        "ranks": body.ranks,
        "scores": body.scores,
        "weights": body.weights,
        "played_at": body.played_at.isoformat() if body.played_at is not None else None,
        "meta": body.meta,
    }
    if body.advantage is not None:
        canonical["advantage"] = body.advantage
    if body.player_scores is not None:
        canonical["player_scores"] = body.player_scores
    return canonical


def body_hash(canonical: dict[str, Any]) -> str:
    return hashlib.sha256(jsontext.canonical(canonical).encode()).hexdigest()


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
