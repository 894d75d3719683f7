"""Matchmaking: split a pool of players into k teams of equal size with the highest quality.

The objective is the model's own match quality, ``model.quality(teams)`` (the TrueSkill
paper's equation 7 generalised to k teams, ``rating-models.md`` section 1, "Match
quality": on team sums for TrueSkill and Plackett-Luce, on teams as single entrants rated
by their means for Elo, each the team model of the model's own win probabilities, so for
two teams the best split is the one whose win probabilities are nearest even). Team sizes
are fixed: with n players and k teams, n mod k teams have ceil(n / k) players and the rest
floor(n / k).

- Up to ``EXACT_MAX_PLAYERS`` players the search is exact: every partition of the pool
  into teams of those sizes is evaluated once (``canonical_partitions``: teams of equal
  size are interchangeable, so only one ordering of them is listed).
- Beyond, a heuristic: a snake draft seeded by rating (players by mu, highest first; equal
  mu by the smaller sigma, then by position in the pool), then local search by pairwise
  swaps between teams and, where sizes differ by one, moves of a player from a larger to a
  smaller team, each step taking the best improvement (with more than two teams, the best
  swap of each pair of teams that touches no team already changed), until none improves;
  then a few rounds of iterated local search (random perturbations from a fixed seed,
  ``SEARCH_SEED``), keeping the best. The answer is a function of the pool, the team
  count and the model.

For every model of the service the search ranks candidates by log q computed from team
sums with numpy (``GaussianObjective``: team sums; team means for Elo, and for Glicko-2
with a beta that follows the teams' deviations), so a pool of 256 takes well under a
second whatever the ladder's algorithm; any other model is searched through
``model.quality`` itself.
Either way the reported quality is ``model.quality`` of the returned split.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import numpy.typing as npt

from app.rating.base import Rating, RatingInputError, RatingModel

__all__ = [
    "EXACT_MAX_PLAYERS",
    "MAX_EXACT_PARTITIONS",
    "SEARCH_SEED",
    "GaussianObjective",
    "Split",
    "balanced_split",
    "canonical_partitions",
    "count_partitions",
    "default_kicks",
    "exact_split",
    "gaussian_objective",
    "heuristic_split",
    "snake_draft",
    "team_sizes",
]

#: Pools up to this many players are split exactly; larger ones by the heuristic.
EXACT_MAX_PLAYERS = 12
#: ``exact_split`` refuses a pool with more partitions than this (memory and time bound).
MAX_EXACT_PARTITIONS = 500_000
#: A local-search step must raise log q by more than this to count as an improvement, so
#: that rounding in the objective cannot make the search cycle.
IMPROVEMENT_EPS = 1e-12
#: The seed of the heuristic's perturbations (``heuristic_split``).
SEARCH_SEED = 0
#: Random swaps in one perturbation of iterated local search.
KICK_SWAPS = 2
#: Bounds on the rounds of iterated local search, and the work aimed at (``default_kicks``).
MIN_KICKS = 8
MAX_KICKS = 64
KICK_WORK = 1_000_000

#: Glicko-2's 3 / pi^2, of g(phi) = 1 / sqrt(1 + 3 phi^2 / pi^2).
_G3 = 3.0 / (math.pi * math.pi)

FloatArray = npt.NDArray[np.float64]
LabelArray = npt.NDArray[np.int8]


@dataclass(frozen=True)
class Split:
    """A split of the pool: ``teams[j]`` holds pool indices (ascending); larger teams come
    first, equal-size teams ordered by their first player. ``quality`` is
    ``model.quality`` of these teams; ``exact`` says whether it is the proven optimum."""

    teams: tuple[tuple[int, ...], ...]
    quality: float
    exact: bool


def team_sizes(players: int, teams: int) -> tuple[int, ...]:
    """The team sizes for ``players`` into ``teams``: equal, or differing by one (larger first)."""
    if isinstance(teams, bool) or not isinstance(teams, int) or teams < 2:
        raise RatingInputError("teams", f"need at least 2 teams, got {teams!r}")
    if players < teams:
        raise RatingInputError(
            "players", f"{players} players cannot make {teams} teams of at least one player"
        )
    q, r = divmod(players, teams)
    return (q + 1,) * r + (q,) * (teams - r)


def count_partitions(sizes: Sequence[int]) -> int:
    """How many ways to split sum(sizes) players into unlabelled teams of these sizes:
    n! / (prod size! * prod over distinct sizes of (teams of that size)!)."""
    total = math.factorial(sum(sizes))
    for size in sizes:
        total //= math.factorial(size)
    for size in set(sizes):
        total //= math.factorial(list(sizes).count(size))
    return total


@lru_cache(maxsize=64)
def _canonical_partitions(sizes: tuple[int, ...]) -> LabelArray:
    k = len(sizes)
    capacity = np.array(sizes)
    # A team that may be opened only once the team before it (of the same size) is open.
    follows = np.array([t > 0 and sizes[t - 1] == sizes[t] for t in range(k)])
    previous = np.maximum(np.arange(k) - 1, 0)
    labels = np.zeros((1, 0), dtype=np.int8)
    counts = np.zeros((1, k), dtype=np.int16)
    for _player in range(sum(sizes)):
        allowed = counts < capacity
        allowed &= ~follows | (counts > 0) | (counts[:, previous] > 0)
        rows, teams = np.nonzero(allowed)  # row-major: the table stays in lexicographic order
        labels = np.concatenate([labels[rows], teams[:, None].astype(np.int8)], axis=1)
        counts = counts[rows]
        counts[np.arange(rows.size), teams] += 1
    labels.setflags(write=False)
    return labels


@lru_cache(maxsize=64)
def _members(sizes: tuple[int, ...]) -> LabelArray:
    """Per row of the canonical table, the players ordered by team (stable)."""
    order = np.argsort(_canonical_partitions(sizes), axis=1, kind="stable")
    members: LabelArray = order.astype(np.int8)
    members.setflags(write=False)
    return members


def canonical_partitions(sizes: Sequence[int]) -> LabelArray:
    """Every partition of ``sum(sizes)`` players into teams of ``sizes``, exactly once.

    Row r gives the team (an index into ``sizes``) of each player; rows are in
    lexicographic order. Teams of equal size
    are interchangeable, so a team may receive its first player only once the team before
    it of the same size has one: player 0 always opens the first team of its size, and no
    permutation of equal-size teams is listed twice. The rows number
    ``count_partitions(sizes)``. ``sizes`` must list equal sizes next to each other.
    The array is shared (cached) and read-only.
    """
    return _canonical_partitions(tuple(int(s) for s in sizes))


# -- objectives --------------------------------------------------------------------------


@dataclass(frozen=True)
class GaussianObjective:
    """log q of the Gaussian team-sum quality from per-team sums, vectorised.

    With no partial play, team j of n_j players has B_j = beta^2 n_j, V_j = B_j + S_j
    (S_j the sum of sigma^2) and mean m_j = sum mu; ``quality.match_quality`` shows that
    equation 7 generalised is then

        log q = 1/2 [sum_j log(B_j / V_j) + log sum_j 1/B_j - log sum_j 1/V_j]
                - 1/2 sum_j (m_j - m_bar)^2 / V_j,   m_bar = (sum m_j / V_j) / sum 1/V_j,

    which for two teams is 1/2 log((B_1 + B_2)/(V_1 + V_2)) - (m_1 - m_2)^2 / (2 (V_1 + V_2)).
    ``mu`` and ``var`` are per player (var = sigma^2, 0 for Elo); ``beta2`` is beta^2.

    ``entrants`` (Elo): each team plays as one entrant rated by its mean R_j = m_j / n_j
    with performance N(R_j, beta^2) (``quality.entrant_quality``), so
    log q = -sum_j (R_j - R_bar)^2 / (2 beta^2) with R_bar the plain mean of the R_j.

    ``deviations`` (Glicko-2, with ``entrants``): the same entrants, with beta^2 itself a
    function of the teams (``Glicko2.quality``): beta^2 = ``beta2`` (1 + 3 phi_c^2 / pi^2),
    where ``var`` holds each player's phi^2 (internal scale), a team's phi^2 is its mean
    s_j / n_j, and phi_c^2 is their sum for two teams, twice their mean for more.
    """

    mu: FloatArray
    var: FloatArray
    beta2: float
    entrants: bool = False
    deviations: bool = False

    def entrant_beta2(self, phi2_total: FloatArray | float, k: int) -> FloatArray | float:
        """beta^2 of the entrants for the sum over the teams of their mean phi^2 (a
        constant but with ``deviations``)."""
        if not self.deviations:
            return self.beta2
        combined = phi2_total if k == 2 else 2.0 * phi2_total / k
        return self.beta2 * (1.0 + _G3 * combined)

    def log_quality(self, m: FloatArray, s: FloatArray, n: FloatArray) -> FloatArray:
        """log q for team sums along the last axis (m, s, n broadcast together)."""
        if self.entrants:
            r = m / n
            centred = r - r.mean(axis=-1, keepdims=True)
            beta2 = self.entrant_beta2((s / n).sum(axis=-1), m.shape[-1])
            entrant: FloatArray = -0.5 * (centred * centred).sum(axis=-1) / beta2
            return entrant
        b = self.beta2 * n
        v = b + s
        if m.shape[-1] == 2:
            vt = v[..., 0] + v[..., 1]
            d = m[..., 0] - m[..., 1]
            result: FloatArray = 0.5 * np.log((b[..., 0] + b[..., 1]) / vt) - 0.5 * d * d / vt
            return result
        inv_v = 1.0 / v
        sum_inv_v = inv_v.sum(axis=-1)
        m_bar = (m * inv_v).sum(axis=-1) / sum_inv_v
        quad = ((m - m_bar[..., None]) ** 2 * inv_v).sum(axis=-1)
        log_det = np.log(b / v).sum(axis=-1) + np.log((1.0 / b).sum(axis=-1)) - np.log(sum_inv_v)
        result = 0.5 * log_det - 0.5 * quad
        return result


def gaussian_objective(model: RatingModel, pool: Sequence[Rating]) -> GaussianObjective | None:
    """The team-sum objective when ``model.quality`` is the Gaussian form, else ``None``.

    TrueSkill and the Weng-Lin models: their ``beta`` and every player's sigma. Elo: its
    ``quality_beta``, sigma 0 and teams as entrants rated by their means (``Elo.quality``).
    Glicko-2: entrants rated by their mean ratings, with a beta that grows with the teams'
    deviations (``Glicko2.quality``). A subclass may redefine quality, so only these exact
    classes qualify.
    """
    from app.rating.bradley_terry import BradleyTerryFull, BradleyTerryPart
    from app.rating.elo import Elo
    from app.rating.glicko2 import SCALE, Glicko2
    from app.rating.plackett_luce import PlackettLuce
    from app.rating.thurstone_mosteller import ThurstoneMostellerFull, ThurstoneMostellerPart
    from app.rating.trueskill import TrueSkill

    gaussian_team_sums = (
        TrueSkill,
        PlackettLuce,
        BradleyTerryFull,
        BradleyTerryPart,
        ThurstoneMostellerFull,
        ThurstoneMostellerPart,
    )
    mu = np.array([r.mu for r in pool], dtype=float)
    if type(model) in gaussian_team_sums:
        beta = float(model.params["beta"])
        var = np.array([r.sigma for r in pool], dtype=float) ** 2
    elif type(model) is Elo:
        beta = model.quality_beta
        return GaussianObjective(mu=mu, var=np.zeros(len(pool)), beta2=beta * beta, entrants=True)
    elif type(model) is Glicko2:
        phi = np.array([r.sigma for r in pool], dtype=float) / SCALE
        return GaussianObjective(
            mu=mu,
            var=phi * phi,
            beta2=4.0 * SCALE * SCALE / math.pi,
            entrants=True,
            deviations=True,
        )
    else:
        return None
    return GaussianObjective(mu=mu, var=var, beta2=beta * beta)


def _quality_of(model: RatingModel, pool: Sequence[Rating], labels: Sequence[int], k: int) -> float:
    teams: list[list[Rating]] = [[] for _ in range(k)]
    for player, team in enumerate(labels):
        teams[team].append(pool[player])
    return model.quality(teams)


def _finish(
    model: RatingModel, pool: Sequence[Rating], labels: Sequence[int], k: int, exact: bool
) -> Split:
    """The split for ``labels`` in canonical order, with ``model.quality`` of it."""
    members: list[list[int]] = [[] for _ in range(k)]
    for player, team in enumerate(labels):
        members[int(team)].append(player)
    ordered = sorted(members, key=lambda team: (-len(team), team[0]))
    quality = model.quality([[pool[i] for i in team] for team in ordered])
    return Split(teams=tuple(tuple(team) for team in ordered), quality=quality, exact=exact)


# -- exact search ------------------------------------------------------------------------


def exact_split(model: RatingModel, pool: Sequence[Rating], teams: int) -> Split:
    """The best split of ``pool`` into ``teams`` teams, by evaluating every partition.

    Among partitions whose quality ties with the best (within a relative
    ``IMPROVEMENT_EPS``, the rounding of the objective) the first in
    ``canonical_partitions`` order wins, so that equal ratings split in pool order.
    Raises ``RatingInputError`` for a pool the model rejects, fewer players than teams,
    or more than ``MAX_EXACT_PARTITIONS`` partitions.
    """
    sizes = team_sizes(len(pool), teams)
    count = count_partitions(sizes)
    if count > MAX_EXACT_PARTITIONS:
        raise RatingInputError("players", f"{count} partitions are too many for an exact search")
    initial = snake_draft(pool, teams)
    _quality_of(model, pool, initial, teams)  # the model's own checks of every rating
    table = canonical_partitions(sizes)
    objective = gaussian_objective(model, pool)
    if objective is None:
        values = np.array(
            [_quality_of(model, pool, row.tolist(), teams) for row in table], dtype=float
        )
    else:
        # Row r of ``members`` lists team 0's players, then team 1's, ...: team sums are
        # sums over fixed column ranges.
        members = _members(sizes)
        starts = np.cumsum((0, *sizes[:-1]))
        m = np.add.reduceat(objective.mu[members], starts, axis=1)
        s = np.add.reduceat(objective.var[members], starts, axis=1)
        values = objective.log_quality(m, s, np.array(sizes, dtype=float))
    if objective is None:
        top = float(values.max())
        tied = values >= top - IMPROVEMENT_EPS * top
    else:
        # log q: splits within rounding of the best are ties.
        tied = values >= float(values.max()) - IMPROVEMENT_EPS
    best = int(np.flatnonzero(tied)[0])
    return _finish(model, pool, table[best].tolist(), teams, exact=True)


# -- heuristic ---------------------------------------------------------------------------


def snake_draft(pool: Sequence[Rating], teams: int) -> list[int]:
    """Team labels from a snake draft: players by mu, highest first (equal mu: smaller
    sigma first, then pool position); even rounds pick for teams 0..k-1, odd rounds back
    from k-1 to 0. Team sizes come out equal or differing by one."""
    team_sizes(len(pool), teams)
    order = sorted(range(len(pool)), key=lambda i: (-pool[i].mu, pool[i].sigma, i))
    labels = [0] * len(pool)
    for pick, player in enumerate(order):
        rnd, slot = divmod(pick, teams)
        labels[player] = slot if rnd % 2 == 0 else teams - 1 - slot
    return labels


def heuristic_split(
    model: RatingModel,
    pool: Sequence[Rating],
    teams: int,
    *,
    kicks: int | None = None,
    seed: int = SEARCH_SEED,
    max_steps: int | None = None,
) -> Split:
    """A good split: ``snake_draft``, local search, then iterated local search.

    Local search: a step swaps two players of different teams, or (sizes differing by
    one) moves a player from a larger team to a smaller one, whichever raises the quality
    most (with more than two teams, further improving swaps of untouched team pairs join
    the step, see ``_search_gaussian``); it stops when no step improves log q by more than
    ``IMPROVEMENT_EPS`` (or after ``max_steps`` steps, default 20 n; every step strictly
    improves, so it ends anyway).
    Then ``kicks`` times (default ``default_kicks``): perturb the best split by
    ``KICK_SWAPS`` random swaps, search locally again, and keep the result if it is
    better. The perturbations come from ``random.Random(seed)``, so a given pool, team
    count, model and seed (default ``SEARCH_SEED``) always give the same split.
    """
    labels = snake_draft(pool, teams)
    _quality_of(model, pool, labels, teams)  # the model's own checks of every rating
    steps = 20 * len(pool) if max_steps is None else max_steps
    objective = gaussian_objective(model, pool)

    def descend(start: list[int]) -> tuple[list[int], float]:
        if objective is None:
            return _search_generic(model, pool, start, teams, steps)
        return _search_gaussian(objective, start, teams, steps)

    best, best_value = descend(labels)
    rng = random.Random(seed)
    for _ in range(default_kicks(len(pool)) if kicks is None else kicks):
        found, value = descend(_kick(best, rng))
        if value > best_value + IMPROVEMENT_EPS:
            best, best_value = found, value
    return _finish(model, pool, best, teams, exact=False)


def default_kicks(players: int) -> int:
    """Rounds of iterated local search: ``MAX_KICKS``, fewer for large pools so that the
    work (about players^2 candidate evaluations a round) stays near ``KICK_WORK``."""
    return max(MIN_KICKS, min(MAX_KICKS, KICK_WORK // (players * players)))


def _kick(labels: list[int], rng: random.Random) -> list[int]:
    """``labels`` after ``KICK_SWAPS`` random swaps of players in different teams."""
    out = list(labels)
    n = len(out)
    for _ in range(KICK_SWAPS):
        a = rng.randrange(n)
        b = rng.randrange(n)
        while out[b] == out[a]:
            b = rng.randrange(n)
        out[a], out[b] = out[b], out[a]
    return out


def balanced_split(model: RatingModel, pool: Sequence[Rating], teams: int) -> Split:
    """The best split found: exact up to ``EXACT_MAX_PLAYERS`` players, else heuristic."""
    if len(pool) <= EXACT_MAX_PLAYERS:
        return exact_split(model, pool, teams)
    return heuristic_split(model, pool, teams)


def _team_sums(
    objective: GaussianObjective, lab: npt.NDArray[np.intp], k: int
) -> tuple[FloatArray, FloatArray, FloatArray]:
    """Per team: the sum of mu, the sum of sigma^2 and the player count."""
    m = np.asarray(np.bincount(lab, weights=objective.mu, minlength=k), dtype=float)
    s = np.asarray(np.bincount(lab, weights=objective.var, minlength=k), dtype=float)
    n = np.asarray(np.bincount(lab, minlength=k), dtype=float)
    return m, s, n


def _search_gaussian(
    objective: GaussianObjective, labels: list[int], k: int, steps: int
) -> tuple[list[int], float]:
    """Best-improvement local search from ``labels``: the local optimum and its log q.

    With more than two teams a step applies the best swap of each pair of teams, best
    first, as long as each still improves and touches no team changed earlier in the step
    (so 64 teams need far fewer steps than one swap at a time would).
    """
    mu, var = objective.mu, objective.var
    lab = np.array(labels, dtype=np.intp)
    m, s, n = _team_sums(objective, lab, k)
    current = float(objective.log_quality(m, s, n))
    for _ in range(steps):
        values, a_idx, b_idx = _swap_candidates(objective, lab, m, s, n)
        swap_value = float(values.max()) if values.size else -math.inf
        move_value, move = -math.inf, None
        if n.max() != n.min():
            move_value, move = _best_move(objective, lab, m, s, n)
        if max(swap_value, move_value) <= current + IMPROVEMENT_EPS:
            break
        # Candidate values come from running totals and may differ by rounding: every
        # change is confirmed by a fresh evaluation from team sums before it is kept.
        changed = False
        if move is not None and move_value > swap_value:
            _, a, t = move
            new_lab = lab.copy()
            new_lab[a] = t
            new_m, new_s, new_n = _team_sums(objective, new_lab, k)
            value = float(objective.log_quality(new_m, new_s, new_n))
            if value > current + IMPROVEMENT_EPS:
                lab, m, s, n, current, changed = new_lab, new_m, new_s, new_n, value, True
        else:
            touched = np.zeros(k, dtype=bool)
            if k == 2:
                candidates = np.array([int(np.argmax(values))])
            else:
                candidates = _best_per_team_pair(values, lab[a_idx], lab[b_idx], k, current)
            for c in candidates:
                a, b = int(a_idx[c]), int(b_idx[c])
                i, j = int(lab[a]), int(lab[b])
                if touched[i] or touched[j]:
                    continue
                new_m, new_s = m.copy(), s.copy()
                new_m[i] += mu[b] - mu[a]
                new_m[j] -= mu[b] - mu[a]
                new_s[i] += var[b] - var[a]
                new_s[j] -= var[b] - var[a]
                value = float(objective.log_quality(new_m, new_s, n))
                if value > current + IMPROVEMENT_EPS:
                    lab[a], lab[b] = j, i
                    m, s, current, changed = new_m, new_s, value, True
                    touched[i] = touched[j] = True
            if changed:  # recompute the sums, so that rounding does not accumulate
                m, s, n = _team_sums(objective, lab, k)
                current = float(objective.log_quality(m, s, n))
        if not changed:
            break
    return [int(t) for t in lab], current


def _best_per_team_pair(
    values: FloatArray,
    team_a: npt.NDArray[np.intp],
    team_b: npt.NDArray[np.intp],
    k: int,
    current: float,
) -> npt.NDArray[np.intp]:
    """Indices of the best improving candidate of each pair of teams, best first."""
    improving = np.flatnonzero(values > current + IMPROVEMENT_EPS)
    pair = team_a[improving] * k + team_b[improving]
    order = np.lexsort((-values[improving], pair))
    ordered_pairs = pair[order]
    first = np.flatnonzero(np.r_[True, ordered_pairs[1:] != ordered_pairs[:-1]])
    best = improving[order[first]]
    result: npt.NDArray[np.intp] = best[np.argsort(-values[best], kind="stable")]
    return result


def _swap_candidates(
    objective: GaussianObjective,
    lab: npt.NDArray[np.intp],
    m: FloatArray,
    s: FloatArray,
    n: FloatArray,
) -> tuple[FloatArray, npt.NDArray[np.intp], npt.NDArray[np.intp]]:
    """log q after swapping a and b, for every pair of players of different teams
    (team(a) < team(b)), from running totals: (values, a, b) as flat arrays."""
    k = m.shape[0]
    if objective.entrants and k == 2:
        # Two entrants: log q = -(R_0 - R_1)^2 / (4 beta^2), and a swap moving mu_b - mu_a
        # from team 1 to team 0 adds (mu_b - mu_a)(1/n_0 + 1/n_1) to R_0 - R_1 (and, for
        # Glicko-2, var_b - var_a to the sum of team 0's deviations).
        in_0 = np.flatnonzero(lab == 0)
        in_1 = np.flatnonzero(lab == 1)
        dm = objective.mu[in_1][None, :] - objective.mu[in_0][:, None]
        d = (m[0] / n[0] - m[1] / n[1]) + dm.ravel() * (1.0 / n[0] + 1.0 / n[1])
        beta2: FloatArray | float = objective.beta2
        if objective.deviations:
            dv = (objective.var[in_1][None, :] - objective.var[in_0][:, None]).ravel()
            beta2 = objective.entrant_beta2((s[0] + dv) / n[0] + (s[1] - dv) / n[1], 2)
        entrant: FloatArray = -0.25 * d * d / beta2
        return entrant, np.repeat(in_0, in_1.size), np.tile(in_1, in_0.size)
    if objective.entrants:
        a_idx, b_idx = np.nonzero(lab[:, None] < lab[None, :])
        ti, tj = lab[a_idx], lab[b_idx]
        # Swapping a (team i) and b (team j) moves mu_b - mu_a from team j to team i.
        delta = objective.mu[b_idx] - objective.mu[a_idx]
        delta_v = objective.var[b_idx] - objective.var[a_idx]
        values = _entrant_values(
            objective,
            m,
            s,
            n,
            ti,
            tj,
            m[ti] + delta,
            s[ti] + delta_v,
            n[ti],
            m[tj] - delta,
            s[tj] - delta_v,
            n[tj],
        )
        return values, a_idx, b_idx
    if k == 2:
        # Two teams: a swap leaves V_1 + V_2 (and B_1 + B_2) as they are, so log q is
        # 1/2 log((B_1 + B_2)/(V_1 + V_2)) - d^2 / (2 (V_1 + V_2)) with d = m_1 - m_2 + 2 dm.
        in_0 = np.flatnonzero(lab == 0)
        in_1 = np.flatnonzero(lab == 1)
        b = objective.beta2 * n
        v_total = float(b.sum() + s.sum())
        # Swapping a (team 0) and b (team 1) moves mu_b - mu_a from team 1 to team 0.
        dm = objective.mu[in_1][None, :] - objective.mu[in_0][:, None]
        d = (m[0] - m[1]) + 2.0 * dm.ravel()
        values2: FloatArray = 0.5 * math.log(float(b.sum()) / v_total) - 0.5 * d * d / v_total
        return values2, np.repeat(in_0, in_1.size), np.tile(in_1, in_0.size)
    # More teams: only teams i and j change, so each candidate replaces their two terms
    # in running totals over the teams; means are centred on the current m_bar so that
    # the quadratic form sum (m - c)^2 / V - (sum (m - c) / V)^2 / sum 1/V loses no
    # precision to cancellation.
    a_idx, b_idx = np.nonzero(lab[:, None] < lab[None, :])
    ti, tj = lab[a_idx], lab[b_idx]
    v = objective.beta2 * n + s
    inv_v = 1.0 / v
    c = float((m * inv_v).sum() / inv_v.sum())
    mc = m - c
    t2, t3 = mc * inv_v, mc * mc * inv_v
    delta_m = objective.mu[b_idx] - objective.mu[a_idx]
    delta_v = objective.var[b_idx] - objective.var[a_idx]
    vi = v[ti] + delta_v
    vj = v[tj] - delta_v
    inv_vi = 1.0 / vi
    inv_vj = 1.0 / vj
    mi = mc[ti] + delta_m
    mj = mc[tj] - delta_m
    s1 = inv_v.sum() - inv_v[ti] - inv_v[tj] + inv_vi + inv_vj
    s2 = t2.sum() - t2[ti] - t2[tj] + mi * inv_vi + mj * inv_vj
    s3 = t3.sum() - t3[ti] - t3[tj] + mi * mi * inv_vi + mj * mj * inv_vj
    b = objective.beta2 * n
    constant = float(np.log(b / v).sum() + np.log((1.0 / b).sum()))
    with np.errstate(invalid="ignore", divide="ignore"):
        values = 0.5 * (constant + np.log(v[ti] * v[tj] * inv_vi * inv_vj) - np.log(s1)) - 0.5 * (
            s3 - s2 * s2 / s1
        )
    values = np.where(np.isnan(values), -np.inf, values)
    return values, a_idx, b_idx


def _best_move(
    objective: GaussianObjective,
    lab: npt.NDArray[np.intp],
    m: FloatArray,
    s: FloatArray,
    n: FloatArray,
) -> tuple[float, tuple[str, int, int] | None]:
    """The best move of a player from a larger team to a smaller one."""
    big = n[lab] == n.max()
    small_teams = np.flatnonzero(n < n.max())
    team_j = small_teams[None, :]
    mu = objective.mu[:, None]
    var = objective.var[:, None]
    if objective.entrants:
        ti = lab[:, None]
        values = _entrant_values(
            objective,
            m,
            s,
            n,
            ti,
            team_j,
            m[ti] - mu,
            s[ti] - var,
            n[ti] - 1.0,
            m[team_j] + mu,
            s[team_j] + var,
            n[team_j] + 1.0,
        )
        mask = np.broadcast_to(big[:, None], values.shape)
        return _pick_best(values, mask, "move", lambda col: int(small_teams[col]))
    return _best_change(
        objective,
        m,
        s,
        n,
        team_i=lab[:, None],
        team_j=team_j,
        dm_i=-np.broadcast_to(mu, (lab.shape[0], small_teams.shape[0])),
        ds_i=-np.broadcast_to(var, (lab.shape[0], small_teams.shape[0])),
        dn_i=-1.0,
        mask=np.broadcast_to(big[:, None], (lab.shape[0], small_teams.shape[0])),
        kind="move",
        column=lambda col: int(small_teams[col]),
    )


def _best_change(
    objective: GaussianObjective,
    m: FloatArray,
    s: FloatArray,
    n: FloatArray,
    *,
    team_i: npt.NDArray[np.intp],
    team_j: npt.NDArray[np.intp],
    dm_i: FloatArray,
    ds_i: FloatArray,
    dn_i: float,
    mask: npt.NDArray[np.bool_],
    kind: str,
    column: Callable[[int], int],
) -> tuple[float, tuple[str, int, int] | None]:
    """Evaluate candidates that add (dm_i, ds_i, dn_i) to team i and subtract them from
    team j (i != j), from totals over the teams with the two old terms replaced.

    Means are centred on the current m_bar so that sum (m - c)^2 / V - (sum (m - c)/V)^2 /
    sum 1/V, the quadratic form, loses no precision to cancellation.
    """
    if not mask.any():
        return -math.inf, None
    b = objective.beta2 * n
    v = b + s
    inv_v = 1.0 / v
    c = float((m * inv_v).sum() / inv_v.sum())
    mc = m - c
    t1, t2, t3 = inv_v, mc * inv_v, mc * mc * inv_v
    tl, tb = np.log(b / v), 1.0 / b
    T1, T2, T3, TL, TB = t1.sum(), t2.sum(), t3.sum(), tl.sum(), tb.sum()

    def terms(
        team: npt.NDArray[np.intp], dm: FloatArray | float, ds: FloatArray | float, dn: float
    ) -> tuple[FloatArray, ...]:
        bn = objective.beta2 * (n[team] + dn)
        vn = bn + s[team] + ds
        iv = 1.0 / vn
        mn = mc[team] + dm
        return (
            iv - t1[team],
            mn * iv - t2[team],
            mn * mn * iv - t3[team],
            np.log(bn / vn) - tl[team],
            1.0 / bn - tb[team],
        )

    a1, a2, a3, al, ab = terms(team_i, dm_i, ds_i, dn_i)
    b1, b2, b3, bl, bb = terms(team_j, -dm_i, -ds_i, -dn_i)
    s1 = T1 + a1 + b1
    s2 = T2 + a2 + b2
    s3 = T3 + a3 + b3
    with np.errstate(invalid="ignore", divide="ignore"):
        values = 0.5 * (TL + al + bl + np.log(TB + ab + bb) - np.log(s1)) - 0.5 * (
            s3 - s2 * s2 / s1
        )
    return _pick_best(values, mask, kind, column)


def _pick_best(
    values: FloatArray, mask: npt.NDArray[np.bool_], kind: str, column: Callable[[int], int]
) -> tuple[float, tuple[str, int, int] | None]:
    """The best candidate of a (players x teams) table where ``mask`` holds, if any."""
    values = np.where(mask, values, -np.inf)
    values = np.where(np.isnan(values), -np.inf, values)
    flat = int(np.argmax(values))
    value = float(values.flat[flat])
    if value == -math.inf:
        return value, None
    row, col = divmod(flat, values.shape[1])
    return value, (kind, row, column(col))


def _entrant_values(
    objective: GaussianObjective,
    m: FloatArray,
    s: FloatArray,
    n: FloatArray,
    team_i: npt.NDArray[np.intp],
    team_j: npt.NDArray[np.intp],
    new_m_i: FloatArray,
    new_s_i: FloatArray,
    new_n_i: FloatArray,
    new_m_j: FloatArray,
    new_s_j: FloatArray,
    new_n_j: FloatArray,
) -> FloatArray:
    """log q (``entrants``) of candidates that give teams i and j new sums and sizes, from
    totals over the teams with the two old terms replaced: with R centred on the current
    mean rating c (so the quadratic form loses no precision to cancellation),
    log q = -(sum R^2 - (sum R)^2 / k) / (2 beta^2), beta^2 from the new deviations."""
    k = m.shape[0]
    r = m / n
    c = float(r.mean())
    rc = r - c
    s1, s2 = float(rc.sum()), float((rc * rc).sum())
    ri = new_m_i / new_n_i - c
    rj = new_m_j / new_n_j - c
    t1 = s1 - rc[team_i] - rc[team_j] + ri + rj
    t2 = s2 - rc[team_i] ** 2 - rc[team_j] ** 2 + ri * ri + rj * rj
    beta2: FloatArray | float = objective.beta2
    if objective.deviations:
        p = s / n
        total = float(p.sum()) - p[team_i] - p[team_j] + new_s_i / new_n_i + new_s_j / new_n_j
        beta2 = objective.entrant_beta2(total, k)
    values: FloatArray = -0.5 * (t2 - t1 * t1 / k) / beta2
    return values


def _search_generic(
    model: RatingModel, pool: Sequence[Rating], labels: list[int], k: int, steps: int
) -> tuple[list[int], float]:
    """The same local search through ``model.quality`` (for models without a team-sum
    form): the local optimum and its quality."""
    lab = list(labels)
    current = _quality_of(model, pool, lab, k)
    for _ in range(steps):
        sizes = [lab.count(t) for t in range(k)]
        largest = max(sizes)
        best_value, best = current, None
        for a in range(len(pool)):
            for b in range(a + 1, len(pool)):
                if lab[a] == lab[b]:
                    continue
                lab[a], lab[b] = lab[b], lab[a]
                value = _quality_of(model, pool, lab, k)
                lab[a], lab[b] = lab[b], lab[a]
                if value > best_value:
                    best_value, best = value, ("swap", a, b)
            if sizes[lab[a]] == largest:
                for t in range(k):
                    if sizes[t] < largest:
                        old = lab[a]
                        lab[a] = t
                        value = _quality_of(model, pool, lab, k)
                        lab[a] = old
                        if value > best_value:
                            best_value, best = value, ("move", a, t)
        if best is None:
            break
        kind, a, b = best
        if kind == "swap":
            lab[a], lab[b] = lab[b], lab[a]
        else:
            lab[a] = b
        current = best_value
    return lab, current
