"""Recording matches: the key, the ladder and recorded match_ids in one statement, and
every row of a group of matches written at once."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from datetime import datetime
from typing import Any, NamedTuple, cast

from sqlalchemy import (
    BigInteger,
    DateTime,
    Float,
    Integer,
    String,
    Table,
    Text,
    bindparam,
    text,
)
from sqlalchemy.orm import Session
from sqlalchemy.sql.expression import Executable
from sqlalchemy.types import TypeEngine

from app.domain import jsontext
from app.domain.accuracy import FIELDS as TALLY_FIELDS
from app.storage import versions
from app.storage.models import (
    KeyRow,
    Match,
    Participant,
    RatingHistory,
)
from app.storage.repositories.accuracy import add_tallies
from app.storage.repositories.matches import StoredMatch, allocate_match_seqs
from app.storage.repositories.ratings import RatingState, update_ratings, upsert_ratings
from app.storage.repositories.sql import chunked, dialect_of, id_list, insert_values, json_text


class KeyAndLadder(NamedTuple):
    """The request's key row (None: unknown), its ladder's algorithm and parameters as
    stored (None: no such ladder), and the matches of that ladder recorded under the
    match_ids asked about."""

    key: KeyRow | None
    algorithm: str | None
    params: str | None
    recorded: dict[str, StoredMatch]
    #: The time the ladder's stored conservative ratings are aged to (None: not aged).
    aged_at: datetime | None = None
    #: While a season opens in steps: its first history id (``ladders.opening_from``).
    opening_from: int | None = None
    #: The ladder's tiers (JSON text; None: none), placement matches and current season.
    tiers: str | None = None
    placement: int = 0
    season: str = "1"


_KEY_COLUMNS: dict[str, TypeEngine[Any]] = {
    "id": Integer(),
    "scope": String(),
    "prefix": String(),
    "key_hash": String(),
    "revoked_at": DateTime(timezone=True),
    "last_used_at": DateTime(timezone=True),
    "ladders": Text(),
    "algorithm": String(),
    "params": Text(),
    "recorded": Text(),
    "aged_at": DateTime(timezone=True),
    "opening_from": BigInteger(),
    "tiers": Text(),
    "placement_matches": Integer(),
    "season": String(),
}


_KEY_AND_LADDER = (
    "SELECT k.id, k.scope, k.prefix, k.key_hash, k.revoked_at, k.last_used_at, k.ladders, "
    "l.algorithm, CAST(l.params AS TEXT) AS params, CAST(m.recorded AS TEXT) AS recorded, "
    "l.aged_at, l.opening_from, CAST(l.tiers AS TEXT) AS tiers, l.placement_matches, l.season "
    "FROM (SELECT 1 AS one) AS one "
    "LEFT JOIN api_keys AS k ON k.key_hash = :key_hash "
    "LEFT JOIN (SELECT algorithm, params, aged_at, opening_from, tiers, placement_matches, "
    "season FROM ladders "
    "WHERE id = :ladder_id{lock}) "
    "AS l ON 1 = 1 "
    "LEFT JOIN ({recorded}) AS m ON 1 = 1"
)


_KEY_AND_LADDER_SQL = {
    # One unique-index lookup per match_id asked about (a nested loop over the ids; OFFSET 0
    # keeps the lookup from being merged into a join): the plan does not hang on the
    # ladder's match count, which a growing ladder's statistics underestimate.
    "postgresql": text(
        _KEY_AND_LADDER.format(
            lock=" FOR SHARE",
            recorded="SELECT json_agg(json_build_array(r.match_id, r.body_hash, r.result)) "
            "AS recorded FROM json_array_elements_text(CAST(:match_ids AS JSON)) AS q(match_id) "
            "CROSS JOIN LATERAL (SELECT match_id, body_hash, result FROM matches "
            "WHERE ladder_id = :ladder_id AND match_id = q.match_id OFFSET 0) AS r",
        )
    ).columns(**_KEY_COLUMNS),
    "sqlite": text(
        _KEY_AND_LADDER.format(
            lock="",
            recorded="SELECT json_group_array(json_array(match_id, body_hash, result)) "
            "AS recorded FROM matches WHERE ladder_id = :ladder_id AND match_id IN :match_ids",
        )
    )
    .bindparams(bindparam("match_ids", expanding=True))
    .columns(**_KEY_COLUMNS),
}


def key_and_ladder(
    *, session: Session, key_hash: str, ladder_id: str | None, match_ids: Sequence[str] = ()
) -> KeyAndLadder:
    """The key with this hash, the ladder, and the ladder's matches recorded under
    ``match_ids``, in one statement. On PostgreSQL the ladder's row is share-locked: its
    parameters cannot change until the transaction ends."""
    row = session.execute(
        _KEY_AND_LADDER_SQL[dialect_of(session)],
        {"key_hash": key_hash, "ladder_id": ladder_id, "match_ids": id_list(session, match_ids)},
    ).one()
    key = KeyRow(*row[:7]) if row[0] is not None else None
    recorded = {
        match_id: StoredMatch(match_id, digest, result)
        for match_id, digest, result in (json.loads(row[9]) if row[9] else [])
    }
    return KeyAndLadder(
        key=key,
        algorithm=row[7],
        params=row[8],
        recorded=recorded,
        aged_at=row[10],
        opening_from=row[11],
        tiers=row[12],
        placement=row[13] or 0,
        season=row[14] or "1",
    )


_STATE_COLUMNS: dict[str, TypeEngine[Any]] = {
    "player_id": String(),
    "mu": Float(),
    "sigma": Float(),
    "matches": Integer(),
    "last_played_at": DateTime(timezone=True),
    "volatility": Float(),
}


def _players_sql(lock: bool) -> dict[str, Executable]:
    """The statements that read players' ratings, with row locks (``lock``) or without."""
    return {
        # One index lookup per player, in the order given (a nested loop over the ids):
        # the plan does not hang on the ladder's row count, which the statistics of a
        # growing ladder underestimate (a scan of the whole ladder looks cheap then).
        "postgresql": text(
            "SELECT r.player_id, r.mu, r.sigma, r.matches, r.last_played_at, r.volatility "
            "FROM json_array_elements_text(CAST(:player_ids AS JSON)) AS p(player_id) "
            "CROSS JOIN LATERAL (SELECT player_id, mu, sigma, matches, last_played_at, "
            "volatility FROM ratings WHERE ladder_id = :ladder_id AND player_id = p.player_id"
            f"{' FOR UPDATE' if lock else ''}) AS r"
        ).columns(**_STATE_COLUMNS),
        # No row locks: a writing transaction's BEGIN IMMEDIATE holds the database.
        "sqlite": text(
            "SELECT player_id, mu, sigma, matches, last_played_at, volatility FROM ratings "
            "WHERE ladder_id = :ladder_id AND player_id IN :player_ids "
            "ORDER BY player_id"
        )
        .bindparams(bindparam("player_ids", expanding=True))
        .columns(**_STATE_COLUMNS),
    }


