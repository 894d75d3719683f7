"""Guarantee 7, numeric extremes: means 10^4 apart, deviations of 1e-6 and 1e4, 64-team
free-for-alls, through the API and through the rating core, on every algorithm a ladder may
use (``app.rating.registry.ALGORITHMS``, so one added later is covered too), with the
smallest and largest volatility where the model's ratings carry one (Glicko-2): each result
is finite (sigma > 0 where the model has one, a volatility > 0 where it has one) or a clean
refusal (a 422 that changes nothing; in the core a ``RatingInputError``). And the
database's CHECK constraints refuse a non-finite rating, a sigma <= 0 or a volatility <= 0
written by any other path (raw SQL), on both backends.
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

from app.rating.base import Rating, RatingInputError, VolatileRating
from app.rating.registry import ALGORITHMS, make_model, parameters
from app.storage.engine import get_engine
from tests.reliability.conftest import create_ladder, report
from tests.service.helpers import table_counts

MUS = [25.0, 25.0 + 1e4, 25.0 - 1e4]
SIGMAS = [1e-6, 8.0, 1e4]


def _bayesian(algorithm: str) -> bool:
    """Whether the model's ratings have a sigma (Elo's prior has none: sigma 0)."""
    return make_model(algorithm).rating().sigma > 0


def _scale(algorithm: str) -> float:
    """Means without a sigma are on Elo's scale, about 100 times TrueSkill's."""
    return 1.0 if _bayesian(algorithm) else 100.0


def _volatilities(algorithm: str) -> list[float | None]:
    """The default, the smallest and the largest volatility a seed may set, where the
    model's ratings carry one; else no volatility."""
    if make_model(algorithm).rating().volatility is None:
        return [None]
    (spec,) = [spec for spec in parameters(algorithm) if spec.name == "volatility"]
    assert isinstance(spec.default, float)
    return [spec.default, spec.low, spec.high]


def _seeds(algorithm: str) -> list[tuple[float, float, float | None]]:
    """Every (mean, deviation) of MUS and SIGMAS on the algorithm's scale (a sigma the
    model has none of is left out by the caller), a block of 9 per volatility: the
    default's first."""
    scale = _scale(algorithm)
    return [
        (mu * scale, sigma, volatility)
        for volatility in _volatilities(algorithm)
        for mu in MUS
        for sigma in SIGMAS
    ]


def _check_volatility(volatility: float | None, algorithm: str) -> None:
    if _volatilities(algorithm) == [None]:
        assert volatility is None
    else:
        assert volatility is not None and math.isfinite(volatility) and volatility > 0


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


def _extreme_matches(
    rng: random.Random, players: list[str], volatile: bool
) -> list[dict[str, Any]]:
    # The six corners of (mean, deviation): every ordered duel, upsets included, and draws.
    corners = [players[i] for i in (0, 2, 3, 5, 6, 8)]
    matches = [{"teams": [[a], [b]]} for a, b in itertools.permutations(corners, 2)]
    if volatile:
        # The same corners at the smallest volatility against them at the largest.
        low = [players[9 + i] for i in (0, 2, 3, 5, 6, 8)]
        high = [players[18 + i] for i in (0, 2, 3, 5, 6, 8)]
        matches += [{"teams": [[a], [b]]} for a in low for b in high]
        matches += [{"teams": [[b], [a]]} for a in low for b in high]
    matches += [{"teams": [[a], [b]], "ranks": [1, 1]} for a, b in itertools.pairwise(corners)]
    matches += [{"teams": [players[0:2], players[2:4]]}, {"teams": [players[4:8], players[8:12]]}]
    for _ in range(3):
        field = rng.sample(players, 64)
        matches.append({"teams": [[p] for p in field]})
        matches.append({"teams": [field[k : k + 2] for k in range(0, 64, 2)]})
    return matches


#: On PostgreSQL, the algorithms whose ratings are stored in each shape (TrueSkill's mean
#: and deviation, as the Weng-Lin family's; Elo's mean alone; Glicko-2's with volatility).
STORED_SHAPES = ("trueskill", "elo", "glicko2")


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_extreme_ratings_through_the_api(
    app_client: TestClient, database_url: str, algorithm: str
) -> None:
    if database_url.startswith("postgresql") and algorithm not in STORED_SHAPES:
        pytest.skip("the same storage as TrueSkill's: run on SQLite")
    create_ladder(app_client, "x", algorithm=algorithm)
    bayesian = _bayesian(algorithm)
    rng = random.Random(algorithm)
    seeds = _seeds(algorithm)
    players = [f"p{n}" for n in range(64)]
    for n, player in enumerate(players):
        mu, sigma, volatility = seeds[n] if n < len(seeds) else rng.choice(seeds)
        body: dict[str, float] = {"mu": mu}
        if bayesian:
            body["sigma"] = sigma
        if volatility is not None:
            body["volatility"] = volatility
        response = app_client.put(f"/v1/ladders/x/players/{player}", json=body)
        assert response.status_code == 200, response.text

    applied = refused = 0
    volatile = _volatilities(algorithm) != [None]
    for body in _extreme_matches(rng, players, volatile):
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
                    _check_volatility(player["after"].get("volatility"), algorithm)
        else:
            refused += 1
            assert response.status_code == 422, response.text
            assert response.headers["content-type"] == "application/problem+json"
            assert table_counts(database_url) == before
            assert (
                app_client.get("/v1/ladders/x/leaderboard", params={"limit": 1000}).json() == board
            )

    with get_engine(database_url).connect() as connection:
        stored = connection.execute(
            text("SELECT mu, sigma, conservative, volatility FROM ratings")
        ).all()
    for mu, sigma, conservative, volatility in stored:
        assert math.isfinite(mu) and math.isfinite(conservative)
        assert (sigma is None) if not bayesian else (math.isfinite(sigma) and sigma > 0)
        _check_volatility(volatility, algorithm)
    # What the reads show is finite too.
    board = app_client.get("/v1/ladders/x/leaderboard", params={"limit": 1000}).json()
    assert len(board["entries"]) == len(players)
    assert all(math.isfinite(x) for x in _numbers(board))
    for player in players[:9]:
        history = app_client.get(f"/v1/ladders/x/players/{player}/history").json()
        assert history["entries"]
        assert all(math.isfinite(x) for x in _numbers(history))
    report(
        f"numeric_extremes[{algorithm},{database_url.split(':')[0]}]",
        applied=applied,
        refused=refused,
    )


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_extreme_ratings_through_the_core(algorithm: str) -> None:
    model = make_model(algorithm)
    bayesian = _bayesian(algorithm)
    rng = random.Random(algorithm)
    seeds = [
        Rating(mu, sigma if bayesian else 0.0)
        if volatility is None
        else VolatileRating(mu, sigma, volatility)
        for mu, sigma, volatility in _seeds(algorithm)
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
        if bayesian:
            assert all(r.sigma > 0 for team in new for r in team)
        for team in new:
            for r in team:
                _check_volatility(r.volatility, algorithm)
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
    ("volatility", 0.0),
    ("volatility", -1.0),
    ("volatility", float("inf")),
]


HISTORY_BAD_VALUES = [
    ("mu_before", float("inf")),
    ("mu_after", float("-inf")),
    ("sigma_before", 0.0),
    ("sigma_after", -1.0),
    ("sigma_after", float("-inf")),
    ("volatility_before", 0.0),
    ("volatility_after", float("inf")),
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
