"""The result document of a match (``schemas.MatchResult``) as stored JSON text: the one
writer of it, for recording, voiding and rebuilding alike."""

from __future__ import annotations

import math
from collections.abc import Sequence
from datetime import datetime
from functools import lru_cache
from typing import Any, NotRequired, TypedDict, Unpack

from app.domain.jsontext import compact as _encode
from app.domain.jsontext import string as _string
from app.domain.ladders import LadderConfig
from app.domain.times import utc


def rfc3339(moment: datetime) -> str:
    return utc(moment).isoformat().replace("+00:00", "Z")


@lru_cache(maxsize=4096)
def _json_time(moment: datetime) -> str:
    """:func:`rfc3339` as a JSON string. Cached: the matches of a group or a batch share
    their recorded_at, and often their played_at."""
    return _string(rfc3339(moment))


def _out(
    config: LadderConfig, mu: float, sigma: float, volatility: float | None = None
) -> dict[str, float | None]:
    if config.bayesian:
        out: dict[str, float | None] = {
            "mu": mu,
            "sigma": sigma,
            "conservative": mu - config.conservative_k * sigma,
        }
        if volatility is not None:
            out["volatility"] = volatility
        return out
    return {"mu": mu, "sigma": None, "conservative": mu}


class ResultDocument(TypedDict):
    """What a match's result document is written from. ``before`` and ``after`` are (mu,
    sigma) lists over all participants, this match's starting at ``offset``; on a Glicko-2
    ladder ``volatility`` (before, after) adds each side's volatility;
    ``win_probabilities`` are the teams' stored pre-match probabilities of finishing first
    (``app.domain.accuracy``; null when none)."""

    config: LadderConfig
    ladder_id: str
    match_id: str
    played_at: datetime
    recorded_at: datetime
    quality: float
    teams: Sequence[Sequence[str]]
    ranks: Sequence[int]
    weights: Sequence[Sequence[float]] | None
    before: tuple[list[float], list[float]]
    after: tuple[list[float], list[float]]
    offset: int
    meta: dict[str, Any] | None
    volatility: NotRequired[tuple[list[float], list[float]] | None]
    win_probabilities: NotRequired[Sequence[float] | None]


def with_seq(parts: tuple[str, str], seq: int) -> str:
    """A result document from :func:`result_parts` and the match's seq."""
    head, tail = parts
    return f"{head}{seq}{tail}"


def result_parts(**document: Unpack[ResultDocument]) -> tuple[str, str]:
    """The match result (``schemas.MatchResult``) as JSON text, without its seq: the text
    before the seq's digits and the text after them (:func:`with_seq` joins them; the
    database may draw the seq as it stores the match), from the parts of
    :class:`ResultDocument`. A match counts when it is rated: voiding rewrites its
    document (``app.services.rerate``).

    The text is written directly, number by number (``repr``, as the ``json`` encoder
    writes them), rather than built as dicts and encoded: the same bytes as
    :func:`_encoded_result_parts` for about 30 % less. A number that is not finite (or
    a sum that overflows) leaves it to that encoder, which refuses or writes it."""
    quality = document["quality"]
    win_probabilities = document.get("win_probabilities")
    check = quality
    if win_probabilities is not None:
        for p in win_probabilities:
            check += p
    team_docs, check = _team_texts(document, check)
    if not math.isfinite(check) or type(check) is not float:
        return _encoded_result_parts(**document)
    chances = (
        "null"
        if win_probabilities is None
        else f"[{','.join([repr(p) for p in win_probabilities])}]"
    )
    # The keys in the schema's order: match_id, ladder, seq, then the rest.
    return (
        f'{{"match_id":{_string(document["match_id"])},'
        f'"ladder":{_string(document["ladder_id"])},"seq":',
        f',"played_at":{_json_time(document["played_at"])},'
        f'"recorded_at":{_json_time(document["recorded_at"])},"quality":{quality!r},'
        f'"win_probabilities":{chances},'
        f'"teams":[{",".join(team_docs)}],"meta":{_encode(document["meta"])},'
        '"voided":false,"voided_at":null}',
    )