_LOCK_PLAYERS_SQL = _players_sql(lock=True)


_UNLOCKED_PLAYERS_SQL = _players_sql(lock=False)


def player_states(
    *, session: Session, ladder_id: str, player_ids: Sequence[str]
) -> list[RatingState]:
    """The ratings of ``player_ids`` (sorted), as :func:`lock_players` reads them but
    without a lock: what a batch is rated ahead from before its transaction."""
    statement = _UNLOCKED_PLAYERS_SQL[dialect_of(session)]
    out: list[RatingState] = []
    for chunk in chunked(list(player_ids), session):
        rows = session.execute(
            statement, {"ladder_id": ladder_id, "player_ids": id_list(session, chunk)}
        )
        out.extend(RatingState(*row) for row in rows)
    return out


def lock_players(
    *, session: Session, ladder_id: str, player_ids: Sequence[str]
) -> list[RatingState]:
    """The ratings of ``player_ids`` (sorted), locked one after the other in that order by
    one statement on PostgreSQL (one index lookup per player, whatever the ladder's size);
    on SQLite, whose transaction holds the database's write lock, read by bounded ``IN``
    lists."""
    statement = _LOCK_PLAYERS_SQL[dialect_of(session)]
    out: list[RatingState] = []
    for chunk in chunked(list(player_ids), session):
        rows = session.execute(
            statement, {"ladder_id": ladder_id, "player_ids": id_list(session, chunk)}
        )
        out.extend(RatingState(*row) for row in rows)
    return out


#: The columns of the rows a recording writes (:func:`write_recorded`), in tuple order.
MATCH_COLUMNS = (
    "seq",
    "ladder_id",
    "match_id",
    "body_hash",
    "played_at",
    "recorded_at",
    "quality",
    "request",
    "result",
    "voided_at",
    "win_probabilities",
)


PARTICIPANT_COLUMNS = (
    "match_seq",
    "player_id",
    "ladder_id",
)


