"""What stands in a stored match for an erased player: a pseudonym, and how a match's stored
request and result document are rewritten with it.

A pseudonym is ``erased/`` and 32 random hexadecimal digits (128 bits from ``secrets``):
nothing of the erased id goes into it, so it cannot be computed back from the id, and one
is drawn per erasure, so all of that player's matches share it (each match keeps its
teams). No posted player id can ever take that form: ids refuse ``/``
(``schemas.ID_PATTERN``), so a pseudonym never collides with a player, is never rated as
one (a replay keeps its rating in memory only) and cannot be posted, seeded or looked up.

An erased player's seeds (history adjustments) go with the rest of their history, but a
later replay must still start each of their matches where it started: so the stored
request of the match that followed a seed keeps the seeded value under :data:`SEEDED`
(pseudonym -> [mu, sigma]), and a replay sets the pseudonym's rating to it there, as it
sets a seeded player's.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Mapping
from typing import Any

from app.domain import jsontext

#: The form of every pseudonym: this prefix, then random hex digits. The "/" is what no
#: posted id may hold.
PREFIX = "erased/"
#: The stored request's key for the seeded ratings a replay sets before the match.
SEEDED = "seeded"

#: A seeded rating as stored: mu, sigma (None on an Elo ladder) and the volatility (a
#: Glicko-2 ladder's; None elsewhere, and then not written).
Seed = tuple[float, float | None, float | None]


def new_pseudonym() -> str:
    """A fresh pseudonym: random, unrelated to any id."""
    return PREFIX + secrets.token_hex(16)


def is_pseudonym(player_id: str) -> bool:
    return player_id.startswith(PREFIX)


def _renamed(teams: list[list[str]], old: str, new: str) -> list[list[str]]:
    return [[new if player == old else player for player in team] for team in teams]


def pseudonymised_request(
    request: Mapping[str, Any], *, old: str, new: str, seed: Seed | None
) -> dict[str, Any]:
    """A stored request (``outcomes.canonical_request``) with ``old`` replaced by ``new``
    in its teams and wherever ``meta`` holds it (:func:`pseudonymised_json`), and ``seed``
    (the rating ``old`` was seeded to before this match, if any) kept for replays."""
    out = dict(request)
    out["teams"] = _renamed(request["teams"], old, new)
    if out.get("meta") is not None:
        out["meta"] = pseudonymised_json(out["meta"], old=old, new=new)
    if seed is not None:
        out[SEEDED] = {**request.get(SEEDED, {}), new: _stored(seed)}
    return out


def _stored(seed: Seed) -> list[float | None]:
    """A seed as the request keeps it: [mu, sigma], and the volatility where there is one."""
    return list(seed) if seed[2] is not None else [seed[0], seed[1]]


def pseudonymised_result(document: str, *, old: str, new: str) -> str:
    """A stored result document with the player ``old`` named ``new``: every other byte
    as it was (the document is read and written by the one JSON writer)."""
    parsed = json.loads(document)
    for team in parsed["teams"]:
        for player in team["players"]:
            if player["player_id"] == old:
                player["player_id"] = new
    if parsed.get("meta") is not None:
        parsed["meta"] = pseudonymised_json(parsed["meta"], old=old, new=new)
    return jsontext.compact(parsed)


def pseudonymised_json(value: Any, *, old: str, new: str) -> Any:
    """A JSON value (a match's ``meta``, a job's request, result or problem) with the id
    ``old`` named ``new`` wherever it stands whole: a string or an object key equal to it,
    and inside text the id quoted as the service quotes ids in its messages (``'old'``,
    ``"old"``). Free text that mentions the id unquoted cannot be told from other words
    and is left as it is."""
    if isinstance(value, str):
        if value == old:
            return new
        for quoted, replacement in ((repr(old), repr(new)), (json.dumps(old), json.dumps(new))):
            value = value.replace(quoted, replacement)
        return value
    if isinstance(value, list):
        return [pseudonymised_json(item, old=old, new=new) for item in value]
    if isinstance(value, dict):
        return {
            (new if key == old else key): pseudonymised_json(item, old=old, new=new)
            for key, item in value.items()
        }
    return value


def seeds_of(request: Mapping[str, Any]) -> dict[str, Seed]:
    """The seeded ratings a replay sets before this match (pseudonyms only)."""
    return {
        player: (
            float(value[0]),
            None if value[1] is None else float(value[1]),
            float(value[2]) if len(value) > 2 and value[2] is not None else None,
        )
        for player, value in request.get(SEEDED, {}).items()
    }


def with_seeds(request: Mapping[str, Any], seeds: Mapping[str, Seed]) -> dict[str, Any]:
    """``request`` with ``seeds`` added to those it keeps (its own win: they are later)."""
    kept = request.get(SEEDED, {})
    return {**request, SEEDED: {**{p: _stored(s) for p, s in seeds.items()}, **kept}}