def _team_texts(document: ResultDocument, check: float) -> tuple[list[str], float]:
    """Each team's JSON text (its rank and its players' weights and ratings before and
    after), and ``check`` with every number written added to it (not finite: one of them
    is not, or their sum overflows)."""
    config = document["config"]
    teams, ranks, weights = document["teams"], document["ranks"], document["weights"]
    bayesian = config.bayesian
    k_sigma = config.conservative_k
    mu_b, sigma_b = document["before"]
    mu_a, sigma_a = document["after"]
    volatility = document.get("volatility")
    vol_b, vol_a = volatility if volatility is not None else ([], [])
    team_docs = []
    k = document["offset"]
    for j, team in enumerate(teams):
        players = []
        team_weights = weights[j] if weights is not None else None
        for i, player in enumerate(team):
            weight = team_weights[i] if team_weights is not None else 1.0
            mb, ma = mu_b[k], mu_a[k]
            if volatility is not None:
                sb, sa = sigma_b[k], sigma_a[k]
                cb, ca = mb - k_sigma * sb, ma - k_sigma * sa
                vb, va = vol_b[k], vol_a[k]
                check += weight + mb + sb + cb + ma + sa + ca + vb + va
                players.append(
                    f'{{"player_id":{_string(player)},"weight":{weight!r},'
                    f'"before":{{"mu":{mb!r},"sigma":{sb!r},"conservative":{cb!r},'
                    f'"volatility":{vb!r}}},'
                    f'"after":{{"mu":{ma!r},"sigma":{sa!r},"conservative":{ca!r},'
                    f'"volatility":{va!r}}}}}'
                )
            elif bayesian:
                sb, sa = sigma_b[k], sigma_a[k]
                cb, ca = mb - k_sigma * sb, ma - k_sigma * sa
                check += weight + mb + sb + cb + ma + sa + ca
                players.append(
                    f'{{"player_id":{_string(player)},"weight":{weight!r},'
                    f'"before":{{"mu":{mb!r},"sigma":{sb!r},"conservative":{cb!r}}},'
                    f'"after":{{"mu":{ma!r},"sigma":{sa!r},"conservative":{ca!r}}}}}'
                )
            else:
                check += weight + mb + ma
                players.append(
                    f'{{"player_id":{_string(player)},"weight":{weight!r},'
                    f'"before":{{"mu":{mb!r},"sigma":null,"conservative":{mb!r}}},'
                    f'"after":{{"mu":{ma!r},"sigma":null,"conservative":{ma!r}}}}}'
                )
            k += 1
        team_docs.append(f'{{"rank":{ranks[j]!r},"players":[{",".join(players)}]}}')
    return team_docs, check


def _encoded_result_parts(**document: Unpack[ResultDocument]) -> tuple[str, str]:
    """:func:`result_parts` through the ``json`` encoder, from the document as dicts: what
    it writes for numbers that are not finite, and what the tests hold it to."""
    config, weights = document["config"], document["weights"]
    before, after = document["before"], document["after"]
    volatility = document.get("volatility")
    win_probabilities = document.get("win_probabilities")
    team_docs = []
    k = document["offset"]
    for j, team in enumerate(document["teams"]):
        players = []
        for i, player in enumerate(team):
            players.append(
                {
                    "player_id": player,
                    "weight": weights[j][i] if weights is not None else 1.0,
                    "before": _out(
                        config, before[0][k], before[1][k], volatility[0][k] if volatility else None
                    ),
                    "after": _out(
                        config, after[0][k], after[1][k], volatility[1][k] if volatility else None
                    ),
                }
            )
            k += 1
        team_docs.append({"rank": document["ranks"][j], "players": players})
    # The keys in the schema's order: match_id, ladder, seq, then the rest.
    head = _encode({"match_id": document["match_id"], "ladder": document["ladder_id"]})
    tail = _encode(
        {
            "played_at": rfc3339(document["played_at"]),
            "recorded_at": rfc3339(document["recorded_at"]),
            "quality": document["quality"],
            "win_probabilities": None if win_probabilities is None else list(win_probabilities),
            "teams": team_docs,
            "meta": document["meta"],
            "voided": False,
            "voided_at": None,
        }
    )
    return f'{head[:-1]},"seq":', f",{tail[1:]}"
