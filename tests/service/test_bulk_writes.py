"""The batch path's writes: the result document written number by number is the ``json``
encoder's text to the byte, and awkward values survive the bulk insert (COPY on
PostgreSQL, executemany on SQLite) and the bulk update exactly."""

from __future__ import annotations

import itertools
import json
import math
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sqlalchemy import text

from app.domain.ladders import LadderConfig, ladder_config
from app.domain.results import _encoded_result_parts, result_parts
from app.storage.engine import get_engine, session_factory
from app.storage.models import Ladder
from app.storage.repositories import ratings as rating_repo
from app.storage.repositories import rerating as rerating_repo
from app.storage.repositories import sql as sql_repo
from app.storage.repositories.recording import (
    HISTORY,
    HISTORY_COLUMNS,
    MATCH_COLUMNS,
    MATCHES,
    PARTICIPANT_COLUMNS,
    PARTICIPANTS,
)

CONFIGS = {
    algorithm: ladder_config(algorithm, {}) for algorithm in ("trueskill", "plackett_luce", "elo")
}

#: Every kind of float the repr writes differently: exponents both ways, subnormals,
#: negative zero, integers as floats, long fractions.
numbers = st.one_of(
    st.floats(allow_nan=False, allow_infinity=False),
    st.floats(min_value=-1e-3, max_value=1e-3, allow_nan=False),
    st.sampled_from([0.0, -0.0, 1.0, 1e16, 1e-5, 5e-324, 1 / 3, 0.1 + 0.2, 25.0, 1e308]),
)
ids = st.text(min_size=1, max_size=12)
metas = st.none() | st.dictionaries(
    st.text(max_size=5),
    st.none() | st.booleans() | st.integers() | numbers | st.text(max_size=5),
    max_size=4,
)


def _both(config: LadderConfig, **document: Any) -> tuple[Any, Any]:
    """Each writer's text, or the exception it raised."""
    out = []
    for write in (result_parts, _encoded_result_parts):
        try:
            out.append(write(config=config, **document))
        except ValueError as exc:
            out.append(type(exc))
    return out[0], out[1]


@settings(max_examples=300, deadline=None)
@given(
    algorithm=st.sampled_from(sorted(CONFIGS)),
    match_id=ids,
    team_sizes=st.lists(st.integers(min_value=1, max_value=3), min_size=1, max_size=4),
    values=st.lists(numbers, min_size=40, max_size=40),
    weighted=st.booleans(),
    quality=numbers,
    meta=metas,
    played_at=st.datetimes(timezones=st.just(UTC)),
)
def test_result_text_is_the_json_encoders(
    algorithm: str,
    match_id: str,
    team_sizes: list[int],
    values: list[float],
    weighted: bool,
    quality: float,
    meta: dict[str, Any] | None,
    played_at: datetime,
) -> None:
    teams = [[f'p{j}\\{i}\t"é' for i in range(size)] for j, size in enumerate(team_sizes)]
    n = sum(team_sizes)
    offset = 1
    column = itertools.cycle(values)
    before = ([next(column) for _ in range(n + 1)], [abs(next(column)) for _ in range(n + 1)])
    after = ([next(column) for _ in range(n + 1)], [abs(next(column)) for _ in range(n + 1)])
    weights = [[abs(next(column)) for _ in team] for team in teams] if weighted else None
    fast, encoded = _both(
        CONFIGS[algorithm],
        ladder_id="ladder-1",
        match_id=match_id,
        played_at=played_at,
        recorded_at=datetime(2026, 1, 2, 3, 4, 5, 6, tzinfo=UTC),
        quality=quality,
        teams=teams,
        ranks=list(range(1, len(teams) + 1)),
        weights=weights,
        before=before,
        after=after,
        offset=offset,
        meta=meta,
    )
    assert fast == encoded


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_a_number_that_is_not_finite_is_refused_as_the_encoder_refuses_it(bad: float) -> None:
    document: dict[str, Any] = {
        "ladder_id": "l",
        "match_id": "m",
        "played_at": datetime(2020, 1, 1, tzinfo=UTC),
        "recorded_at": datetime(2020, 1, 1, tzinfo=UTC),
        "quality": 0.5,
        "teams": [["a"], ["b"]],
        "ranks": [1, 2],
        "weights": None,
        "before": ([25.0, 25.0], [8.0, 8.0]),
        "after": ([27.0, bad], [7.0, 7.0]),
        "offset": 0,
        "meta": None,
    }
    assert _both(CONFIGS["trueskill"], **document) == (ValueError, ValueError)
    # Finite numbers whose sum overflows are written, as the encoder writes them.
    document["after"] = ([1e308, 1e308], [1e308, 1e308])
    fast, encoded = _both(CONFIGS["elo"], **document)
    assert fast == encoded and isinstance(fast, tuple)


AWKWARD_IDS = ["back\\slash", "tab\there", "new\nline", 'quote"d', "é ü 😀", "\\N", "p,1"]