HISTORY_COLUMNS = (
    "ladder_id",
    "player_id",
    "match_seq",
    "played_at",
    "mu_before",
    "sigma_before",
    "mu_after",
    "sigma_after",
    "volatility_before",
    "volatility_after",
)


#: The columns of a history row the statement of :func:`write_recorded` reads, the last
#: ones of :data:`HISTORY_COLUMNS` (the player and ladder come from the participants row,
#: the match_id from the match's row).
_PLAYED_FROM = HISTORY_COLUMNS.index("played_at")


_PLAYED_HISTORY = HISTORY_COLUMNS[_PLAYED_FROM:]


#: Where a match row holds its match_id, and a history row its match's seq.
_MATCH_ID = MATCH_COLUMNS.index("match_id")


_HISTORY_SEQ = HISTORY_COLUMNS.index("match_seq")


#: Where a match row holds its result document (as the text before and after its seq),
#: and its teams' win probabilities.
_RESULT = MATCH_COLUMNS.index("result")


_WIN_PROBABILITIES = MATCH_COLUMNS.index("win_probabilities")


MATCHES = cast(Table, Match.__table__)


PARTICIPANTS = cast(Table, Participant.__table__)


HISTORY = cast(Table, RatingHistory.__table__)


_WRITE_MATCHES_SQL = text(
    """
WITH matches_written AS (
    INSERT INTO matches (seq, ladder_id, match_id, body_hash, played_at, recorded_at, quality,
                         request, result, voided_at, win_probabilities)
    SELECT v.seq, v.ladder_id, v.match_id, v.body_hash, v.played_at, v.recorded_at, v.quality,
           CAST(v.request AS JSON), v.result_head || v.seq || v.result_tail, NULL,
           CAST(v.win_probabilities AS JSON)
    -- nextval in the derived table's own list: once per row, in the rows' order (a
    -- volatile function keeps the table from being merged into the outer query).
    FROM (
        SELECT nextval(pg_get_serial_sequence('matches', 'seq')) AS seq, a.*
        FROM json_to_recordset(CAST(:matches AS JSON)) AS a(
            ladder_id VARCHAR, match_id VARCHAR, body_hash VARCHAR, played_at TIMESTAMPTZ,
            recorded_at TIMESTAMPTZ, quality FLOAT8, request TEXT, result_head TEXT,
            result_tail TEXT, win_probabilities TEXT)
    ) AS v
    RETURNING seq, ladder_id, match_id
), played AS (
    SELECT w.seq, v.* FROM json_to_recordset(CAST(:participants AS JSON)) AS v(
        player_id VARCHAR, ladder_id VARCHAR, match_id VARCHAR, played_at TIMESTAMPTZ,
        mu_before FLOAT8, sigma_before FLOAT8, mu_after FLOAT8, sigma_after FLOAT8,
        volatility_before FLOAT8, volatility_after FLOAT8)
    JOIN matches_written AS w ON w.ladder_id = v.ladder_id AND w.match_id = v.match_id
), participants_written AS (
    INSERT INTO participants (match_seq, player_id, ladder_id)
    SELECT seq, player_id, ladder_id FROM played
), history_written AS (
    INSERT INTO rating_history (ladder_id, player_id, match_seq, played_at,
                                mu_before, sigma_before, mu_after, sigma_after,
                                volatility_before, volatility_after)
    SELECT ladder_id, player_id, seq, played_at, mu_before, sigma_before, mu_after, sigma_after,
           volatility_before, volatility_after
    FROM played
), ratings_written AS (
    -- Each row found by its key, then updated by its physical id: one index lookup and
    -- one TID scan per player whatever the statistics say (a growing ladder's look small,
    -- and a hash join would scan every rating).
    UPDATE ratings AS t
    SET mu = v.mu, sigma = v.sigma, conservative = v.conservative, matches = v.matches,
        last_played_at = v.last_played_at, updated_at = v.updated_at, volatility = v.volatility
    FROM (
        SELECT v.*, r.row_id FROM json_to_recordset(CAST(:ratings AS JSON)) AS v(
            ladder_id VARCHAR, player_id VARCHAR, mu FLOAT8, sigma FLOAT8, conservative FLOAT8,
            matches INTEGER, last_played_at TIMESTAMPTZ, updated_at TIMESTAMPTZ,
            volatility FLOAT8)
        CROSS JOIN LATERAL (
            SELECT ctid AS row_id FROM ratings
            WHERE ladder_id = v.ladder_id AND player_id = v.player_id OFFSET 0
        ) AS r
    ) AS v
    WHERE t.ctid = v.row_id
), tallies_written AS (
    -- Each ladder's accuracy tally: added to one stripe, ladders in id order.
    INSERT INTO ladder_accuracy AS t (ladder_id, stripe, {tally_columns})
    SELECT v.ladder_id, :stripe, {tally_values}
    FROM json_to_recordset(CAST(:tallies AS JSON)) AS v(ladder_id VARCHAR, {tally_types})
    ORDER BY v.ladder_id
    ON CONFLICT (ladder_id, stripe) DO UPDATE SET {tally_sums}
), versions_written AS (
    -- The ladders' versions (app.storage.versions): one stripe each, ladders in id order.
    INSERT INTO ladder_versions AS t (ladder_id, stripe, version)
    SELECT v.ladder_id, :version_stripe, 1
    FROM json_array_elements_text(CAST(:ladders AS JSON)) AS v(ladder_id)
    ORDER BY v.ladder_id
    ON CONFLICT (ladder_id, stripe) DO UPDATE SET version = t.version + 1
)
SELECT seq, ladder_id, match_id FROM matches_written
""".format(
        tally_columns=", ".join(TALLY_FIELDS),
        tally_values=", ".join(f"v.{name}" for name in TALLY_FIELDS),
        tally_types=", ".join(f"{name} INT8" for name in TALLY_FIELDS),
        tally_sums=", ".join(f"{name} = t.{name} + excluded.{name}" for name in TALLY_FIELDS),
    )
).bindparams(bindparam("stripe", type_=Integer), bindparam("version_stripe", type_=Integer))


