"""Erasing a player: their rating, history and leaderboard entry go, their id in every
stored match becomes one random pseudonym, and nothing else changes, not even what later
voids and rebuilds compute."""

from __future__ import annotations

import hashlib
import itertools
import json
import re
import sqlite3
import subprocess
import threading
from contextlib import closing
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import or_, select

from app.config import get_settings
from app.domain import jsontext
from app.domain.pseudonyms import pseudonymised_json
from app.services import events
from app.storage import blocks
from app.storage.engine import get_engine, normalize_url, session_factory, sqlite_file
from app.storage.models import Base, Event, RatingBlock
from tests.service.helpers import all_pages, assert_problem, create_ladder, post_match
from tests.service.oracle import core_replay, random_matches
from tests.service.test_access import _key
from tests.service.test_rank import assert_ranks_exact
from tests.service.test_void import ALGORITHMS, ELO_SEED, SEED, _batch, _seed

PSEUDONYM = re.compile(r"erased/[0-9a-f]{32}")
ERASED = "alice-7f3e"  # unique: no other stored text holds it

BODIES: list[dict[str, Any]] = [
    {"match_id": "g1", "teams": [[ERASED], ["bob"]], "played_at": "2026-01-01T00:00:00Z"},
    {
        "match_id": "g2",
        "teams": [[ERASED, "carol"], ["bob", "dave"]],
        "scores": [3, 1],
        "played_at": "2026-01-02T00:00:00Z",
    },
    {"match_id": "g3", "teams": [["carol"], ["dave"]], "played_at": "2026-01-03T00:00:00Z"},
    {
        "match_id": "g4",
        "teams": [["dave"], [ERASED], ["erin"]],
        "ranks": [1, 2, 2],
        "played_at": "2026-01-04T00:00:00Z",
    },
    {"match_id": "g5", "teams": [[ERASED], ["carol"]], "played_at": "2026-01-05T00:00:00Z"},
]


def _rows(url: str) -> dict[str, list[tuple[Any, ...]]]:
    """Every row of every table, each table in a fixed order."""
    with get_engine(url).connect() as connection:
        return {
            name: sorted(
                (tuple(row) for row in connection.execute(select(table))),
                key=lambda row: json.dumps(row, default=str, sort_keys=True),
            )
            for name, table in Base.metadata.tables.items()
        }


def _without(rows: list[tuple[Any, ...]], player: str) -> list[tuple[Any, ...]]:
    return [row for row in rows if player not in row]


