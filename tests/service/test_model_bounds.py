"""A model never accepts what it then refuses: on every algorithm, at the ends of every
parameter's range, with seeds at the ends of theirs and matches millennia apart, every
match is recorded, every player can be asked about, and every recorded match can be voided
and the ladder rebuilt (no 422 for a rating the model itself produced)."""

from __future__ import annotations

import random
from typing import Any

import pytest
from fastapi.testclient import TestClient

from app.rating.params import LADDER_PARAMETERS, Parameter
from app.rating.registry import ALGORITHMS, parameters

#: Played-at times at the ends of what the API takes, so time away is at its largest.
DATES = ("0001-01-01T00:00:00Z", "9999-12-31T00:00:00Z", "0001-01-02T00:00:00Z")
#: Seeds at the ends of the seeded range: (player, mu, sigma).
SEEDS = (("alice", 1e9, 1e-6), ("bob", -1e9, 1e6), ("carol", 1e9, 1e6), ("dave", -1e9, 1e-6))
PLAYERS = ("alice", "bob", "carol", "dave", "eve")
#: Parameters that widen a rating or move it further per match.
GROWTH = ("tau_per_day", "deviation_per_day", "tau", "k_factor", "deviation", "sigma")


def _numeric(algorithm: str) -> list[Parameter]:
    table = parameters(algorithm) + (() if algorithm in ("elo", "glicko2") else LADDER_PARAMETERS)
    return [p for p in table if not p.choices and not p.boolean and p.name != "margin"]


def _configs(algorithm: str) -> list[dict[str, float]]:
    """Each numeric parameter at the top of its range, then every growth one at once."""
    specs = _numeric(algorithm)
    out: list[dict[str, float]] = [
        {p.name: p.high * (1 - 1e-9) if p.high_open else p.high} for p in specs if p.high < 1e300
    ]
    out.append({p.name: p.high for p in specs if p.name in GROWTH})
    return out


def _play(client: TestClient, ladder: str, algorithm: str, rng: random.Random) -> list[str]:
    for player, mu, sigma in SEEDS:
        body = {"mu": mu} if algorithm == "elo" else {"mu": mu, "sigma": sigma}
        response = client.put(f"/v1/ladders/{ladder}/players/{player}", json=body)
        assert response.status_code == 200, response.text
    recorded = []
    for n in range(9):
        a, b, c = rng.sample(PLAYERS, 3)
        body: dict[str, Any] = {
            "match_id": f"m{n}",
            "teams": [[a, c], [b]] if n % 3 == 2 else [[a], [b]],
            "played_at": DATES[n % len(DATES)],
        }
        if n % 4 == 3:
            body["ranks"] = [1, 1]
        response = client.post(f"/v1/ladders/{ladder}/matches", json=body)
        assert response.status_code == 201, (ladder, body, response.text)
        recorded.append(body["match_id"])
    return recorded


#: On PostgreSQL, the algorithms whose ratings are stored in each shape (TrueSkill's mean
#: and deviation, as the Weng-Lin family's; Elo's mean alone; Glicko-2's with volatility):
#: the others rate the same on both databases, which the SQLite run shows.
STORED_SHAPES = ("trueskill", "elo", "glicko2")


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_every_result_can_be_rated_again(
    client: TestClient, database_url: str, algorithm: str
) -> None:
    if database_url.startswith("postgresql") and algorithm not in STORED_SHAPES:
        pytest.skip("the same storage as TrueSkill's: run on SQLite")
    rng = random.Random(algorithm)
    ladders = 0
    for n, params in enumerate(_configs(algorithm)):
        ladder = f"l{n}"
        created = client.post(
            "/v1/ladders", json={"id": ladder, "algorithm": algorithm, "params": params}
        )
        if created.status_code == 422:  # parameters that bound each other (Elo's k <= scale)
            continue
        assert created.status_code == 201, (params, created.text)
        ladders += 1
        recorded = _play(client, ladder, algorithm, rng)
        for player in PLAYERS:
            asked = client.post(f"/v1/ladders/{ladder}/quality", json={"teams": [[player], ["x"]]})
            assert asked.status_code == 200, (params, player, asked.text)
        split = client.post(f"/v1/ladders/{ladder}/matchmaking", json={"players": list(PLAYERS)})
        assert split.status_code == 200, (params, split.text)
        for match_id in recorded[:3]:
            voided = client.delete(f"/v1/ladders/{ladder}/matches/{match_id}")
            assert voided.status_code == 200, (params, match_id, voided.text)
        rebuilt = client.patch(
            f"/v1/ladders/{ladder}", json={"params": {**params, "advantage": 0.5}, "rebuild": True}
        )
        assert rebuilt.status_code == 200, (params, rebuilt.text)
    assert ladders >= 4