#: From this many matches PostgreSQL gets a recording's rows by COPY rather than in one
#: statement (a group of single matches stays below it).
COPY_MATCHES = 64


def _iso(value: datetime) -> str:
    return value.isoformat()


def _match_with_seq(row: Sequence[Any], seq: int) -> tuple[Any, ...]:
    head, tail = row[_RESULT]
    return (seq, *row[1:_RESULT], f"{head}{seq}{tail}", *row[_RESULT + 1 :])


def with_seqs(
    seqs: Sequence[int],
    matches: Sequence[Sequence[Any]],
    participants: Sequence[Sequence[Any]],
    history: Sequence[Sequence[Any]],
) -> tuple[Iterator[tuple[Any, ...]], Iterator[tuple[Any, ...]], Iterator[tuple[Any, ...]]]:
    """Rows of :func:`write_recorded` with their seqs in place of their slots, and each
    match's result document whole: made row by row as they are written, so a batch's rows
    are never held twice."""
    seq_matches = (_match_with_seq(row, seqs[row[0]]) for row in matches)
    seq_participants = ((seqs[row[0]], *row[1:]) for row in participants)
    seq_history = (
        (*row[:_HISTORY_SEQ], seqs[row[_HISTORY_SEQ]], *row[_HISTORY_SEQ + 1 :]) for row in history
    )
    return seq_matches, seq_participants, seq_history


def write_recorded(
    *,
    session: Session,
    matches: Sequence[Sequence[Any]],
    participants: Sequence[Sequence[Any]],
    history: Sequence[Sequence[Any]],
    ratings: Mapping[str, Sequence[dict[str, Any]]],
    tallies: Mapping[str, Sequence[int]] | None = None,
    stripe: int = 0,
) -> list[int]:
    """Store rated matches and return their seqs, drawn in the order of ``matches``: their
    rows of ``matches``, ``participants`` and ``rating_history`` (tuples of
    :data:`MATCH_COLUMNS`, :data:`PARTICIPANT_COLUMNS` and :data:`HISTORY_COLUMNS`, the
    match ids of a ladder distinct) where each seq is the match's place in ``matches``
    and each result document the text before and after its seq; the new ratings of
    each ladder (rows for :func:`update_ratings`, by ladder id); and what the matches'
    predictions scored, added to each ladder's accuracy tally in its ``stripe`` row
    (:func:`add_tallies`). The caller holds the
    players' row locks, so the seqs order matches sharing a player as they were applied.

    PostgreSQL: ONE statement, drawing the seqs (the rows as arrays and JSON, which
    PostgreSQL reads back exactly: a float's repr is the shortest text that parses to it);
    from :data:`COPY_MATCHES` matches (batches, imports) the seqs in one statement and the
    rows by binary ``COPY``, far cheaper for thousands of rows. A match_id recorded
    meanwhile by another transaction fails it whole with an ``IntegrityError``. SQLite: one
    executemany per table (the transaction holds the database's write lock, so the seqs
    after the largest are free)."""
    if not matches:
        return []
    if dialect_of(session) != "postgresql" or len(matches) >= COPY_MATCHES:
        return _write_by_table(
            session=session,
            matches=matches,
            participants=participants,
            history=history,
            ratings=ratings,
            tallies=tallies or {},
            stripe=stripe,
        )
    parameters = _recorded_as_json(
        matches=matches,
        participants=participants,
        history=history,
        ratings=ratings,
        tallies=tallies or {},
    )
    parameters["stripe"] = stripe
    # The ladders' versions move in this statement (their last change but the commit's).
    parameters["ladders"] = jsontext.compact(sorted(ratings))
    parameters["version_stripe"] = versions.bumped(session, ratings)
    drawn = {
        (ladder_id, match_id): int(seq)
        for seq, ladder_id, match_id in session.execute(_WRITE_MATCHES_SQL, parameters)
    }
    return [drawn[row[1], row[2]] for row in matches]


