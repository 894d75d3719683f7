"""Write plackett_luce.json: expected Plackett-Luce updates from the ``openskill`` package.

    .venv/bin/python -m tests.rating.golden.gen_plackett_luce

The oracle is ``openskill.models.PlackettLuce`` built with the sequence's parameters and
no other options. Each sequence is a ladder of players who start at the prior and play a
few hundred random matches; every match records the ratings that went in, the outcome
and the ratings openskill returns, which the next matches then start from. The tests
replay each match on its recorded input and compare to 1e-9.

Two openskill behaviours shape the outcomes drawn here (both documented on
``PlackettLuce.rate``): ranks are whole numbers (openskill truncates fractional ranks),
and weights are passed only when some weight differs from 1 (openskill rescales even
all-one weights, giving one-player teams the weight 2). One case is redrawn: every team
tied with exactly equal team means and partial play. There the true Omega_i is exactly 0
and openskill picks between multiplying and dividing by the weight on the sign of a
rounding residue, so no independent computation can agree with it bit for bit.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

from openskill.models import PlackettLuce

OUT = Path(__file__).with_name("plackett_luce.json")
SEED = 20110101


def _shape(rng: random.Random, kind: str) -> list[int]:
    """Team sizes for one match of the given kind."""
    if kind == "duel":
        return [1, 1]
    if kind == "teams":
        n = rng.randint(2, 5)
        return [n, n]
    if kind == "uneven":
        return [rng.randint(1, 5) for _ in range(rng.randint(2, 4))]
    if kind == "ffa":
        return [rng.randint(1, 2) for _ in range(rng.randint(3, 16))]
    raise ValueError(kind)


def _outcome(rng: random.Random, k: int, tie_rate: float) -> dict[str, Any]:
    """Ranks with ties anywhere, scores, or the listed order."""
    roll = rng.random()
    if roll < 0.15:
        return {}
    if roll < 0.35:
        return {"scores": [rng.choice([0, 1, 2, 3, 5, 8, 13]) for _ in range(k)]}
    ranks: list[int] = []
    order = list(range(k))
    rng.shuffle(order)
    rank = rng.randint(0, 3)
    position = [0] * k
    for n, j in enumerate(order):
        if n and rng.random() >= tie_rate:
            rank += rng.randint(1, 3)
        position[j] = rank
    ranks = position
    return {"ranks": ranks}


def _weights(rng: random.Random, sizes: list[int]) -> list[list[float]] | None:
    """Partial play with at least one weight below 1, else None."""
    ws = [
        [rng.choice([1.0, 1.0, 0.0, 0.5, round(rng.random(), 6)]) for _ in range(n)] for n in sizes
    ]
    if all(w == 1.0 for row in ws for w in row):
        ws[rng.randrange(len(ws))][0] = 0.25
    return ws


def _degenerate(teams: list[list[Any]], outcome: dict[str, Any], weights: Any) -> bool:
    """Every team tied with equal team means under partial play (see the module doc)."""
    if weights is None:
        return False
    values = outcome.get("ranks") or outcome.get("scores")
    if values is None or len(set(values)) != 1:
        return False
    return len({sum(p.mu for p in team) for team in teams}) == 1


def _sequence(
    rng: random.Random,
    name: str,
    params: dict[str, Any],
    kinds: list[str],
    n_matches: int,
    n_players: int,
    tie_rate: float,
    weight_rate: float,
    spread: bool = False,
    oracle: Any = PlackettLuce,
    skip: Callable[[Any, list[list[Any]], dict[str, Any]], bool] | None = None,
    outcomes: Callable[[random.Random, int, float], dict[str, Any]] = _outcome,
) -> dict[str, Any]:
    """``spread``: players start with scattered means and log-uniform sigmas in [0.3, 80].

    ``oracle``: the openskill model class; ``skip(model, teams, outcome)`` redraws a match
    the oracle cannot be compared on (see ``gen_weng_lin``); ``outcomes(rng, k, tie_rate)``
    draws a match's outcome (``gen_weng_lin_margin`` gives every match scores).
    """
    model = oracle(**params)
    if spread:
        pool = [
            model.rating(mu=rng.uniform(-20.0, 20.0), sigma=0.3 * (80.0 / 0.3) ** rng.random())
            for _ in range(n_players)
        ]
    else:
        pool = [model.rating() for _ in range(n_players)]
    matches: list[dict[str, Any]] = []
    while len(matches) < n_matches:
        sizes = _shape(rng, rng.choice(kinds))
        if sum(sizes) > n_players:
            continue
        chosen = rng.sample(range(n_players), sum(sizes))
        ids: list[list[int]] = []
        start = 0
        for n in sizes:
            ids.append(chosen[start : start + n])
            start += n
        teams = [[pool[i] for i in team] for team in ids]
        outcome = outcomes(rng, len(sizes), tie_rate)
        weights = _weights(rng, sizes) if rng.random() < weight_rate else None
        if _degenerate(teams, outcome, weights):
            continue
        if skip is not None and skip(model, teams, outcome):
            continue
        given = [[[p.mu, p.sigma] for p in team] for team in teams]
        result = model.rate(teams, weights=weights, **outcome)
        for team_ids, team in zip(ids, result, strict=True):
            for i, p in zip(team_ids, team, strict=True):
                pool[i] = model.rating(mu=p.mu, sigma=p.sigma)
        match: dict[str, Any] = {"teams": given, **outcome}
        if weights is not None:
            match["weights"] = weights
        match["expected"] = [[[p.mu, p.sigma] for p in team] for team in result]
        matches.append(match)
    return {"name": name, "params": params, "matches": matches}


def sequences(rng: random.Random, **options: Any) -> list[dict[str, Any]]:
    """The golden sequences of a Weng-Lin model (``options`` go to ``_sequence``)."""
    defaults: dict[str, Any] = {}
    return [
        _sequence(rng, "duels", defaults, ["duel"], 300, 24, 0.1, 0.0, **options),
        _sequence(rng, "team_games", defaults, ["teams"], 250, 40, 0.1, 0.0, **options),
        _sequence(rng, "uneven_teams", defaults, ["uneven"], 250, 40, 0.2, 0.0, **options),
        _sequence(rng, "free_for_all", defaults, ["ffa"], 250, 48, 0.3, 0.0, **options),
        _sequence(
            rng,
            "partial_play",
            defaults,
            ["duel", "teams", "uneven", "ffa"],
            250,
            48,
            0.2,
            1.0,
            **options,
        ),
        _sequence(
            rng,
            "elo_scale_params",
            {"mu": 1500.0, "sigma": 350.0, "beta": 200.0, "tau": 3.0, "kappa": 1e-3},
            ["duel", "teams", "uneven", "ffa"],
            250,
            48,
            0.2,
            0.4,
            **options,
        ),
        _sequence(
            rng,
            "kappa_floor",
            {"mu": 0.0, "sigma": 40.0, "beta": 0.5, "tau": 2.0, "kappa": 0.9},
            ["ffa"],
            200,
            48,
            0.2,
            0.3,
            spread=True,
            **options,
        ),
    ]


def main() -> None:
    rng = random.Random(SEED)
    sequences_ = sequences(rng)
    OUT.write_text(
        json.dumps({"oracle": "openskill.models.PlackettLuce", "sequences": sequences_}) + "\n"
    )
    n = sum(len(s["matches"]) for s in sequences_)
    print(f"wrote {n} matches in {len(sequences_)} sequences to {OUT}")


if __name__ == "__main__":
    main()
