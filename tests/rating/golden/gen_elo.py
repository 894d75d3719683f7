"""Write elo.json: expected Elo-family updates from a slow, straightforward reference.

    .venv/bin/python -m tests.rating.golden.gen_elo

The reference below is written from the formulas of ``rating-models.md`` section 2 and
Kerby's note, independently of ``app.rating.elo``: plain loops over players and over every
order of tied teams, probabilities as written (10 ** x, statistics.NormalDist), the
Plackett-Luce gradient from its stage-by-stage definition, and the Thurstonian gradient
by adaptive quadrature (conditioning on one place, differentiating under the integral
sign) instead of forward-backward integration on a grid. Ratings stay within a few
hundred points of each other, where none of this overflows or underflows.

Logistic "full" cases with ties of five to eight teams check the exact average over all
orders of a large tie (computed in ``app.rating.elo`` from subsets, here by enumerating
every order).

Each case records the model parameters, the teams' ratings, the outcome (ranks, or none
for "listed winner first"), the partial-play weights and the expected new ratings; the
tests compare to 1e-9.
"""

from __future__ import annotations

import itertools
import json
import math
import random
from pathlib import Path
from statistics import NormalDist
from typing import Any

from scipy import integrate

OUT = Path(__file__).with_name("elo.json")
SEED = 1959
N = NormalDist()
VARIANTS = [
    (model, rule, multiplayer)
    for model in ("logistic", "gaussian")
    for rule in ("classic", "mle")
    for multiplayer in ("pairwise_mean", "pairwise_sum", "full")
]


# ------------------------------------------------------------------ two players


def p_win(params: dict[str, Any], gap: float) -> float:
    """P(i beats j) for r_i - r_j = gap."""
    if params["model"] == "logistic":
        return 1.0 / (1.0 + 10.0 ** (-gap / params["scale"]))
    return N.cdf(gap / (math.sqrt(2.0) * params["beta"]))


def duel(params: dict[str, Any], score: float, gap: float) -> float:
    """Player i's change from one duel with outcome score S (1, 1/2, 0)."""
    k = params["k_factor"]
    p = p_win(params, gap)
    likelihood = params["rule"] == "mle" or params["multiplayer"] == "full"
    if params["model"] == "logistic" or not likelihood:
        return k * (score - p)
    # eta * d/dr_i [S log P + (1 - S) log(1 - P)], eta = K sqrt(pi) beta / 2.
    beta = params["beta"]
    z = gap / (math.sqrt(2.0) * beta)
    dp = N.pdf(z) / (math.sqrt(2.0) * beta)  # dP/dr_i
    grad = score * dp / p - (1.0 - score) * dp / (1.0 - p)
    return k * math.sqrt(math.pi) * beta / 2.0 * grad


# ------------------------------------------------------------------ pairwise


def pairwise(
    params: dict[str, Any], teams: list[list[float]], ranks: list[float], weights: Any
) -> list[list[float]]:
    out = []
    total_players = sum(len(t) for t in teams)
    for j, team in enumerate(teams):
        row = []
        for i, r in enumerate(team):
            w_i = 1.0 if weights is None else weights[j][i]
            acc = 0.0
            for k, other in enumerate(teams):
                if k == j:
                    continue
                score = 1.0 if ranks[j] < ranks[k] else 0.0 if ranks[j] > ranks[k] else 0.5
                for o, s in enumerate(other):
                    w_o = 1.0 if weights is None else weights[k][o]
                    acc += w_i * w_o * duel(params, score, r - s)
            if params["multiplayer"] == "pairwise_mean":
                acc /= total_players - len(team)
            row.append(r + acc)
        out.append(row)
    return out


# ------------------------------------------------------------------ whole order


def orders(ranks: list[float]) -> list[list[int]]:
    """Every order (winner first) consistent with the ranks."""
    return [
        list(p)
        for p in itertools.permutations(range(len(ranks)))
        if all(ranks[p[a]] <= ranks[p[a + 1]] for a in range(len(p) - 1))
    ]