def test_erasure_removes_the_player_and_nothing_else(client: TestClient, database_url: str) -> None:
    create_ladder(client, "e", params={"tau_per_day": 0.2})
    _seed(client, "e", ERASED, SEED)  # a seed before their first match
    before = {body["match_id"]: post_match(client, "e", body) for body in BODIES[:3]}
    _seed(client, "e", "bob", SEED)  # someone else's seed stays
    before |= {body["match_id"]: post_match(client, "e", body) for body in BODIES[3:]}
    assert client.delete("/v1/ladders/e/matches/g5").status_code == 200  # voided: erased too
    before["g5"] = client.get("/v1/ladders/e/matches/g5").json()
    board = all_pages(client, "/v1/ladders/e/leaderboard", limit=2)
    documents = {m: client.get(f"/v1/ladders/e/matches/{m}").text for m in before}
    stored = _rows(database_url)

    response = client.delete(f"/v1/ladders/e/players/{ERASED}")
    assert response.status_code == 200, response.text
    # Four matches (one voided); four history entries: a seed and three counted matches.
    assert response.json() == {
        "ladder": "e",
        "player_id": ERASED,
        "matches_pseudonymised": 4,
        "history_entries_removed": 4,
    }

    # Gone from the player routes and the leaderboard; the others' ranks close up.
    assert_problem(client.get(f"/v1/ladders/e/players/{ERASED}"), 404, "player_id")
    assert_problem(client.get(f"/v1/ladders/e/players/{ERASED}/history"), 404, "player_id")
    after_board = all_pages(client, "/v1/ladders/e/leaderboard", limit=2)
    expected_board = [entry for entry in board if entry["player_id"] != ERASED]
    for rank, entry in enumerate(expected_board, start=1):
        entry["rank"] = rank
    assert after_board == expected_board
    assert client.get("/v1/ladders/e").json()["players"] == len(expected_board)
    for entry in expected_board:
        player = client.get(f"/v1/ladders/e/players/{entry['player_id']}").json()
        assert player["rank"] == entry["rank"]

    # Each of their matches names one pseudonym in their place; every other byte stays.
    pseudonyms = set()
    for match_id, document in documents.items():
        now = client.get(f"/v1/ladders/e/matches/{match_id}").text
        if ERASED not in document:
            assert now == document
            continue
        found = set(PSEUDONYM.findall(now))
        assert len(found) == 1
        pseudonyms |= found
        assert now == document.replace(jsontext.string(ERASED), jsontext.string(found.pop()))
    assert len(pseudonyms) == 1
    pseudonym = pseudonyms.pop()
    assert all_pages(client, "/v1/ladders/e/matches", limit=5, player=ERASED) == []
    assert_problem(client.get("/v1/ladders/e/matches", params={"player": pseudonym}), 422)
    assert pseudonym not in client.get("/v1/ladders/e/leaderboard").text
    assert pseudonym not in response.text

    # No table holds the old id (nor a hash of a body with it) but the erasure's notice to
    # the systems that mirror the ladder's events (its own event, until the notice period
    # ends); the others' rows are as they were, byte for byte.
    now_stored = _rows(database_url)
    events_stored = now_stored.pop("events")
    notices = [row for row in events_stored if row[3] == "player.erased"]
    assert [row[7] for row in notices] == [ERASED]
    assert ERASED not in repr([row for row in events_stored if row not in notices])
    for name, rows in now_stored.items():
        assert ERASED not in repr(rows), name
    old_hashes = {row[3] for row in stored["matches"]}
    for row in now_stored["matches"]:
        request, digest = row[7], row[3]
        if pseudonym in json.dumps(request):
            assert digest not in old_hashes
            assert digest == hashlib.sha256(jsontext.canonical(request).encode()).hexdigest()
    for name in ("ratings", "rating_history"):
        assert now_stored[name] == _without(stored[name], ERASED), name
    assert len(now_stored["participants"]) == len(stored["participants"])
    assert now_stored["api_keys"] == stored["api_keys"]

    # Erased is erased: a second request finds no one.
    assert_problem(client.delete(f"/v1/ladders/e/players/{ERASED}"), 404, "player_id")
    assert_problem(client.delete("/v1/ladders/e/players/nobody"), 404, "player_id")
    assert_problem(client.delete(f"/v1/ladders/none/players/{ERASED}"), 404, "ladder")

    # The old id posted again is somebody new, at the prior.
    again = post_match(client, "e", {"match_id": "g6", "teams": [[ERASED], ["bob"]]})
    assert again["teams"][0]["players"][0]["before"] == {
        "mu": 25.0,
        "sigma": 25.0 / 3.0,
        "conservative": 0.0,
    }
    assert client.get(f"/v1/ladders/e/players/{ERASED}").json()["matches"] == 1
    # The erased body retried under its match_id is another body now.
    assert_problem(client.post("/v1/ladders/e/matches", json=BODIES[0]), 409, "match_id")


