"""Guarantee 7, numeric extremes: means 10^4 apart, deviations of 1e-6 and 1e4, 64-team
free-for-alls, through the API and through the rating core, on every algorithm: each result
is finite (sigma > 0 where the model has one) or a clean refusal (a 422 that changes
nothing; in the core a ``RatingInputError``). And the database's CHECK constraints refuse a
non-finite rating or a sigma <= 0 written by any other path (raw SQL), on both backends.
"""

from __future__ import annotations

import itertools
import math
import random
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import text
from sqlalchemy.exc import IntegrityError

from app.rating.base import Rating, RatingInputError
from app.rating.registry import make_model
from app.storage.engine import get_engine
from tests.reliability.conftest import create_ladder, report
from tests.service.helpers import table_counts

ALGORITHMS = ["trueskill", "plackett_luce", "elo"]
MUS = [25.0, 25.0 + 1e4, 25.0 - 1e4]
SIGMAS = [1e-6, 8.0, 1e4]


def _numbers(value: Any) -> list[float]:
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return []
    if isinstance(value, int | float):
        return [float(value)]
    if isinstance(value, dict):
        return [x for v in value.values() for x in _numbers(v)]
    if isinstance(value, list):
        return [x for v in value for x in _numbers(v)]
    return []


def _extreme_matches(rng: random.Random, players: list[str]) -> list[dict[str, Any]]:
    # The six corners of (mean, deviation): every ordered duel, upsets included, and draws.
    corners = [players[i] for i in (0, 2, 3, 5, 6, 8)]
    matches = [{"teams": [[a], [b]]} for a, b in itertools.permutations(corners, 2)]
    matches += [{"teams": [[a], [b]], "ranks": [1, 1]} for a, b in itertools.pairwise(corners)]
    matches += [{"teams": [players[0:2], players[2:4]]}, {"teams": [players[4:8], players[8:12]]}]
    for _ in range(3):
        field = rng.sample(players, 64)
        matches.append({"teams": [[p] for p in field]})
        matches.append({"teams": [field[k : k + 2] for k in range(0, 64, 2)]})
    return matches


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_extreme_ratings_through_the_api(
    app_client: TestClient, database_url: str, algorithm: str
) -> None:
    create_ladder(app_client, "x", algorithm=algorithm)
    bayesian = algorithm != "elo"
    rng = random.Random(algorithm)
    seeds = [(mu, sigma) for mu in MUS for sigma in SIGMAS]
    players = [f"p{n}" for n in range(64)]
    for n, player in enumerate(players):
        mu, sigma = seeds[n % len(seeds)] if n < 9 * 3 else rng.choice(seeds)
        body = {"mu": mu, "sigma": sigma} if bayesian else {"mu": mu * 100}
        response = app_client.put(f"/v1/ladders/x/players/{player}", json=body)
        assert response.status_code == 200, response.text

    applied = refused = 0
    for body in _extreme_matches(rng, players):
        before = table_counts(database_url)
        board = app_client.get("/v1/ladders/x/leaderboard", params={"limit": 1000}).json()
        response = app_client.post("/v1/ladders/x/matches", json=body)
        if response.status_code == 201:
            applied += 1
            result = response.json()
            assert all(math.isfinite(x) for x in _numbers(result))
            for team in result["teams"]:
                for player in team["players"]:
                    assert not bayesian or player["after"]["sigma"] > 0
        else:
            refused += 1
            assert response.status_code == 422, response.text
            assert response.headers["content-type"] == "application/problem+json"
            assert table_counts(database_url) == before
            assert (
                app_client.get("/v1/ladders/x/leaderboard", params={"limit": 1000}).json() == board
            )

    with get_engine(database_url).connect() as connection:
        stored = connection.execute(text("SELECT mu, sigma, conservative FROM ratings")).all()
    for mu, sigma, conservative in stored:
        assert math.isfinite(mu) and math.isfinite(conservative)
        assert (sigma is None) if not bayesian else (math.isfinite(sigma) and sigma > 0)
    report(
        f"numeric_extremes[{algorithm},{database_url.split(':')[0]}]",
        applied=applied,
        refused=refused,
    )


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_extreme_ratings_through_the_core(algorithm: str) -> None:
    model = make_model(algorithm)
    rng = random.Random(algorithm)
    scale = 1.0 if algorithm != "elo" else 100.0
    seeds = [
        Rating(mu * scale, sigma if algorithm != "elo" else 0.0) for mu in MUS for sigma in SIGMAS
    ]
    cases: list[list[list[Rating]]] = [[[a], [b]] for a, b in itertools.product(seeds, repeat=2)]
    for _ in range(5):
        field = [rng.choice(seeds) for _ in range(64)]
        cases.append([[r] for r in field])
        cases.append([field[k : k + 2] for k in range(0, 64, 2)])
    refused = 0
    for teams in cases:
        try:
            new = model.rate(teams)
            quality = model.quality(teams)
            chances = model.win_probabilities(teams)
        except RatingInputError:
            refused += 1
            continue
        assert [len(t) for t in new] == [len(t) for t in teams]
        assert all(math.isfinite(x) for team in new for r in team for x in r)
        if algorithm != "elo":
            assert all(r.sigma > 0 for team in new for r in team)
        assert 0.0 <= quality <= 1.0
        assert all(0.0 <= p <= 1.0 for p in chances)
        assert math.fsum(chances) == pytest.approx(1.0, abs=1e-9)
    assert refused < len(cases)


