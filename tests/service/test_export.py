"""Exports: a ladder's counted matches as NDJSON, each line a body the API accepts, that
imported into a new ladder with the same parameters give every rating exactly (over HTTP
and on the command line, on both databases); its ratings as NDJSON; admin only; read in
one snapshot."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from app.cli.main import main
from app.domain.documents.matches import MatchCreate
from app.rating.registry import ALGORITHMS
from tests.service.helpers import assert_problem, create_ladder
from tests.service.oracle import random_matches
from tests.service.test_access import _key

#: An advantage on each algorithm's own scale.
ADVANTAGE = {"elo": 80.0, "glicko2": 60.0}


def _bodies(seed: int, count: int) -> list[dict[str, Any]]:
    bodies = random_matches(seed=seed, count=count, advantage=True)
    for n, body in enumerate(bodies):
        if n % 9 == 4:
            del body["played_at"]  # counted as played when it arrived
        if n % 7 == 2:
            body["meta"] = {"map": f"m{n}", "mode": {"ranked": True}}
    return bodies


def _lines(client: TestClient, path: str) -> list[dict[str, Any]]:
    response = client.get(path)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("application/x-ndjson")
    assert response.text.endswith("\n") or response.text == ""
    return [json.loads(line) for line in response.text.splitlines()]


def _fill(client: TestClient, ladder: str, algorithm: str, bodies: list[dict[str, Any]]) -> None:
    create_ladder(
        client, ladder, algorithm=algorithm, params={"advantage": ADVANTAGE.get(algorithm, 1.5)}
    )
    for start in range(0, len(bodies), 20):
        batch = {"matches": bodies[start : start + 20]}
        response = client.post(f"/v1/ladders/{ladder}/matches/batch", json=batch)
        assert response.status_code == 201, response.text


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_exported_matches_import_into_the_same_ratings(client: TestClient, algorithm: str) -> None:
    bodies = _bodies(seed=61, count=70)
    _fill(client, "source", algorithm, bodies)
    voided = bodies[30]["match_id"]
    assert client.delete(f"/v1/ladders/source/matches/{voided}").status_code == 200

    exported = _lines(client, "/v1/ladders/source/export/matches")
    # Every counted match, in the order rated, each a body the API takes as it is.
    assert [line["match_id"] for line in exported] == [
        body["match_id"] for body in bodies if body["match_id"] != voided
    ]
    for line, body in zip(exported, [b for b in bodies if b["match_id"] != voided], strict=True):
        MatchCreate.model_validate(line)
        for field in ("teams", "ranks", "scores", "weights", "advantage", "meta"):
            assert line.get(field) == body.get(field), field
        assert "played_at" in line

    params = client.get("/v1/ladders/source").json()["params"]
    created = client.post(
        "/v1/ladders", json={"id": "copy", "algorithm": algorithm, "params": params}
    )
    assert created.status_code == 201, created.text
    for start in range(0, len(exported), 25):
        batch = {"matches": exported[start : start + 25]}
        assert client.post("/v1/ladders/copy/matches/batch", json=batch).status_code == 201

    source = _lines(client, "/v1/ladders/source/export/ratings")
    copy = _lines(client, "/v1/ladders/copy/export/ratings")
    assert len(source) == 12
    assert copy == source  # every rating, bit for bit
    assert _lines(client, "/v1/ladders/copy/export/matches") == exported


def test_the_ratings_export_has_every_player_once(client: TestClient) -> None:
    _fill(client, "g", "glicko2", _bodies(seed=62, count=30))
    lines = _lines(client, "/v1/ladders/g/export/ratings")
    players = [line["player_id"] for line in lines]
    assert players == sorted(set(players))
    board = {
        entry["player_id"]: entry
        for entry in client.get("/v1/ladders/g/leaderboard", params={"limit": 100}).json()[
            "entries"
        ]
    }
    for line in lines:
        assert set(line) == {
            "player_id",
            "mu",
            "sigma",
            "volatility",
            "conservative",
            "matches",
            "last_played_at",
        }
        assert line["matches"] == board[line["player_id"]]["matches"]
        assert line["volatility"] == board[line["player_id"]]["volatility"]
    create_ladder(client, "e", algorithm="elo")
    client.post("/v1/ladders/e/matches", json={"teams": [["a"], ["b"]]})
    (elo,) = _lines(client, "/v1/ladders/e/export/ratings")[:1]
    assert "sigma" not in elo and "volatility" not in elo


def test_an_export_pages_through_large_ladders(client: TestClient) -> None:
    """More matches than one page of the export's reads (1,000): every one, once."""
    create_ladder(client, "big", algorithm="elo")
    bodies = [{"match_id": f"b{n}", "teams": [[f"p{n % 97}"], [f"q{n % 89}"]]} for n in range(2100)]
    for start in range(0, len(bodies), 500):
        batch = {"matches": bodies[start : start + 500]}
        assert client.post("/v1/ladders/big/matches/batch", json=batch).status_code == 201
    lines = _lines(client, "/v1/ladders/big/export/matches")
    assert [line["match_id"] for line in lines] == [body["match_id"] for body in bodies]
    assert len(_lines(client, "/v1/ladders/big/export/ratings")) == 97 + 89


def test_an_export_asked_for_as_bytes_is_labelled_so(client: TestClient) -> None:
    create_ladder(client, "x")
    client.post("/v1/ladders/x/matches", json={"match_id": "a", "teams": [["p"], ["q"]]})
    plain = client.get("/v1/ladders/x/export/matches")
    octets = client.get(
        "/v1/ladders/x/export/matches", headers={"Accept": "application/octet-stream"}
    )
    assert octets.headers["content-type"] == "application/octet-stream"
    assert octets.content == plain.content and plain.content.count(b"\n") == 1


def test_exports_are_for_admins(client: TestClient, database_url: str) -> None:
    create_ladder(client, "x")
    writer = _key(database_url, "write")
    for what in ("matches", "ratings"):
        path = f"/v1/ladders/x/export/{what}"
        assert_problem(client.get(path, headers=writer), 403)
        assert_problem(client.get(path, headers={"Authorization": ""}), 401)
        assert_problem(client.get(f"/v1/ladders/nope/export/{what}"), 404, "nope")
    assert _lines(client, "/v1/ladders/x/export/matches") == []


def test_the_command_line_exports_what_it_imports(
    client: TestClient, database_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bodies = _bodies(seed=63, count=40)
    create_ladder(client, "src", algorithm="trueskill", params={"tau_per_day": 0.05})
    for start in range(0, len(bodies), 20):
        batch = {"matches": bodies[start : start + 20]}
        assert client.post("/v1/ladders/src/matches/batch", json=batch).status_code == 201
    create_ladder(client, "dst", algorithm="trueskill", params={"tau_per_day": 0.05})

    monkeypatch.setenv("RATINGS_DATABASE_URL", database_url)
    exported = tmp_path / "src.jsonl.gz"
    assert main(["export", "matches", "--ladder", "src", "--output", str(exported)]) == 0
    assert main(["import", str(exported), "--ladder", "dst"]) == 0
    assert main(["export", "ratings", "--ladder", "dst", "-o", str(tmp_path / "r.jsonl")]) == 0

    written = [json.loads(line) for line in (tmp_path / "r.jsonl").read_text().splitlines()]
    assert written == _lines(client, "/v1/ladders/src/export/ratings")
    assert main(["export", "matches", "--ladder", "nope"]) != 0
