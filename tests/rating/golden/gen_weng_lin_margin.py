"""Write weng_lin_margin.json: the five Weng-Lin models with a margin of victory, from the
``openskill`` package.

    .venv/bin/python -m tests.rating.golden.gen_weng_lin_margin

For each of ``openskill.models.PlackettLuce``, ``BradleyTerryFull``, ``BradleyTerryPart``,
``ThurstoneMostellerFull`` and ``ThurstoneMostellerPart``, built with a ``margin``: the
sequences of ``gen_plackett_luce`` (a ladder of players rating random matches in turn),
every match given with scores, so the margin takes part. The scores are drawn so that the
differences fall below the margin, between it and (e - 1) margin (a factor below 1) and
far beyond it, with ties; partial play and ``limit_sigma`` have a sequence each, and the
partial-pairing models one more with ``window_size`` 2. The files of the models without
a margin (``gen_plackett_luce``, ``gen_weng_lin``) are not touched.

Thurstone-Mosteller only: a match is redrawn when a comparison reaches the tails where
openskill's normal distribution function loses its digits (``gen_weng_lin``'s rule), here
with the standardised difference divided by openskill's margin factor of the pair, as
openskill compares it.
"""

from __future__ import annotations

import json
import math
import random
from pathlib import Path
from statistics import NormalDist
from typing import Any

from openskill import models

from tests.rating.golden.gen_plackett_luce import _sequence
from tests.rating.golden.gen_weng_lin import DRAW_MASS, TAIL

OUT = Path(__file__).with_name("weng_lin_margin.json")
#: (openskill class name, seed, factor of c_iq in openskill's Thurstone-Mosteller
#: comparisons or None, partial pairing)
MODELS = (
    ("PlackettLuce", 20110201, None, False),
    ("BradleyTerryFull", 20110202, None, False),
    ("BradleyTerryPart", 20110203, None, True),
    ("ThurstoneMostellerFull", 20110204, 1.0, False),
    ("ThurstoneMostellerPart", 20110205, 2.0, True),
)
#: Scores of a team: goals and points, up to 16 margins of 1.5 apart.
SCORES = (0, 1, 2, 3, 4, 5, 7, 10, 14, 24)

_PHI = NormalDist().cdf


def _scores(rng: random.Random, k: int, tie_rate: float) -> dict[str, Any]:
    """Every team a score; a team ties an earlier one with probability ``tie_rate``."""
    scores: list[int] = []
    for n in range(k):
        if n and rng.random() < tie_rate:
            scores.append(rng.choice(scores))
        else:
            scores.append(rng.choice(SCORES))
    return {"scores": scores}


def _factor(a: float, b: float, margin: float) -> float:
    """openskill's margin factor of two scores: log(1 + D / margin) past the margin."""
    d = abs(a - b)
    return math.log1p(d / margin) if d > margin and margin > 0.0 else 1.0


def _thurstone_tail(factor: float) -> Any:
    def skip(model: Any, teams: list[list[Any]], outcome: dict[str, Any]) -> bool:
        tau2 = model.tau * model.tau
        theta = [sum(p.mu for p in team) for team in teams]
        var = [sum(p.sigma * p.sigma + tau2 for p in team) for team in teams]
        scores = outcome["scores"]
        for i in range(len(teams)):
            for q in range(i + 1, len(teams)):
                c = factor * math.sqrt(var[i] + var[q] + 2 * model.beta**2)
                x = abs(theta[i] - theta[q]) / c / _factor(scores[i], scores[q], model.margin)
                t = model.epsilon / c
                if x + t > TAIL:
                    return True
                if scores[i] == scores[q] and _PHI(t - x) - _PHI(-t - x) < DRAW_MASS:
                    return True
        return False

    return skip


def sequences(rng: random.Random, oracle: Any, skip: Any, partial: bool) -> list[dict[str, Any]]:
    """The margin sequences of one model."""
    options: dict[str, Any] = {"oracle": oracle, "skip": skip, "outcomes": _scores}
    every = ["duel", "teams", "uneven", "ffa"]
    found = [
        _sequence(rng, "duels", {"margin": 1.0}, ["duel"], 150, 24, 0.15, 0.0, **options),
        _sequence(rng, "teams", {"margin": 2.0}, ["teams", "uneven"], 150, 40, 0.2, 0.0, **options),
        _sequence(rng, "free_for_all", {"margin": 3.0}, ["ffa"], 150, 48, 0.3, 0.0, **options),
        _sequence(rng, "partial_play", {"margin": 1.5}, every, 150, 48, 0.2, 1.0, **options),
        _sequence(
            rng,
            "limit_sigma",
            {"margin": 0.5, "limit_sigma": True, "tau": 1.0},
            every,
            100,
            48,
            0.2,
            0.3,
            **options,
        ),
    ]
    if partial:
        found.append(
            _sequence(
                rng,
                "window_2",
                {"margin": 2.0, "window_size": 2},
                ["ffa"],
                100,
                48,
                0.2,
                0.3,
                **options,
            )
        )
    return found


def main() -> None:
    out: dict[str, Any] = {}
    for name, seed, factor, partial in MODELS:
        oracle = getattr(models, name)
        skip = None if factor is None else _thurstone_tail(factor)
        out[name] = sequences(random.Random(seed), oracle, skip, partial)
    OUT.write_text(json.dumps({"oracle": "openskill.models", "models": out}) + "\n")
    n = sum(len(s["matches"]) for found in out.values() for s in found)
    print(f"wrote {n} matches of {len(out)} models to {OUT}")


if __name__ == "__main__":
    main()