BAD_VALUES = [
    ("mu", float("nan")),
    ("mu", float("inf")),
    ("mu", float("-inf")),
    ("conservative", float("nan")),
    ("conservative", float("inf")),
    ("sigma", 0.0),
    ("sigma", -1.0),
    ("sigma", float("inf")),
    ("sigma", float("-inf")),
]


HISTORY_BAD_VALUES = [
    ("mu_before", float("inf")),
    ("mu_after", float("-inf")),
    ("sigma_before", 0.0),
    ("sigma_after", -1.0),
    ("sigma_after", float("-inf")),
]


def _write(database_url: str, sql: str, value: float) -> None:
    with get_engine(database_url).begin() as connection:
        connection.execute(text(sql), {"v": value})


def test_the_database_refuses_non_finite_ratings(app_client: TestClient, database_url: str) -> None:
    create_ladder(app_client, "x")
    match = {"match_id": "m", "teams": [["a"], ["b"]]}
    assert app_client.post("/v1/ladders/x/matches", json=match).status_code == 201
    statements = [
        (f"UPDATE ratings SET {column} = :v WHERE player_id = 'a'", column, value)
        for column, value in BAD_VALUES
    ]
    statements += [
        (f"UPDATE rating_history SET {column} = :v WHERE player_id = 'a'", column, value)
        for column, value in HISTORY_BAD_VALUES
    ]
    statements.append(("UPDATE matches SET quality = :v", "quality", float("inf")))
    accepted = []
    for sql, column, value in statements:
        try:
            _write(database_url, sql, value)
        except IntegrityError:
            continue
        accepted.append((sql.split()[1], column, value))
    assert accepted == []
    # NaN: PostgreSQL orders NaN above every number, so the range checks refuse it; SQLite
    # stores a NaN parameter as NULL, which NOT NULL refuses for mu.
    for table, column in (("ratings", "mu"), ("rating_history", "mu_after")):
        with pytest.raises(IntegrityError):
            _write(
                database_url, f"UPDATE {table} SET {column} = :v WHERE player_id = 'a'", math.nan
            )
    stored = app_client.get("/v1/ladders/x/players/a").json()
    assert math.isfinite(stored["mu"]) and stored["sigma"] > 0


def test_the_database_refuses_an_infinite_sigma_in_history(
    app_client: TestClient, database_url: str
) -> None:
    create_ladder(app_client, "x")
    assert (
        app_client.post("/v1/ladders/x/matches", json={"teams": [["a"], ["b"]]}).status_code == 201
    )
    with pytest.raises(IntegrityError):
        _write(database_url, "UPDATE rating_history SET sigma_after = :v", float("inf"))