def _write_by_table(
    *,
    session: Session,
    matches: Sequence[Sequence[Any]],
    participants: Sequence[Sequence[Any]],
    history: Sequence[Sequence[Any]],
    ratings: Mapping[str, Sequence[dict[str, Any]]],
    tallies: Mapping[str, Sequence[int]],
    stripe: int,
) -> list[int]:
    """:func:`write_recorded` a statement per table (SQLite; PostgreSQL's ``COPY``)."""
    for ladder_id in ratings:
        versions.touch(session, ladder_id)
    seqs = allocate_match_seqs(session=session, count=len(matches))
    rows, members, histories = with_seqs(seqs, matches, participants, history)
    # The ratings first: a history row refers to its player's rating (SQLite inserts a
    # new player's here).
    for ladder_id, update in ratings.items():
        if dialect_of(session) == "sqlite":
            upsert_ratings(session=session, ladder_id=ladder_id, rows=update)
        else:
            update_ratings(session=session, ladder_id=ladder_id, rows=update)
    insert_values(session=session, table=MATCHES, names=MATCH_COLUMNS, values=rows)
    insert_values(session=session, table=PARTICIPANTS, names=PARTICIPANT_COLUMNS, values=members)
    insert_values(session=session, table=HISTORY, names=HISTORY_COLUMNS, values=histories)
    add_tallies(session=session, stripe=stripe, tallies=tallies)
    return seqs


def _recorded_as_json(
    *,
    matches: Sequence[Sequence[Any]],
    participants: Sequence[Sequence[Any]],
    history: Sequence[Sequence[Any]],
    ratings: Mapping[str, Sequence[dict[str, Any]]],
    tallies: Mapping[str, Sequence[int]],
) -> dict[str, Any]:
    """The parameters of :data:`_WRITE_MATCHES_SQL`: every row as JSON, which PostgreSQL
    reads back exactly (a float's repr is the shortest text that parses to it) and which
    costs far less to send than arrays of strings. The JSON columns go as their text, cast
    by the statement: PostgreSQL's text cannot hold every string JSON can (such as
    "\\u0000"), but their escaped text can."""
    match_docs = [
        {
            "ladder_id": row[1],
            "match_id": row[2],
            "body_hash": row[3],
            "played_at": _iso(row[4]),
            "recorded_at": _iso(row[5]),
            "quality": row[6],
            "request": json_text(row[7]),
            "result_head": row[_RESULT][0],
            "result_tail": row[_RESULT][1],
            "win_probabilities": json_text(row[_WIN_PROBABILITIES]),
        }
        for row in matches
    ]
    # Each player of each match: its participants row and its history row as one document.
    played = []
    for p, h in zip(participants, history, strict=True):
        doc = dict(zip(PARTICIPANT_COLUMNS[1:], p[1:], strict=True))
        doc["match_id"] = matches[p[0]][_MATCH_ID]
        doc.update(zip(_PLAYED_HISTORY, h[_PLAYED_FROM:], strict=True))
        doc["played_at"] = _iso(doc["played_at"])
        played.append(doc)
    rating_docs = [
        {
            "ladder_id": ladder_id,
            **row,
            "last_played_at": _iso(row["last_played_at"]),
            "updated_at": _iso(row["updated_at"]),
        }
        for ladder_id, rows in ratings.items()
        for row in rows
    ]
    tally_docs = [
        {"ladder_id": ladder_id, **dict(zip(TALLY_FIELDS, values, strict=True))}
        for ladder_id, values in tallies.items()
    ]
    return {
        "matches": jsontext.compact(match_docs),
        "participants": jsontext.compact(played),
        "ratings": jsontext.compact(rating_docs),
        "tallies": jsontext.compact(tally_docs),
    }