def test_a_pseudonym_cannot_be_posted_seeded_or_looked_up(client: TestClient) -> None:
    create_ladder(client, "e")
    post_match(client, "e", BODIES[0])
    assert client.delete(f"/v1/ladders/e/players/{ERASED}").status_code == 200
    pseudonym = PSEUDONYM.findall(client.get("/v1/ladders/e/matches/g1").text)[0]
    match = {"teams": [[pseudonym], ["bob"]]}
    assert_problem(client.post("/v1/ladders/e/matches", json=match), 422, "teams")
    batch = {"matches": [match]}
    assert_problem(client.post("/v1/ladders/e/matches/batch", json=batch), 422, "teams")
    assert_problem(client.post("/v1/ladders/e/quality", json=match), 422, "teams")
    # A "/" splits the path: no player route can name it.
    for method in ("get", "put", "delete"):
        response = client.request(
            method, f"/v1/ladders/e/players/{pseudonym.replace('/', '%2F')}", json={"mu": 1.0}
        )
        assert response.status_code in (404, 405), response.text
    assert [e["player_id"] for e in all_pages(client, "/v1/ladders/e/leaderboard", 9)] == ["bob"]


def test_erasing_a_player_whose_only_match_was_voided(client: TestClient) -> None:
    """No rating is left, but a stored match still names them: erasure finds it."""
    create_ladder(client, "e")
    post_match(client, "e", BODIES[0])
    assert client.delete("/v1/ladders/e/matches/g1").status_code == 200
    assert_problem(client.get(f"/v1/ladders/e/players/{ERASED}"), 404)
    response = client.delete(f"/v1/ladders/e/players/{ERASED}")
    assert response.status_code == 200, response.text
    assert response.json()["matches_pseudonymised"] == 1
    assert response.json()["history_entries_removed"] == 0
    assert ERASED not in client.get("/v1/ladders/e/matches/g1").text


def test_erasure_needs_an_admin_key(client: TestClient, database_url: str) -> None:
    create_ladder(client, "e")
    post_match(client, "e", BODIES[0])
    write = _key(database_url, "write")
    path = f"/v1/ladders/e/players/{ERASED}"
    assert_problem(client.delete(path, headers={"Authorization": ""}), 401)
    assert_problem(client.delete(path, headers=write), 403)
    assert client.get(path).status_code == 200  # refused: nothing changed
    assert client.delete(path).status_code == 200


def _renamed(bodies: list[dict[str, Any]], old: str, new: str) -> list[dict[str, Any]]:
    return [
        {**body, "teams": [[new if p == old else p for p in team] for team in body["teams"]]}
        for body in bodies
    ]


def _others(client: TestClient, ladder: str, stand_in: str) -> dict[str, Any]:
    """The ladder as a replay determines it, with the player ``stand_in`` (a pseudonym, or
    the id it stands for) named ``"X"`` in the matches and left out of the rest."""
    board = all_pages(client, f"/v1/ladders/{ladder}/leaderboard", limit=7)
    board = [entry for entry in board if entry["player_id"] != stand_in]
    histories = {}
    for entry in board:
        entry.pop("rank")
        player = entry["player_id"]
        history = all_pages(client, f"/v1/ladders/{ladder}/players/{player}/history", limit=9)
        for item in history:
            if item["kind"] != "match":
                del item["played_at"]
        histories[player] = history
    matches = []
    for match in all_pages(client, f"/v1/ladders/{ladder}/matches", limit=11):
        if match["voided"]:
            continue
        for team in match["teams"]:
            for player in team["players"]:
                if player["player_id"] == stand_in:
                    player["player_id"] = "X"
        matches.append(
            {k: v for k, v in match.items() if k not in ("ladder", "seq", "recorded_at")}
        )
    return {"board": board, "histories": histories, "matches": matches}


