"""Write the golden files of the other Weng-Lin models from the ``openskill`` package.

    .venv/bin/python -m tests.rating.golden.gen_weng_lin

One file per model (``bradley_terry_full.json`` ...), each holding the sequences of
``gen_plackett_luce`` (the same shapes, outcomes, ties, scores, partial play and
parameter sets, drawn with the model's own seed) with ``openskill.models.<Name>`` as the
oracle, and one more sequence with ``limit_sigma`` on. The same two openskill behaviours
shape the outcomes (whole-number ranks; weights passed only when some weight differs
from 1), and the same degenerate case is redrawn.

Thurstone-Mosteller only: a match is redrawn when one of its comparisons reaches the
tails where openskill's normal distribution function loses its digits or its draw
function switches to a straight line (``app.rating.thurstone_mosteller``): a standardised
difference |x| + t above ``TAIL`` or a tie whose draw mass is below ``DRAW_MASS``. The
comparisons are written from openskill's definitions (c_iq over the teams' sums after
the dynamics, doubled in the partial model), so the oracle decides, not the code tested.
"""

from __future__ import annotations

import json
import math
import random
from pathlib import Path
from statistics import NormalDist
from typing import Any

from openskill import models

from tests.rating.golden.gen_plackett_luce import _sequence, sequences

HERE = Path(__file__).parent
#: (openskill class name, file, seed, factor of c_iq in openskill's comparisons)
MODELS = (
    ("BradleyTerryFull", "bradley_terry_full.json", 20110102, None),
    ("BradleyTerryPart", "bradley_terry_part.json", 20110103, None),
    ("ThurstoneMostellerFull", "thurstone_mosteller_full.json", 20110104, 1.0),
    ("ThurstoneMostellerPart", "thurstone_mosteller_part.json", 20110105, 2.0),
)
#: Largest |x| + t of a Thurstone-Mosteller comparison kept: openskill's Phi(-4) is off by
#: a relative 4e-12 (by 4e-11 at -5, by 2e-6 at -7).
TAIL = 4.0
#: Smallest draw mass Phi(t - |x|) - Phi(-t - |x|) of a tie kept (openskill's cut-off is 1e-5).
DRAW_MASS = 1e-4

_PHI = NormalDist().cdf


def _thurstone_tail(factor: float) -> Any:
    def skip(model: Any, teams: list[list[Any]], outcome: dict[str, Any]) -> bool:
        tau2 = model.tau * model.tau
        theta = [sum(p.mu for p in team) for team in teams]
        var = [sum(p.sigma * p.sigma + tau2 for p in team) for team in teams]
        k = len(teams)
        if "ranks" in outcome:
            ranks = outcome["ranks"]
        elif "scores" in outcome:
            ranks = [-s for s in outcome["scores"]]
        else:
            ranks = list(range(k))
        for i in range(k):
            for q in range(i + 1, k):
                c = factor * math.sqrt(var[i] + var[q] + 2 * model.beta**2)
                x = abs(theta[i] - theta[q]) / c
                t = model.epsilon / c
                if x + t > TAIL:
                    return True
                if ranks[i] == ranks[q] and _PHI(t - x) - _PHI(-t - x) < DRAW_MASS:
                    return True
        return False

    return skip


def main() -> None:
    for name, file_name, seed, factor in MODELS:
        oracle = getattr(models, name)
        skip = None if factor is None else _thurstone_tail(factor)
        rng = random.Random(seed)
        found = sequences(rng, oracle=oracle, skip=skip)
        found.append(
            _sequence(
                rng,
                "limit_sigma",
                {"limit_sigma": True, "tau": 1.0},
                ["duel", "teams", "uneven", "ffa"],
                250,
                48,
                0.2,
                0.3,
                oracle=oracle,
                skip=skip,
            )
        )
        out = HERE / file_name
        out.write_text(
            json.dumps({"oracle": f"openskill.models.{name}", "sequences": found}) + "\n"
        )
        n = sum(len(s["matches"]) for s in found)
        print(f"wrote {n} matches in {len(found)} sequences to {out}")


if __name__ == "__main__":
    main()