def plackett_luce_grad(rho: list[float], order: list[int]) -> list[float]:
    """d log P(order) / d rho, P = prod over stages of e^rho_chosen / sum of the remaining."""
    grad = [0.0] * len(rho)
    for stage in range(len(order)):
        remaining = order[stage:]
        denominator = sum(math.exp(rho[x]) for x in remaining)
        grad[order[stage]] += 1.0
        for x in remaining:
            grad[x] -= math.exp(rho[x]) / denominator
    return grad


def _quad(f: Any, lo: float, hi: float) -> float:
    return integrate.quad(f, lo, hi, epsabs=0.0, epsrel=1e-13, limit=200)[0]


def thurstone_grad(m: list[float], order: list[int]) -> list[float]:
    """d log P(order) / d m for X ~ N(m, 1), up to four entrants, by quadrature.

    Two: the closed form through Phi. Three or four: condition on the second place x;
    P = int pdf(x - m_b) Phi(m_a - x) B(x) dx, B(x) = Phi(x - m_c) for three entrants and
    int_{-inf}^x pdf(y - m_c) Phi(y - m_d) dy for four; each derivative differentiates
    one factor under the integral sign.
    """
    pdf, cdf = N.pdf, N.cdf
    grad = [0.0] * len(m)
    if len(order) == 2:
        a, b = order
        z = (m[a] - m[b]) / math.sqrt(2.0)
        v = pdf(z) / cdf(z) / math.sqrt(2.0)
        grad[a], grad[b] = v, -v
        return grad
    a, b = order[0], order[1]
    lo, hi = min(m) - 12.0, max(m) + 12.0
    if len(order) == 3:
        c = order[2]
        below = {None: lambda x: cdf(x - m[c]), c: lambda x: -pdf(x - m[c])}
    else:
        c, d = order[2], order[3]
        below = {
            None: lambda x: _quad(lambda y: pdf(y - m[c]) * cdf(y - m[d]), lo - 12.0, x),
            c: lambda x: _quad(lambda y: (y - m[c]) * pdf(y - m[c]) * cdf(y - m[d]), lo - 12.0, x),
            d: lambda x: -_quad(lambda y: pdf(y - m[c]) * pdf(y - m[d]), lo - 12.0, x),
        }
    b_fn = below[None]
    p = _quad(lambda x: pdf(x - m[b]) * cdf(m[a] - x) * b_fn(x), lo, hi)
    grad[a] = _quad(lambda x: pdf(x - m[b]) * pdf(m[a] - x) * b_fn(x), lo, hi) / p
    grad[b] = _quad(lambda x: (x - m[b]) * pdf(x - m[b]) * cdf(m[a] - x) * b_fn(x), lo, hi) / p
    for k, fn in below.items():
        if k is not None:
            grad[k] = _quad(lambda x, fn=fn: pdf(x - m[b]) * cdf(m[a] - x) * fn(x), lo, hi) / p
    return grad


def full(
    params: dict[str, Any], teams: list[list[float]], ranks: list[float], weights: Any
) -> list[list[float]]:
    k = params["k_factor"]
    team_rating, played = [], []
    for j, team in enumerate(teams):
        ws = [1.0] * len(team) if weights is None else weights[j]
        total = sum(ws)
        played.append(total)
        team_rating.append(
            sum(w * r for w, r in zip(ws, team, strict=True)) / total
            if total > 0
            else sum(team) / len(team)
        )
    active = [j for j in range(len(teams)) if played[j] > 0]
    steps = {j: 0.0 for j in range(len(teams))}
    if len(active) >= 2:
        consistent = orders([ranks[j] for j in active])
        if params["model"] == "logistic":
            rho = [team_rating[j] * math.log(10.0) / params["scale"] for j in active]
            grads = [plackett_luce_grad(rho, o) for o in consistent]
            scale = k
        else:
            m = [team_rating[j] / params["beta"] for j in active]
            grads = [thurstone_grad(m, o) for o in consistent]
            scale = k * math.sqrt(math.pi) / 2.0
        for x, j in enumerate(active):
            steps[j] = scale * sum(g[x] for g in grads) / len(grads)
    out = []
    for j, team in enumerate(teams):
        ws = [1.0] * len(team) if weights is None else weights[j]
        if played[j] == 0:
            out.append(list(team))
        else:
            out.append(
                [r + len(team) * steps[j] * w / played[j] for r, w in zip(team, ws, strict=True)]
            )
    return out