@pytest.mark.parametrize(("algorithm", "params"), ALGORITHMS, ids=[a for a, _ in ALGORITHMS])
def test_voids_and_rebuilds_after_an_erasure_rate_the_others_as_before(
    client: TestClient, algorithm: str, params: dict[str, Any]
) -> None:
    """Ladder "v" erases p05 (seeded before their first match and between two), then voids
    an early match, then the match right after p05's second seed, then rebuilds; ladder
    "fresh" keeps p05 and does the same. The others match exactly, and match a replay with
    the rating core."""
    bodies = random_matches(seed=77, count=36)
    played = [n for n, body in enumerate(bodies) if any("p05" in team for team in body["teams"])]
    split = played[3] + 1  # p05's second seed comes after their fourth match
    after_seed = played[4]  # ... and before this one, which is voided later
    seed = ELO_SEED if algorithm == "elo" else SEED
    for ladder in ("v", "fresh"):
        create_ladder(client, ladder, algorithm=algorithm, params=params)
        _seed(client, ladder, "p05", seed)
        _seed(client, ladder, "p02", seed)
        _batch(client, ladder, bodies[:split])
        _seed(client, ladder, "p05", {**seed, "mu": seed["mu"] - 3.0})
        _batch(client, ladder, bodies[split:])
    before = _others(client, "v", "p05")
    response = client.delete("/v1/ladders/v/players/p05")
    assert response.status_code == 200, response.text
    assert response.json()["matches_pseudonymised"] == len(played)
    pseudonym = PSEUDONYM.findall(client.get(f"/v1/ladders/v/matches/r77-{played[0]}").text)[0]
    assert _others(client, "v", pseudonym) == before

    def same_again(voided: str | None = None) -> None:
        for ladder in ("v", "fresh"):
            if voided is not None:
                response = client.delete(f"/v1/ladders/{ladder}/matches/{voided}")
            else:
                response = client.patch(f"/v1/ladders/{ladder}?rebuild=true", json={})
            assert response.status_code == 200, response.text
        assert _others(client, "v", pseudonym) == _others(client, "fresh", "p05")
        # The prediction tallies too (the win probabilities are in the documents above).
        accuracy = [client.get(f"/v1/ladders/{name}/accuracy").json() for name in ("v", "fresh")]
        assert {**accuracy[0], "ladder": "fresh"} == accuracy[1]
        assert pseudonym not in client.get("/v1/ladders/v/leaderboard?limit=100").text
        assert client.get("/v1/ladders/v").json()["players"] == 11

    same_again(voided=bodies[1]["match_id"])
    same_again(voided=bodies[after_seed]["match_id"])
    same_again()

    # And the rating core, one match at a time, p05 seeded at their places.
    gone = {bodies[1]["match_id"], bodies[after_seed]["match_id"]}
    events: list[dict[str, Any]] = [{"seed": "p05", **seed}, {"seed": "p02", **seed}]
    events += [b for b in bodies[:split] if b["match_id"] not in gone]
    events.append({"seed": "p05", **seed, "mu": seed["mu"] - 3.0})
    events += [b for b in bodies[split:] if b["match_id"] not in gone]
    expected = core_replay(algorithm, params, events)
    board = all_pages(client, "/v1/ladders/v/leaderboard", limit=100)
    assert {e["player_id"] for e in board} == set(expected.ratings) - {"p05"}
    # Glicko-2's volatility iteration stops within its tolerance (1e-6 in ln sigma^2), so
    # inputs an ulp apart (days away computed two ways) may stop a round apart.
    rel = 1e-9 if algorithm == "glicko2" else 1e-12
    for entry in board:
        rating = expected.ratings[entry["player_id"]]
        assert entry["mu"] == pytest.approx(rating.mu, rel=rel)
        if algorithm != "elo":
            assert entry["sigma"] == pytest.approx(rating.sigma, rel=rel)


def test_a_void_after_an_erasure_equals_a_replay_with_a_stand_in(client: TestClient) -> None:
    """The erased player's matches replayed with a stand-in id give the others the same
    ratings, so a void reaching them through the pseudonym does too."""
    bodies = random_matches(seed=5, count=30, players=8)
    create_ladder(client, "v", params={"tau_per_day": 0.3})
    _batch(client, "v", bodies)
    assert client.delete("/v1/ladders/v/players/p03").status_code == 200
    assert client.delete(f"/v1/ladders/v/matches/{bodies[2]['match_id']}").status_code == 200
    create_ladder(client, "fresh", params={"tau_per_day": 0.3})
    _batch(client, "fresh", _renamed(bodies[:2] + bodies[3:], "p03", "ghost"))
    pseudonym = PSEUDONYM.findall(client.get("/v1/ladders/v/matches?limit=100").text)[0]
    assert _others(client, "v", pseudonym) == _others(client, "fresh", "ghost")


