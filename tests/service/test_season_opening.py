"""Opening a season in steps: the first transaction makes the season current, steps of
players archive and reset the rest while matches, batches and seeds go on; one that
reaches a player the steps have not is reset first. Whatever comes between the steps,
ratings, histories and the archive equal a ladder whose season opened at once before the
same events; a re-rating in between finishes the opening first; and workers recording
while the steps run (PostgreSQL) leave every player reset and archived once."""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import func, select

from app.domain.documents.matches import MatchCreate
from app.domain.documents.seasons import SeasonCreate, SeasonOut
from app.services import batches, ladders, seasons
from app.storage import blocks
from app.storage.engine import get_engine, session_factory
from app.storage.models import (
    Ladder,
    PlayerRating,
    RatingBlock,
    RatingBucket,
    RatingHistory,
    SeasonStanding,
)
from app.storage.unit_of_work import Transact, transactor
from tests.service.helpers import all_pages, create_ladder, post_match
from tests.service.oracle import random_matches
from tests.service.test_void import ALGORITHMS, ELO_SEED, GLICKO2_SEED, SEED, _batch, _seed, _state


def _begin(transact: Transact, ladder: str, season: str, keep: float) -> str:
    """Open ``season`` with no step run yet; the opening's owner."""
    owner = seasons.new_owner()

    def work(session: Any) -> SeasonOut:
        return seasons.open_season(
            session=session,
            ladder=ladders.get_ladder(session=session, ladder_id=ladder),
            body=SeasonCreate(id=season, keep=keep),
            now=datetime.now(UTC),
            owner=owner,
        )

    assert transact(work).opening
    return owner


def _steps(transact: Transact, ladder: str, owner: str, count: int | None, size: int) -> bool:
    """Run ``count`` steps of the opening (None: all); whether it is done."""
    taken = iter(range(10**9))

    def stopping() -> bool:
        return count is not None and next(taken) >= count

    return seasons.run_opening(
        transact=transact,
        ladder_id=ladder,
        owner=owner,
        clock=lambda: datetime.now(UTC),
        size=size,
        stopping=stopping,
    )


def _archive(client: TestClient, ladder: str) -> list[dict[str, Any]]:
    entries = all_pages(client, f"/v1/ladders/{ladder}/seasons/1/leaderboard", limit=5)
    for entry in entries:
        entry.pop("last_played_at")
    return entries


def _everything(client: TestClient, ladder: str) -> dict[str, Any]:
    return {**_state(client, ladder), "archive": _archive(client, ladder)}


Event = tuple[str, Any]


def _play(client: TestClient, ladder: str, events: list[Event], seed: dict[str, float]) -> None:
    for kind, what in events:
        if kind == "match":
            post_match(client, ladder, what)
        elif kind == "batch":
            _batch(client, ladder, what)
        else:
            _seed(client, ladder, what, seed)


@pytest.mark.parametrize(("algorithm", "params"), ALGORITHMS, ids=[a for a, _ in ALGORITHMS])
def test_what_comes_between_the_steps_equals_an_opening_at_once(
    client: TestClient, database_url: str, algorithm: str, params: dict[str, Any]
) -> None:
    bodies = random_matches(seed=41, count=34)
    seed = {"elo": ELO_SEED, "glicko2": GLICKO2_SEED}.get(algorithm, SEED)
    newcomer = {
        "match_id": "new",
        "played_at": bodies[25]["played_at"],
        "teams": [["new1"], ["p10"]],
    }
    between: list[Event] = [
        *[("match", body) for body in bodies[20:24]],
        ("seed", "p09"),
        ("batch", bodies[24:28]),
        ("match", newcomer),
        ("seed", "p02"),  # reached by the steps already
    ]
    after: list[Event] = [("match", body) for body in bodies[28:]]
    for ladder in ("o", "t"):
        create_ladder(client, ladder, algorithm=algorithm, params=params)
        _batch(client, ladder, bodies[:20])
        _seed(client, ladder, "p05", seed)

    # The twin opens at once, then gets the same events.
    assert (
        client.post("/v1/ladders/t/seasons", json={"id": "two", "keep": 0.4}).json()["opening"]
        is False
    )
    _play(client, "t", [*between, *after], seed)

    transact = transactor(session_factory(get_engine(database_url)))
    owner = _begin(transact, "o", "two", 0.4)
    assert _steps(transact, "o", owner, 1, size=4) is False  # p00 to p03 reset
    _counts_exact(database_url, "o")
    listed = client.get("/v1/ladders/o/seasons").json()["entries"]
    assert [(e["id"], e["state"], e["opening"]) for e in listed] == [
        ("two", "open", True),
        ("1", "closed", False),
    ]
    _play(client, "o", between, seed)
    _counts_exact(database_url, "o")
    assert _steps(transact, "o", owner, None, size=4) is True
    _counts_exact(database_url, "o")
    _play(client, "o", after, seed)

    assert client.get("/v1/ladders/o/seasons").json()["entries"][0]["opening"] is False
    expected = _everything(client, "t")
    assert _everything(client, "o") == expected
    assert len(expected["archive"]) == 12  # every player of the first season, once
    # A rebuild replays the resets where the steps and the matches put them: nothing moves.
    assert client.patch("/v1/ladders/o?rebuild=true", json={}).status_code == 200
    assert _everything(client, "o") == expected