def reference(
    params: dict[str, Any], teams: list[list[float]], ranks: list[float] | None, weights: Any
) -> list[list[float]]:
    ranks = list(range(len(teams))) if ranks is None else ranks
    if params["multiplayer"] == "full":
        return full(params, teams, ranks, weights)
    return pairwise(params, teams, ranks, weights)


# ------------------------------------------------------------------ cases


def cases() -> list[dict[str, Any]]:
    rng = random.Random(SEED)
    out = []
    shapes = [[1, 1], [1, 1], [2, 2], [1, 1, 1], [2, 1, 2], [1, 1, 1, 1], [3, 3], [2, 2, 2, 2]]
    for model, rule, multiplayer in VARIANTS:
        for shape in shapes:
            params = {
                "initial": 1500.0,
                "k_factor": rng.choice([16.0, 24.0, 32.0]),
                "model": model,
                "scale": rng.choice([400.0, 300.0]),
                "beta": rng.choice([200.0, 150.0]),
                "rule": rule,
                "multiplayer": multiplayer,
            }
            teams = [[round(rng.gauss(1500.0, 180.0), 3) for _ in range(n)] for n in shape]
            roll = rng.random()
            ranks = None if roll < 0.3 else [rng.randint(0, len(shape) - 1) for _ in shape]
            weights = None
            if rng.random() < 0.35:
                weights = [
                    [rng.choice([1.0, 1.0, 0.5, 0.25, 0.0]) for _ in range(n)] for n in shape
                ]
            out.append(
                {
                    "params": params,
                    "teams": teams,
                    "ranks": ranks,
                    "weights": weights,
                    "expected": reference(params, teams, ranks, weights),
                }
            )
    out.extend(large_ties())
    return out


def large_ties() -> list[dict[str, Any]]:
    """Logistic "full" with ties of five to eight teams: every consistent order enumerated.

    (Up to 8! = 40320 orders; the Gaussian model averages large ties over a design of
    orders instead of all of them, which this reference does not reproduce.)
    """
    rng = random.Random(SEED + 1)
    out = []
    outcomes = [
        ([1] * 7, [0] * 7),
        ([1] * 8, [1, 1, 0, 1, 1, 1, 1, 1]),
        ([1] * 8, [2, 0, 2, 1, 2, 0, 2, 2]),
        ([2, 1, 2, 1, 1, 2, 1], [1, 1, 0, 1, 1, 2, 1]),
    ]
    for shape, ranks in outcomes:
        params = {
            "initial": 1500.0,
            "k_factor": rng.choice([16.0, 24.0, 32.0]),
            "model": "logistic",
            "scale": rng.choice([400.0, 300.0]),
            "beta": 200.0,
            "rule": "classic",
            "multiplayer": "full",
        }
        teams = [[round(rng.gauss(1500.0, 180.0), 3) for _ in range(n)] for n in shape]
        weights = None
        if max(shape) > 1:
            weights = [[rng.choice([1.0, 0.5, 0.25]) for _ in range(n)] for n in shape]
        out.append(
            {
                "params": params,
                "teams": teams,
                "ranks": ranks,
                "weights": weights,
                "expected": reference(params, teams, [float(r) for r in ranks], weights),
            }
        )
    return out


def main() -> None:
    data = {"generator": "tests/rating/golden/gen_elo.py", "seed": SEED, "cases": cases()}
    OUT.write_text(json.dumps(data, indent=1) + "\n")
    print(f"wrote {len(data['cases'])} cases to {OUT}")


if __name__ == "__main__":
    main()