def test_an_erasure_while_matches_arrive(client: TestClient) -> None:
    """Writers post matches, some naming the player being erased. Those recorded before
    the erasure name the pseudonym; those after start a new player at the prior; every
    history stays an unbroken chain and no request fails."""
    create_ladder(client, "e")
    writers = 4
    started = threading.Barrier(writers + 1)
    some_recorded = threading.Event()
    statuses: list[int] = []
    errors: list[BaseException] = []

    def writer(n: int) -> None:
        try:
            started.wait(timeout=30)
            bodies = _renamed(random_matches(seed=200 + n, count=30, players=6), "p00", ERASED)
            for k, body in enumerate(bodies):
                body["match_id"] = f"w{n}-{k}"
                response = client.post("/v1/ladders/e/matches", json=body)
                statuses.append(response.status_code)
                if len(statuses) >= 20:
                    some_recorded.set()
        except BaseException as exc:  # re-raised in the main thread
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(writers)]
    for thread in threads:
        thread.start()
    started.wait(timeout=30)
    assert some_recorded.wait(timeout=60)
    erased = client.delete(f"/v1/ladders/e/players/{ERASED}")
    for thread in threads:
        thread.join(timeout=120)
    assert not errors, errors[:3]
    assert erased.status_code == 200, erased.text
    assert statuses == [201] * (writers * 30)

    matches = all_pages(client, "/v1/ladders/e/matches", limit=50)[::-1]  # oldest first
    named = [
        (m["seq"], p["player_id"], p["before"])
        for m in matches
        for t in m["teams"]
        for p in t["players"]
        if p["player_id"] == ERASED or PSEUDONYM.fullmatch(p["player_id"])
    ]
    pseudonymised = [seq for seq, player, _ in named if player != ERASED]
    again = [(seq, before) for seq, player, before in named if player == ERASED]
    assert len(pseudonymised) == erased.json()["matches_pseudonymised"] > 0
    assert len({player for _, player, _ in named if player != ERASED}) == 1
    if again:
        assert max(pseudonymised) < again[0][0]
        assert again[0][1]["mu"] == 25.0 and again[0][1]["sigma"] == 25.0 / 3.0
    for entry in all_pages(client, "/v1/ladders/e/leaderboard", limit=50):
        history = all_pages(
            client, f"/v1/ladders/e/players/{entry['player_id']}/history", limit=50
        )[::-1]
        assert history[0]["before"]["mu"] == 25.0
        for previous, item in itertools.pairwise(history):
            assert item["before"] == previous["after"]
        assert history[-1]["after"]["mu"] == entry["mu"]


def _dump(url: str) -> str:
    """A full dump of the database: ``pg_dump`` of the whole database on PostgreSQL (every
    table, sequence and function), SQLite's own ``.dump`` and the bytes of its files."""
    file = sqlite_file(url)
    if file is None:
        plain = normalize_url(url).replace("postgresql+psycopg://", "postgresql://", 1)
        done = subprocess.run(
            ["pg_dump", "--no-owner", plain], capture_output=True, text=True, check=True
        )
        return done.stdout
    get_engine(url).dispose()  # every connection closed: the WAL checkpointed into the file
    with closing(sqlite3.connect(file)) as connection:
        connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        text = "\n".join(connection.iterdump())
    files = [file, *file.parent.glob(file.name + "-*")]
    return text + "".join(path.read_bytes().decode("latin-1") for path in files)