def test_awkward_values_survive_the_bulk_insert_and_update(
    database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ids and JSON with backslashes, tabs and newlines, NULLs, exact floats and times
    with an offset and microseconds come back as they went in; the bulk update's COPY
    into a temporary table too."""
    engine = get_engine(database_url)
    postgres = engine.dialect.name == "postgresql"
    played = datetime(2004, 7, 8, 15, 45, 0, 123457, tzinfo=timezone(timedelta(hours=5.5)))
    recorded = datetime(2026, 11, 21, 12, 0, 0, 1, tzinfo=UTC)
    meta = {"map": "lock\\out\t\n", "score": 1 / 3, "nested": {"ok": None}}
    request = {"teams": [AWKWARD_IDS], "note": 'a\\b\tc\nd"e\\N', "x": 0.1 + 0.2, "meta": meta}
    with session_factory(engine)() as session:
        session.add(
            Ladder(id="awk", algorithm="trueskill", params={}, created_at=recorded, bucket_width=1)
        )
        session.flush()
        rating_repo.insert_missing_ratings(
            session=session,
            ladder_id="awk",
            player_ids=AWKWARD_IDS,
            mu=25.0,
            sigma=None,
            conservative=25.0,
            now=recorded,
        )
        matches = [
            (
                7,
                "awk",
                "m\\1\t\n",
                "h" * 64,
                played,
                recorded,
                5e-324,
                request,
                "r\\1\t",
                None,
                [5e-324, 1 / 3, 1.0 - 5e-324 - 1 / 3],
            ),
            (8, "awk", "m2", "h" * 64, played, recorded, None, {"meta": None}, "{}", None, None),
        ]
        sql_repo.insert_values(session=session, table=MATCHES, names=MATCH_COLUMNS, values=matches)
        participants = [(7, player, "awk") for player in AWKWARD_IDS]
        sql_repo.insert_values(
            session=session, table=PARTICIPANTS, names=PARTICIPANT_COLUMNS, values=participants
        )
        history = [
            ("awk", player, 7, played, 1e-300 * i, None, 1e300, 2.5, None, 5e-324)
            for i, player in enumerate(AWKWARD_IDS)
        ]
        sql_repo.insert_values(
            session=session, table=HISTORY, names=HISTORY_COLUMNS, values=history
        )
        session.commit()

        stored = session.execute(
            text(
                "SELECT match_id, played_at, recorded_at, quality, request, result, "
                "voided_at FROM matches ORDER BY seq"
            )
        ).all()
        assert [row[0] for row in stored] == ["m\\1\t\n", "m2"]
        assert [row[3] for row in stored] == [5e-324, None]
        assert [row[5] for row in stored] == ["r\\1\t", "{}"]
        assert [row[6] for row in stored] == [None, None]
        assert _chances(session) == [[5e-324, 1 / 3, 1.0 - 5e-324 - 1 / 3], None]
        if postgres:
            assert [row[1] for row in stored] == [played, played]
            assert [row[2] for row in stored] == [recorded, recorded]
            # The JSON column holds the compact text.
            assert stored[0][4] == request
            raw = session.execute(
                text("SELECT CAST(request AS TEXT) FROM matches ORDER BY seq")
            ).scalars()
            assert list(raw) == [sql_repo.json_text(request), '{"meta":null}']
        got = session.execute(text("SELECT match_seq, player_id, ladder_id FROM participants"))
        assert sorted(tuple(row) for row in got) == sorted(participants)
        got = session.execute(
            text(
                "SELECT player_id, mu_before, sigma_before, mu_after, sigma_after, "
                "volatility_before, volatility_after FROM rating_history ORDER BY id"
            )
        ).all()
        assert [tuple(row) for row in got] == [
            (player, 1e-300 * i, None, 1e300, 2.5, None, 5e-324)
            for i, player in enumerate(AWKWARD_IDS)
        ]

        # Every bulk update through COPY into a temporary table (PostgreSQL).
        monkeypatch.setattr(sql_repo, "COPY_UPDATE_ROWS", 1)
        voided = datetime(2026, 11, 22, 1, 2, 3, 999999, tzinfo=timezone(timedelta(hours=-7)))
        rerating_repo.update_matches(
            session=session,
            rows=[
                {
                    "seq": 7,
                    "quality": 0.1 + 0.2,
                    "result": "v\\2\t\n\\N",
                    "voided_at": voided,
                    "win_probabilities": [0.1 + 0.2, 0.7],
                },
                {
                    "seq": 8,
                    "quality": None,
                    "result": "é",
                    "voided_at": None,
                    "win_probabilities": [1e-300, 1.0],
                },
            ],
        )
        session.commit()
        stored = session.execute(
            text("SELECT quality, result, voided_at FROM matches ORDER BY seq")
        ).all()
        assert [tuple(row[:2]) for row in stored] == [(0.1 + 0.2, "v\\2\t\n\\N"), (None, "é")]
        if postgres:
            assert [row[2] for row in stored] == [voided, None]
        assert _chances(session) == [[0.1 + 0.2, 0.7], [1e-300, 1.0]]

        # And by the one-statement update (arrays of JSON as their texts).
        monkeypatch.setattr(sql_repo, "COPY_UPDATE_ROWS", 1000)
        rerating_repo.update_matches(
            session=session,
            rows=[
                {"seq": 7, "win_probabilities": [5e-324, 1.0]},
                {"seq": 8, "win_probabilities": None},
            ],
        )
        session.commit()
        assert _chances(session) == [[5e-324, 1.0], None]


def _chances(session: Any) -> list[Any]:
    """The matches' stored win probabilities, by seq (a JSON null read as None)."""
    values = session.execute(text("SELECT win_probabilities FROM matches ORDER BY seq"))
    return [json.loads(v) if isinstance(v, str) else v for v in values.scalars()]