def test_a_void_during_the_opening_finishes_it_first(client: TestClient, database_url: str) -> None:
    bodies = random_matches(seed=43, count=24)
    for ladder in ("o", "t"):
        create_ladder(client, ladder)
        _batch(client, ladder, bodies[:16])
    client.post("/v1/ladders/t/seasons", json={"id": "two", "keep": 0.5})
    _batch(client, "t", bodies[16:20])
    assert client.delete(f"/v1/ladders/t/matches/{bodies[3]['match_id']}").status_code == 200

    transact = transactor(session_factory(get_engine(database_url)))
    owner = _begin(transact, "o", "two", 0.5)
    assert _steps(transact, "o", owner, 1, size=5) is False
    _batch(client, "o", bodies[16:20])
    assert client.delete(f"/v1/ladders/o/matches/{bodies[3]['match_id']}").status_code == 200
    assert client.get("/v1/ladders/o/seasons").json()["entries"][0]["opening"] is False
    # The worker of the steps finds the opening done.
    assert _steps(transact, "o", owner, None, size=5) is True
    assert _everything(client, "o") == _everything(client, "t")


def _counts_exact(database_url: str, ladder: str) -> None:
    """The ladder's rank buckets and blocks count its ratings exactly (every player: no
    placement here), bucket by bucket."""
    with get_engine(database_url).connect() as connection:
        width = connection.scalar(select(Ladder.bucket_width).where(Ladder.id == ladder))
        rows = connection.execute(
            select(PlayerRating.conservative).where(PlayerRating.ladder_id == ladder)
        )
        expected = Counter(blocks.rating_bucket(float(value), float(width)) for (value,) in rows)
        for model in (RatingBucket, RatingBlock):
            counted: Counter[int] = Counter()
            for bucket, players in connection.execute(
                select(model.bucket, model.players).where(model.ladder_id == ladder)
            ):
                counted[int(bucket)] += int(players)
            assert +counted == expected, model.__name__


def _count(database_url: str, model: Any, **where: Any) -> int:
    query = select(func.count()).select_from(model)
    for name, value in where.items():
        query = query.where(getattr(model, name) == value)
    with get_engine(database_url).connect() as connection:
        return int(connection.scalar(query) or 0)


@pytest.mark.postgres
def test_recording_from_many_threads_while_the_steps_run_resets_each_player_once(
    client: TestClient, database_url: str
) -> None:
    if not database_url.startswith("postgresql"):
        pytest.skip("concurrent writers: PostgreSQL")
    players = 60
    create_ladder(client, "c")
    first = [
        {"match_id": f"f{n}", "teams": [[f"p{n:02d}"], [f"p{(n + 1) % players:02d}"]]}
        for n in range(players)
    ]
    _batch(client, "c", first)
    transact = transactor(session_factory(get_engine(database_url)))
    owner = _begin(transact, "c", "two", 0.5)
    errors: list[BaseException] = []

    def recorder(worker: int) -> Callable[[], None]:
        def run() -> None:
            try:
                for n in range(25):
                    a, b = (worker * 7 + n * 3) % 70, (worker * 11 + n * 5 + 1) % 70
                    if a == b:
                        continue
                    body = MatchCreate(
                        match_id=f"w{worker}-{n}", teams=[[f"p{a:02d}"], [f"p{b:02d}"]]
                    )
                    transact(
                        lambda session, body=body: batches.record_matches(
                            session=session, ladder_id="c", bodies=[body], now=datetime.now(UTC)
                        )
                    )
            except BaseException as exc:  # reported below
                errors.append(exc)

        return run

    threads = [threading.Thread(target=recorder(w)) for w in range(4)]
    for thread in threads:
        thread.start()
    assert _steps(transact, "c", owner, None, size=3) is True
    for thread in threads:
        thread.join()
    assert errors == []
    _counts_exact(database_url, "c")
    # Every player of the first season reset once and archived once, ranked 1 to 60;
    # players new in the second season (p60 to p69) neither.
    resets = _count(database_url, RatingHistory, ladder_id="c", reset=True)
    assert resets == players
    assert _count(database_url, SeasonStanding, ladder_id="c", season=1) == players
    archive = all_pages(client, "/v1/ladders/c/seasons/1/leaderboard", limit=50)
    assert [entry["rank"] for entry in archive] == list(range(1, players + 1))
    for entry in archive:
        history = all_pages(client, f"/v1/ladders/c/players/{entry['player_id']}/history", limit=50)
        kinds = [item["kind"] for item in reversed(history)]
        reset = kinds.index("season_reset")
        assert kinds[:reset] == ["match"] * reset and "season_reset" not in kinds[reset + 1 :]
        assert [item["season"] for item in reversed(history)][reset:] == ["two"] * (
            len(kinds) - reset
        )
    # The stored ratings are the replay of what was recorded.
    before = _state(client, "c")
    assert client.patch("/v1/ladders/c?rebuild=true", json={}).status_code == 200
    assert _state(client, "c") == before