def all_pages_of_events(client: TestClient, ladder: str) -> list[dict[str, Any]]:
    page = client.get(f"/v1/ladders/{ladder}/events", params={"limit": 1000}).json()
    assert len(page["events"]) < 1000
    events: list[dict[str, Any]] = page["events"]
    return events


def test_an_erased_id_is_nowhere_in_a_dump(client: TestClient, database_url: str) -> None:
    # 600 one-match players share two ratings; cutting their rank blocks small makes many
    # of them fences, in both buckets.
    create_ladder(client, "er-s1")
    players = [f"fw{n:05}" for n in range(600)]
    for start in range(0, 600, 200):
        batch = [
            {"match_id": f"b{n}", "teams": [[players[n]], [players[n + 1]]]}
            for n in range(start, start + 200, 2)
        ]
        response = client.post("/v1/ladders/er-s1/matches/batch", json={"matches": batch})
        assert response.status_code == 201, response.text
    with session_factory(get_engine(database_url))() as session:
        assert blocks.cut(session=session, ladder_id="er-s1", full_row=8) > 0
        session.commit()
        fences = sorted(
            {f for f in session.scalars(select(RatingBlock.first_id)) if f.startswith("fw")}
        )
    winners = [f for f in fences if int(f[2:]) % 2 == 0]
    losers = [f for f in fences if int(f[2:]) % 2 == 1]
    assert len(winners) >= 3 and len(losers) >= 2
    # Two fence players move on to other buckets (their fences stay where they were), in a
    # match whose meta names one of them; more writes come before the erasures.
    moved, named = winners[1], losers[0]
    post_match(client, "er-s1", {"teams": [[named], [moved]], "meta": {"mvp": named}})
    for n in range(70):
        post_match(client, "er-s1", {"teams": [[f"x{n}"], [players[(7 * n) % 600]]]})
    erased = [winners[0], moved, winners[-1], named, losers[-1]]

    for player in erased:
        response = client.delete(f"/v1/ladders/er-s1/players/{player}")
        assert response.status_code == 200, response.text

    # The erasures' own events name the ids (the notice to the systems that mirror the
    # ladder's events), and nothing else does; once the notice period is over, nor do they.
    with session_factory(get_engine(database_url))() as session:
        naming = session.execute(
            select(Event.type, Event.player_id).where(
                or_(*(Event.data.contains(player) for player in erased))
            )
        ).all()
        assert sorted(naming) == sorted(("player.erased", player) for player in erased)
        later = datetime.now(UTC) + timedelta(seconds=get_settings().erasure_notice_s + 1)
        assert events.expire_erasure_notices(session=session, now=later) == len(erased)
        session.commit()
    notices = [e for e in all_pages_of_events(client, "er-s1") if e["type"] == "player.erased"]
    assert [e["data"]["player_id"] for e in notices] == [None] * len(erased)

    dump = _dump(database_url)
    assert "fw00001" in dump  # the dump holds the ids that stay
    for player in erased:
        where = dump.find(player)
        assert where < 0, (player, dump[max(0, where - 300) : where + 100])
    kept = [p for p in players[:80] if p not in erased]
    assert_ranks_exact(client, database_url, "er-s1", players=kept)


def test_a_job_document_names_the_pseudonym_where_it_named_the_id() -> None:
    problem = {
        "type": "/problems/invalid-input",
        "detail": "player_id: no player 'fw00064' in ladder 'er-s1'; see fw000640",
        "fw00064": ["fw00064", "fw000640", {"of": "fw00064"}],
        "count": 3,
    }
    assert pseudonymised_json(problem, old="fw00064", new="erased/00") == {
        "type": "/problems/invalid-input",
        "detail": "player_id: no player 'erased/00' in ladder 'er-s1'; see fw000640",
        "erased/00": ["erased/00", "fw000640", {"of": "erased/00"}],
        "count": 3,
    }
    assert pseudonymised_json('said "fw00064"', old="fw00064", new="x") == 'said "x"'
