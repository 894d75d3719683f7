"""The updates of the three models over many independent matches at once (numpy).

Used by ``app.rating.replay``: a block is B matches of one shape (the same team sizes),
none sharing a player, given per team as (B, n_j) arrays: the (aged) means and
deviations and the model's per-player weights, with per match the outcome (two teams) or
the ranks (three or more). Each kernel evaluates the arithmetic of the model's scalar
update operation by operation and in the same order: ``TrueSkill._rate_two`` and
``TrueSkill._rate_many`` (message passing, each match stopping after the same round),
``PlackettLuce._update``, ``Elo.rate`` with its duels; the truncated-Gaussian V and W of
``app.rating.gaussian`` are repeated elementwise with the same branches. So the results
agree with ``model.rate`` to the last bit wherever the elementary functions do: ``erf``
and ``erfc`` are the ``math`` module's (``app.rating._special``), numpy's ``exp`` may
differ from it in the last bit (a relative 2e-16), and the few sums the scalar code
takes with ``math.fsum`` (Elo's team ratings, the quality of 3+ teams) are plain sums
here.

A kernel that meets input the scalar update would reject raises ``RatingInputError``; the
caller then replays one match at a time, which reports the error against its match.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Final

import numpy as np
import numpy.typing as npt

from app.rating import _special
from app.rating.base import RatingInputError

# The scalar modules' branch points and constants, so that both paths branch alike.
from app.rating.elo import _LN10, _MILLS_TAIL, _MLE_GAIN, Elo
from app.rating.gaussian import _CF_DEPTHS, _GL4, _GL6, _GL10, _GL14, _TAIL, MIN_ONE_MINUS_W
from app.rating.plackett_luce import _SHIFT_SPAN as _PL_SHIFT_SPAN
from app.rating.plackett_luce import PlackettLuce
from app.rating.quality import MIN_TEAM_VARIANCE, QUALITY_FLOOR
from app.rating.trueskill import _DIRECT as _TS_DIRECT
from app.rating.trueskill import TrueSkill
from app.rating.weng_lin import partial_play

FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]
IntArray = npt.NDArray[np.int8]

#: Outcome codes of a two-team match: team 0 ranked first (or no ranks), team 1 first, a draw.
FIRST_WINS: Final = 0
SECOND_WINS: Final = 1
DRAWN: Final = 2

_INV_SQRT2: Final = 1.0 / math.sqrt(2.0)
_INV_SQRT_2PI: Final = 1.0 / math.sqrt(2.0 * math.pi)


def _column_sum(terms: FloatArray) -> FloatArray:
    """Sum over a team's players left to right, as the scalar loops accumulate."""
    acc: FloatArray = np.zeros(terms.shape[0])
    for i in range(terms.shape[1]):
        acc = acc + terms[:, i]
    return acc


def _pdf(x: FloatArray) -> FloatArray:
    """``gaussian.pdf`` elementwise."""
    out: FloatArray = _INV_SQRT_2PI * np.exp(-0.5 * x * x)
    return out


def lower_tail(x: FloatArray) -> tuple[FloatArray, FloatArray, FloatArray]:
    """``gaussian._lower_tail`` elementwise: (lam, lam + x, 1 - W) for a win at x = t - e.

    Below ``_TAIL`` Laplace's continued fraction of the Mills ratio, with the same depth
    for each range of z = -x as the scalar function.
    """
    lam = np.empty_like(x)
    g = np.empty_like(x)
    one_minus_w = np.empty_like(x)
    near = x >= _TAIL
    if near.any():
        xn = x[near]
        c = 0.5 * _special.erfc(-xn * _INV_SQRT2)
        ln = _pdf(xn) / c
        gn = ln + xn
        lam[near] = ln
        g[near] = gn
        one_minus_w[near] = 1.0 - ln * gn
    remaining = ~near
    z_all = -x
    for limit, depth in _CF_DEPTHS:
        if not remaining.any():
            break
        part = remaining & (z_all < limit)
        remaining = remaining & ~part
        if not part.any():
            continue
        z = z_all[part]
        d = z
        for n in range(depth, 4, -1):
            d = z + n / d
        d4 = z + 4.0 / d
        d3 = z + 3.0 / d4
        d2 = z + 2.0 / d3
        gp = 1.0 / d2
        lam[part] = z + gp
        g[part] = gp
        one_minus_w[part] = ((z + 4.0 / d3 - 3.0 / d4) / d3) / d2 / d2
    return lam, g, one_minus_w


def trunc_win(t: FloatArray, e: FloatArray) -> tuple[FloatArray, FloatArray]:
    """``gaussian.trunc_win`` elementwise: (V, 1 - W) for a win (the paper's section 3)."""
    v, _, one_minus_w = lower_tail(t - e)
    return v, np.clip(one_minus_w, MIN_ONE_MINUS_W, 1.0)


def trunc_draw(t: FloatArray, e: FloatArray) -> tuple[FloatArray, FloatArray]:
    """``gaussian.trunc_draw`` elementwise: (V, 1 - W) for a draw, with the same branches.

    Narrow intervals by Gauss-Legendre quadrature (the same node sets for the same
    ranges), intervals straddling 0 by erf, both ends in one tail as a two-component
    mixture of one-sided truncations.
    """
    s = np.abs(t)
    mean = np.empty_like(t)
    var = np.empty_like(t)
    zero = e <= 0.0
    narrow = ~zero & (e * (s + e) <= 1.0)
    straddle = ~zero & ~narrow & (s <= e)
    tail = ~zero & ~narrow & ~straddle
    if narrow.any():
        mean[narrow], var[narrow] = _narrow_moments(s[narrow], e[narrow])
    if straddle.any():
        mean[straddle], var[straddle] = _straddle_moments(s[straddle], e[straddle])
    if tail.any():
        mean[tail], var[tail] = _tail_moments(s[tail], e[tail])
    var = np.where(var > 1.0, 1.0, np.where(var >= MIN_ONE_MINUS_W, var, MIN_ONE_MINUS_W))
    v = np.where(t >= 0.0, mean, -mean)
    # A zero-width interval pins d to 0: V = -t, 1 - W at its floor.
    v = np.where(zero, -t, v)
    var = np.where(zero, MIN_ONE_MINUS_W, var)
    return v, var


def _narrow_moments(s: FloatArray, e: FloatArray) -> tuple[FloatArray, FloatArray]:
    """``gaussian._narrow_moments`` elementwise (the node set chosen per element)."""
    tilt = s * e
    n4 = (tilt <= 0.06) & (e <= 0.08)
    n6 = ~n4 & (tilt <= 0.35) & (e <= 0.2)
    n10 = ~n4 & ~n6 & (e <= 0.6)
    n14 = ~n4 & ~n6 & ~n10
    mean = np.empty_like(s)
    var = np.empty_like(s)
    for mask, nodes in ((n4, _GL4), (n6, _GL6), (n10, _GL10), (n14, _GL14)):
        if not mask.any():
            continue
        sm = s[mask]
        em = e[mask]
        z0 = np.zeros_like(sm)
        m1 = np.zeros_like(sm)
        m2 = np.zeros_like(sm)
        for xk, wk in nodes:
            y = em * xk
            common = wk * np.exp(-0.5 * y * y)
            up = np.exp(sm * y)
            gp = common * up
            gm = common / up
            z0 = z0 + (gp + gm)
            m1 = m1 + (gp - gm) * y
            m2 = m2 + (gp + gm) * y * y
        my = m1 / z0
        mean[mask] = -sm + my
        var[mask] = m2 / z0 - my * my
    return mean, var


def _straddle_moments(s: FloatArray, e: FloatArray) -> tuple[FloatArray, FloatArray]:
    """``gaussian._straddle_moments`` elementwise."""
    a = -e - s
    b = e - s
    z = 0.5 * (_special.erf(b * _INV_SQRT2) + _special.erf((e + s) * _INV_SQRT2))
    na = _pdf(a)
    nb = _pdf(b)
    mean = (na - nb) / z
    var = 1.0 - mean * mean - (b * nb - a * na) / z
    return mean, var


def _tail_moments(s: FloatArray, e: FloatArray) -> tuple[FloatArray, FloatArray]:
    """``gaussian._tail_moments`` elementwise."""
    c = s - e
    L = 2.0 * e
    lam1, g1, var1 = lower_tail(-c)
    lam2, g2, var2 = lower_tail(-c - L)
    ratio = lam1 / lam2
    rho = np.exp(-2.0 * e * s) * ratio
    one_minus_rho = np.where(rho > 0.25, -np.expm1(-2.0 * e * s + np.log(ratio)), 1.0 - rho)
    delta = (g1 - rho * (L + g2)) / one_minus_rho
    gap = delta - L - g2
    var = (var1 - rho * var2 - rho * one_minus_rho * gap * gap) / one_minus_rho
    return -(c + delta), var


class Side:
    """One team of a block: (B, n) arrays of means, deviations and model weights, and the
    players' statistics standardised within their match (``base.standard_scores``; NaN
    where unknown; ``None`` when no match of the block has any)."""

    __slots__ = ("mu", "sigma", "weight", "z")

    def __init__(
        self, mu: FloatArray, sigma: FloatArray, weight: FloatArray, z: FloatArray | None = None
    ) -> None:
        self.mu = mu
        self.sigma = sigma
        self.weight = weight
        self.z = z


class Kernel(ABC):
    """The vectorised updates of one model (one subclass per model)."""

    #: Quality: the performance deviation beta, and whether the model has no skill
    #: uncertainty (Elo: each team is one entrant rated by its mean, ``entrant_quality``;
    #: otherwise team sums, ``match_quality``).
    quality_beta: float
    exact_skills: bool = False
    #: Whether ``rate_many`` rates matches of three or more teams, and whether it does so
    #: by message passing (whose cost per block grows with the slowest match).
    many_teams: bool = False
    message_passing: bool = False
    #: Whether ``rate`` takes players' statistics (``Side.z``) as evidence.
    evidence: bool = False

    def weights(self, raw: list[list[float]]) -> list[list[float]]:
        """The per-player weights the update uses, from ``check_weights``'s output."""
        return raw

    def duels(self, teams: tuple[int, ...]) -> int:
        """How many pairwise duels the update takes per match of these team sizes."""
        return 0

    @abstractmethod
    def rate(
        self, a: Side, b: Side, outcome: IntArray, weighted: BoolArray
    ) -> tuple[FloatArray, FloatArray, FloatArray, FloatArray]:
        """New (mu_0, sigma_0, mu_1, sigma_1) of the block."""

    def rate_many(
        self, sides: list[Side], ranks: FloatArray
    ) -> tuple[list[tuple[FloatArray, FloatArray]], BoolArray]:
        """New (mu, sigma) per team for a block of k >= 3 teams with ranks (B, k).

        Also returns the rows it could not rate (the caller rates them one at a time);
        only kernels with ``many_teams`` implement it.
        """
        raise RatingInputError("teams", "this model rates three or more teams one at a time")


class TrueSkillKernel(Kernel):
    """``TrueSkill._rate_two`` over a block (the paper's closed form for two teams), and
    ``TrueSkill._rate_many`` (expectation propagation) for three or more teams."""

    many_teams = True
    message_passing = True

    def __init__(self, model: TrueSkill) -> None:
        params = model.params
        beta = float(params["beta"])
        tau = float(params["tau"])
        self._model = model
        self._tau2 = tau * tau
        self._beta2 = beta * beta
        self._extra = self._tau2 + beta * beta
        # The evidence on a performance in canonical form (``base.statistic_evidence``).
        self._per_z = model._per_z
        self._precision = model._precision
        self.evidence = self._per_z > 0.0
        self._tolerance = model._ep_tolerance
        self._max_rounds = model._ep_max_rounds
        self.quality_beta = beta

    def weights(self, raw: list[list[float]]) -> list[list[float]]:
        for j, row in enumerate(raw):
            if not any(row):
                raise RatingInputError("weights", f"every weight of team {j} is 0")
        return raw

    def rate(
        self, a: Side, b: Side, outcome: IntArray, weighted: BoolArray
    ) -> tuple[FloatArray, FloatArray, FloatArray, FloatArray]:
        tau2 = self._tau2
        extra = self._extra
        ma = _column_sum(a.weight * a.mu)
        sa = _column_sum(a.weight * a.weight * (a.sigma * a.sigma + extra))
        mb = _column_sum(b.weight * b.mu)
        sb = _column_sum(b.weight * b.weight * (b.sigma * b.sigma + extra))
        move_a, scale, low = self._messages(a, b, ma, sa, mb, sb, outcome)
        out: list[FloatArray] = []
        for side, move in ((a, move_a), (b, -move_a)):
            w = side.weight
            var = side.sigma * side.sigma + tau2
            wv = w * w * var
            factor = 1.0 - wv * scale
            floor = wv * low
            factor = np.where(factor < floor, floor, factor)
            out.append(side.mu + w * var * move)
            out.append(np.sqrt(var * factor))
        if a.z is not None or b.z is not None:
            self._observe(a, b, outcome, out)
        return out[0], out[1], out[2], out[3]

    def _observe(self, a: Side, b: Side, outcome: IntArray, out: list[FloatArray]) -> None:
        """``TrueSkill._rate_with_evidence`` over the rows of the block whose statistics
        say something (their ``out`` rows replaced): each performance's message down is
        the product of N(mu, v + beta^2) and its evidence, the outcome is inferred on the
        performances, and each skill follows its performance (``docs/models.md``)."""
        z_a = a.z if a.z is not None else np.full_like(a.mu, np.nan)
        z_b = b.z if b.z is not None else np.full_like(b.mu, np.nan)
        known_a = ~np.isnan(z_a)
        known_b = ~np.isnan(z_b)
        count = known_a.sum(axis=1) + known_b.sum(axis=1)
        rows = count > 0
        if not rows.any():
            return
        tau2, beta2, precision = self._tau2, self._beta2, self._precision
        centre = (
            np.where(known_a, a.mu, 0.0).sum(axis=1) + np.where(known_b, b.mu, 0.0).sum(axis=1)
        ) / np.where(rows, count, 1)
        virtual = []
        for side, z, known in ((a, z_a, known_a), (b, z_b, known_b)):
            prior = side.sigma * side.sigma + tau2 + beta2
            shifted = precision * centre[:, None] + self._per_z * np.where(known, z, 0.0)
            var = np.where(known, prior / (1.0 + prior * precision), prior)
            mean = np.where(known, var * (side.mu / prior + shifted), side.mu)
            virtual.append((mean, var))
        (m_a, v_a), (m_b, v_b) = virtual
        w_a, w_b = a.weight, b.weight
        ma = _column_sum(w_a * m_a)
        sa = _column_sum(w_a * w_a * v_a)
        mb = _column_sum(w_b * m_b)
        sb = _column_sum(w_b * w_b * v_b)
        move_a, scale, low = self._messages(a, b, ma, sa, mb, sb, outcome)
        for n, (side, (mean, var), move) in enumerate(
            ((a, virtual[0], move_a), (b, virtual[1], -move_a))
        ):
            w = side.weight
            wv = w * w * var
            factor = 1.0 - wv * scale
            floor = wv * low
            factor = np.where(factor < floor, floor, factor)
            p_mean = mean + w * var * move
            p_var = var * factor
            v = side.sigma * side.sigma + tau2
            gain = v / (v + beta2)
            mu = side.mu + gain * (p_mean - side.mu)
            sigma = np.sqrt(gain * beta2 + gain * gain * p_var)
            out[2 * n] = np.where(rows[:, None], mu, out[2 * n])
            out[2 * n + 1] = np.where(rows[:, None], sigma, out[2 * n + 1])

    def _messages(
        self,
        a: Side,
        b: Side,
        ma: FloatArray,
        sa: FloatArray,
        mb: FloatArray,
        sb: FloatArray,
        outcome: IntArray,
    ) -> tuple[FloatArray, FloatArray, FloatArray]:
        """The comparison of the team performances N(ma, sa) and N(mb, sb) of each row:
        the first team's mean move per unit of its member's variance, and the variance
        factor's scale and floor (``TrueSkill._rate_two``)."""
        if (sa < MIN_TEAM_VARIANCE).any() or (sb < MIN_TEAM_VARIANCE).any():
            raise RatingInputError("weights", "a team's performance variance is too small")
        c2 = sa + sb
        c = np.sqrt(c2)
        swap = outcome == SECOND_WINS
        diff = ma - mb
        # With the second team ranked first the scalar update rates (b, a): t changes sign.
        t = np.where(swap, -diff, diff) / c
        e = self._model.draw_margin(a.mu.shape[1] + b.mu.shape[1]) / c
        x = t - e
        direct = (outcome != DRAWN) & (x >= _TS_DIRECT)
        v = np.empty_like(x)
        one_minus_w = np.empty_like(x)
        xd = x[direct]
        vd = _INV_SQRT_2PI * np.exp(-0.5 * xd * xd) / (0.5 * _special.erfc(-xd * _INV_SQRT2))
        v[direct] = vd
        one_minus_w[direct] = 1.0 - vd * (vd + xd)
        drawn = outcome == DRAWN
        if drawn.any():
            v[drawn], one_minus_w[drawn] = trunc_draw(t[drawn], e[drawn])
        tail = ~(direct | drawn)
        if tail.any():
            v[tail], one_minus_w[tail] = trunc_win(t[tail], e[tail])
        shift = v / c
        scale = ((1.0 - one_minus_w) / c2)[:, None]
        low = (one_minus_w / c2)[:, None]
        move_a = np.where(swap, -shift, shift)[:, None]
        return move_a, scale, low

    def rate_many(
        self, sides: list[Side], ranks: FloatArray
    ) -> tuple[list[tuple[FloatArray, FloatArray]], BoolArray]:
        """``TrueSkill._rate_many`` over a block: the same schedule, row by row in lockstep.

        Every row runs the forward and backward sweeps of the scalar update with the same
        arithmetic and stops after the same round by the same test (each row keeps its own
        ``previous`` and ``earlier`` moves); a row that has stopped is no longer written.
        """
        rows = ranks.shape[0]
        extra = self._extra
        team_mean = np.stack([_column_sum(sd.weight * sd.mu) for sd in sides], axis=1)
        team_var = np.stack(
            [_column_sum(sd.weight * sd.weight * (sd.sigma * sd.sigma + extra)) for sd in sides],
            axis=1,
        )
        if (team_var < MIN_TEAM_VARIANCE).any():
            raise RatingInputError("weights", "a team's performance variance is too small")
        # Teams in rank order (stable, as ``sorted`` is), factor i between places i, i + 1.
        order = np.argsort(ranks, axis=1, kind="stable")
        place_rank = np.take_along_axis(ranks, order, axis=1)
        mean = np.take_along_axis(team_mean, order, axis=1)
        var = np.take_along_axis(team_var, order, axis=1)
        sizes = np.array([sd.mu.shape[1] for sd in sides])[order]
        margins = np.array([self._model.draw_margin(n) for n in range(2 * int(sizes.max()) + 1)])
        eps = margins[sizes[:, :-1] + sizes[:, 1:]]
        drawn = place_rank[:, 1:] == place_rank[:, :-1]
        with np.errstate(all="ignore"):
            up_pi, up_tau = self._propagate(mean, var, eps, drawn)
            inv = 1.0 / (1.0 + up_pi * var)
            shift = (up_tau - up_pi * mean) * inv
            kappa = up_pi * inv
        place = np.argsort(order, axis=1)
        tau2 = self._tau2
        out: list[tuple[FloatArray, FloatArray]] = []
        for j, sd in enumerate(sides):
            at = place[:, j : j + 1]
            inv_j = np.take_along_axis(inv, at, axis=1)
            shift_j = np.take_along_axis(shift, at, axis=1)
            kappa_j = np.take_along_axis(kappa, at, axis=1)
            v = sd.sigma * sd.sigma + tau2
            w = sd.weight
            factor = 1.0 - w * w * v * kappa_j
            factor = np.where(factor > inv_j, factor, inv_j)
            out.append((sd.mu + w * v * shift_j, np.sqrt(v * factor)))
        return out, np.zeros(rows, np.bool_)

    def _propagate(
        self, mean: FloatArray, var: FloatArray, eps: FloatArray, drawn: BoolArray
    ) -> tuple[FloatArray, FloatArray]:
        """The message passing of ``TrueSkill._rate_many`` on teams in place order.

        Returns, per place, the precision and precision-adjusted mean sent up to the team
        (the sums of the messages from its two comparison factors). Rows that have stopped
        are set aside after each round, so the rounds work on the running rows only.
        """
        rows, k = mean.shape
        n = k - 1
        prior_pi = 1.0 / var
        prior_tau = mean * prior_pi
        # The state every round updates, and where each row's final state is kept:
        # left and right cavities (precision, precision-adjusted mean) per place, the
        # comparison messages per factor.
        final = [
            prior_pi.copy(),
            prior_tau.copy(),
            prior_pi.copy(),
            prior_tau.copy(),
            np.zeros((rows, n)),
            np.zeros((rows, n)),
        ]
        left_pi, left_tau, right_pi, right_tau, cmp_pi, cmp_tau = (a.copy() for a in final)
        d_mean = np.zeros((rows, n))
        d_var = np.full((rows, n), math.inf)
        p_pi = prior_pi
        p_tau = prior_tau
        forward_steps = n - 1
        schedule = [*range(n - 1), *range(n - 1, 0, -1)]
        tol = self._tolerance
        previous = np.full(rows, math.inf)
        earlier = np.full(rows, math.inf)
        running = np.arange(rows)
        c_lam = 2.0 * _INV_SQRT_2PI
        for round_ in range(self._max_rounds):
            live = running.shape[0]
            delta2 = np.zeros(live)
            for step, i in enumerate(schedule):
                j = i + 1
                lp = left_pi[:, i]
                rp = right_pi[:, j]
                ilp = 1.0 / lp
                irp = 1.0 / rp
                lm = left_tau[:, i] * ilp
                rm = right_tau[:, j] * irp
                cav_var = ilp + irp
                cav_mean = lm - rm
                sd = np.sqrt(cav_var)
                isd = 1.0 / sd
                x = (cav_mean - eps[:, i]) * isd
                tie = drawn[:, i]
                direct = ~tie & (x >= _TS_DIRECT)
                v = np.empty(live)
                w = np.empty(live)
                one_minus_w = np.empty(live)
                xd = x[direct]
                vd = c_lam * np.exp(-0.5 * xd * xd) / _special.erfc(-xd * _INV_SQRT2)
                wd = vd * (vd + xd)
                v[direct] = vd
                w[direct] = wd
                one_minus_w[direct] = 1.0 - wd
                for mask, trunc in ((tie, trunc_draw), (~tie & ~direct, trunc_win)):
                    if mask.any():
                        vm, om = trunc(cav_mean[mask] * isd[mask], eps[mask, i] * isd[mask])
                        v[mask] = vm
                        one_minus_w[mask] = om
                        w[mask] = 1.0 - om
                sv = sd * v
                new_mean = cav_mean + sv
                new_var = cav_var * one_minus_w
                inv = 1.0 / new_var
                cp = w * inv
                ct = (cav_mean * w + sv) * inv
                cmp_pi[:, i] = cp
                cmp_tau[:, i] = ct
                dm = new_mean - d_mean[:, i]
                dv = (new_var - d_var[:, i]) * isd
                change = (dm * dm + dv * dv) * isd * isd
                delta2 = np.where(change > delta2, change, delta2)
                d_mean[:, i] = new_mean
                d_var[:, i] = new_var
                if step < forward_steps:
                    f = lp / (cp + lp)
                    left_pi[:, j] = p_pi[:, j] + cp * f
                    left_tau[:, j] = p_tau[:, j] + (cp * lm - ct) * f
                else:
                    f = rp / (cp + rp)
                    right_pi[:, i] = p_pi[:, i] + cp * f
                    right_tau[:, i] = p_tau[:, i] + (cp * rm + ct) * f
            delta = np.sqrt(delta2)
            ratio = delta / previous
            back = previous / earlier
            ratio = np.where(back > ratio, back, ratio)
            stop = (delta <= tol) | (
                (earlier < math.inf) & (ratio < 1.0) & (delta * ratio <= tol * (1.0 - ratio))
            )
            if round_ == self._max_rounds - 1:
                stop[:] = True
            if stop.any():
                state = (left_pi, left_tau, right_pi, right_tau, cmp_pi, cmp_tau)
                for kept, now in zip(final, state, strict=True):
                    kept[running[stop]] = now[stop]
                keep = ~stop
                if not keep.any():
                    break
                running = running[keep]
                left_pi, left_tau, right_pi, right_tau, cmp_pi, cmp_tau = (a[keep] for a in state)
                d_mean = d_mean[keep]
                d_var = d_var[keep]
                p_pi = p_pi[keep]
                p_tau = p_tau[keep]
                eps = eps[keep]
                drawn = drawn[keep]
                previous = previous[keep]
                earlier = earlier[keep]
                delta = delta[keep]
            earlier = previous
            previous = delta
        left_pi, left_tau, right_pi, right_tau, cmp_pi, cmp_tau = final
        # Up to the teams, as the scalar update: the messages to right-hand teams again
        # along the chain, then factor 0 to team 0.
        from_left_pi = np.zeros((rows, k))
        from_left_tau = np.zeros((rows, k))
        for i in range(n):
            cp = cmp_pi[:, i]
            lp = left_pi[:, i]
            f = lp / (cp + lp)
            mp = cp * f
            mt = (cp * (left_tau[:, i] / lp) - cmp_tau[:, i]) * f
            from_left_pi[:, i + 1] = mp
            from_left_tau[:, i + 1] = mt
            left_pi[:, i + 1] = prior_pi[:, i + 1] + mp
            left_tau[:, i + 1] = prior_tau[:, i + 1] + mt
        cp = cmp_pi[:, 0]
        rp = right_pi[:, 1]
        f = rp / (cp + rp)
        right_pi[:, 0] = prior_pi[:, 0] + cp * f
        right_tau[:, 0] = prior_tau[:, 0] + (cp * (right_tau[:, 1] / rp) + cmp_tau[:, 0]) * f
        up_pi = from_left_pi + (right_pi - prior_pi)
        up_tau = from_left_tau + (right_tau - prior_tau)
        return up_pi, up_tau


class PlackettLuceKernel(Kernel):
    """``PlackettLuce._update`` over a block (Weng and Lin, Algorithm 4), any number of
    teams."""

    many_teams = True

    def __init__(self, model: PlackettLuce) -> None:
        params = model.params
        beta = float(params["beta"])
        tau = float(params["tau"])
        self._tau2 = tau * tau
        self._beta2 = beta * beta
        self._two_beta2 = 2 * self._beta2
        self._kappa = float(params["kappa"])
        self._limit_sigma = bool(params["limit_sigma"])
        self.quality_beta = beta

    def weights(self, raw: list[list[float]]) -> list[list[float]]:
        return partial_play(raw)

    def rate(
        self, a: Side, b: Side, outcome: IntArray, weighted: BoolArray
    ) -> tuple[FloatArray, FloatArray, FloatArray, FloatArray]:
        tau2 = self._tau2
        theta_a = _column_sum(a.mu)
        var_a = _column_sum(a.sigma * a.sigma + tau2)
        theta_b = _column_sum(b.mu)
        var_b = _column_sum(b.sigma * b.sigma + tau2)
        c2 = self._two_beta2 + var_a + var_b
        c = np.sqrt(c2)
        rev = outcome == SECOND_WINS
        drawn = outcome == DRAWN
        d = np.where(rev, theta_b - theta_a, theta_a - theta_b) / c
        # _two_teams: the logistic on the side where exp cannot overflow.
        up = d >= 0.0
        t = np.exp(np.where(up, -d, d))
        one = 1.0 / (1.0 + t)
        other = t / (1.0 + t)
        p1 = np.where(up, one, other)
        p2 = np.where(up, other, one)
        # The scalar update rates a reversed order as (b, a) and reverses the results.
        omega_a = np.where(drawn, 0.5 - p1, np.where(rev, -p2, 1.0 - p1))
        omega_b = np.where(drawn, 0.5 - p2, np.where(rev, 1.0 - p1, -p2))
        de1 = p1 * (1.0 - p1)
        de2 = p2 * (1.0 - p2)
        delta_a = np.where(rev, de2, de1)
        delta_b = np.where(rev, de1, de2)
        c3 = c2 * c
        new_a = self._players(a, omega_a, delta_a, var_a, c, c3)
        new_b = self._players(b, omega_b, delta_b, var_b, c, c3)
        return new_a[0], new_a[1], new_b[0], new_b[1]

    def _players(
        self,
        side: Side,
        omega: FloatArray,
        delta: FloatArray,
        var: FloatArray,
        c: FloatArray,
        c3: FloatArray,
    ) -> tuple[FloatArray, FloatArray]:
        """Each player's step from its team's Omega_i and Delta_i (Algorithm 4, the end)."""
        tau2 = self._tau2
        kappa = self._kappa
        step = (omega / c)[:, None]
        shrink = (delta * np.sqrt(var) / c3)[:, None]
        s2 = side.sigma * side.sigma + tau2
        # Unweighted players carry weight 1, for which both forms below are exact.
        we = np.where(step >= 0.0, side.weight, 1.0 / side.weight)
        f = 1.0 - s2 * shrink * we
        sigma = np.sqrt(s2 * np.where(f > kappa, f, kappa))
        if self._limit_sigma:  # WengLin._apply: no sigma above its value before the match
            sigma = np.minimum(sigma, side.sigma)
        return side.mu + s2 * step * we, sigma

    def rate_many(
        self, sides: list[Side], ranks: FloatArray
    ) -> tuple[list[tuple[FloatArray, FloatArray]], BoolArray]:
        """``PlackettLuce._update`` with ``_many_teams`` for k teams, ties included.

        Rows whose exponents theta/c span ``_SHIFT_SPAN`` or more (the scalar update's
        log-sum-exp branch) are left to the caller.
        """
        tau2 = self._tau2
        k = len(sides)
        theta = [_column_sum(side.mu) for side in sides]
        var = [_column_sum(side.sigma * side.sigma + tau2) for side in sides]
        c2 = np.full(ranks.shape[0], k * self._beta2)
        for v in var:
            c2 = c2 + v
        c = np.sqrt(c2)
        x = np.stack([t / c for t in theta], axis=1)
        xmax = x.max(axis=1)
        # Places in rank order (stable, as ``sorted`` is); equal ranks form one group.
        order = np.argsort(ranks, axis=1, kind="stable")
        sorted_ranks = np.take_along_axis(ranks, order, axis=1)
        group = np.zeros(order.shape, np.int64)
        np.cumsum(sorted_ranks[:, 1:] != sorted_ranks[:, :-1], axis=1, out=group[:, 1:])
        skip = ~(xmax - x.min(axis=1) < _PL_SHIFT_SPAN)
        # Rows left to the caller may overflow here; their numbers are not used.
        with np.errstate(all="ignore"):
            return self._rate_ranked(sides, x, xmax, order, group, var, c2, c), skip

    def _rate_ranked(
        self,
        sides: list[Side],
        x: FloatArray,
        xmax: FloatArray,
        order: npt.NDArray[np.intp],
        group: npt.NDArray[np.int64],
        var: list[FloatArray],
        c2: FloatArray,
        c: FloatArray,
    ) -> list[tuple[FloatArray, FloatArray]]:
        """``_many_teams`` (its shifted branch) and the players' steps.

        Works on places in rank order; ``group`` is each place's tie group (0 = first).
        """
        k = len(sides)
        rows = x.shape[0]
        row = np.arange(rows)
        worth = np.take_along_axis(np.exp(x - xmax[:, None]), order, axis=1)
        # Sums over C_q of the shifted worths, in the scalar order: groups from the last
        # up, the members of a group in place order; suffix[:, g] is the sum once group
        # g is in. (Without ties: places from the last up.)
        places = np.broadcast_to(np.arange(k), (rows, k))
        sequence = np.lexsort((places, -group), axis=-1)
        group_seq = np.take_along_axis(group, sequence, axis=1)
        worth_seq = np.take_along_axis(worth, sequence, axis=1)
        ends = np.ones((rows, k), np.bool_)
        ends[:, :-1] = group_seq[:, 1:] != group_seq[:, :-1]
        suffix = np.zeros((rows, k))
        acc = np.zeros(rows)
        for t in range(k):
            acc = acc + worth_seq[:, t]
            at = group_seq[:, t]
            suffix[row, at] = np.where(ends[:, t], acc, suffix[row, at])
        # Omega_i and Delta_i: 1 / A over the sums of p_{i,g} for g up to i's own group.
        size = (group[:, :, None] == group[:, None, :]).sum(axis=2)
        om = 1.0 / size
        de = np.zeros((rows, k))
        for g in range(k):
            into = g <= group
            p = worth / suffix[:, g : g + 1]
            om = np.where(into, om - p, om)
            de = np.where(into, de + p * (1.0 - p), de)
        omega_sorted = om
        delta_sorted = de
        omega = np.empty_like(worth)
        delta = np.empty_like(worth)
        np.put_along_axis(omega, order, omega_sorted, axis=1)
        np.put_along_axis(delta, order, delta_sorted, axis=1)
        c3 = c2 * c
        return [
            self._players(side, omega[:, j], delta[:, j], var[j], c, c3)
            for j, side in enumerate(sides)
        ]


class EloKernel(Kernel):
    """``Elo.rate`` over a block: duels (pairwise, any number of teams) or, for two
    teams, the duel of the team ratings (full)."""

    exact_skills = True

    def __init__(self, model: Elo) -> None:
        params = model.params
        self._k = float(params["k_factor"])
        self._logistic = params["model"] == "logistic"
        self._rho_per_point = _LN10 / float(params["scale"])
        self._z_per_point = 1.0 / (math.sqrt(2.0) * float(params["beta"]))
        self._full = params["multiplayer"] == "full"
        self.mean = params["multiplayer"] == "pairwise_mean"
        # "full" with three or more teams is a whole-order likelihood: one at a time.
        self.many_teams = not self._full
        self._gauss_mle = params["rule"] == "mle" or self._full
        self._mle_gain = self._k * _MLE_GAIN
        self.quality_beta = model.quality_beta

    def weights(self, raw: list[list[float]]) -> list[list[float]]:
        if not self._full:
            return raw
        # "full": member i of team j receives n_j (w_i / W_j) D_j and the team is rated by
        # sum (w_i / W_j) r_i (``Elo._team_ratings``); a team with W_j = 0 did not play.
        out: list[list[float]] = []
        for row in raw:
            total = math.fsum(row)
            out.append([w / total for w in row] if total > 0.0 else [0.0] * len(row))
        return out

    def duels(self, teams: tuple[int, ...]) -> int:
        if self._full:
            return 0
        players = sum(teams)
        return (players * players - sum(n * n for n in teams)) // 2

    def rate_many(
        self, sides: list[Side], ranks: FloatArray
    ) -> tuple[list[tuple[FloatArray, FloatArray]], BoolArray]:
        if self._full:
            raise RatingInputError("teams", "whole-order Elo rates 3+ teams one at a time")
        return _elo_rate_many(self, sides, ranks)

    def _inverse_mills(self, z: FloatArray) -> FloatArray:
        """``elo._inverse_mills`` elementwise (the continued fraction below -5)."""
        out = np.empty_like(z)
        plain = z > _MILLS_TAIL
        zp = z[plain]
        phi = 0.5 * _special.erfc(-zp * _INV_SQRT2)
        out[plain] = _INV_SQRT_2PI * np.exp(-0.5 * zp * zp) / phi
        tail = ~plain
        if tail.any():
            t = -z[tail]
            frac = t
            for n in range(40, 0, -1):
                frac = t + n / frac
            out[tail] = frac
        return out

    def duel(self, score: FloatArray, gap: FloatArray) -> FloatArray:
        """``Elo._duel`` elementwise: outcome scores S and gaps d = r_i - r_j."""
        if self._logistic:
            x = -gap * self._rho_per_point
            p = np.where(x < 700.0, 1.0 / (1.0 + np.exp(np.minimum(x, 700.0))), 0.0)
            out: FloatArray = self._k * (score - p)
            return out
        z = gap * self._z_per_point
        if self._gauss_mle:
            gain = self._mle_gain
            up = self._inverse_mills(z)
            down = self._inverse_mills(-z)
            out = np.where(
                score == 1.0,
                gain * up,
                np.where(score == 0.0, -gain * down, gain * (score * up - (1.0 - score) * down)),
            )
            return out
        out = self._k * (score - 0.5 * _special.erfc(-z * _INV_SQRT2))
        return out

    def rate(
        self, a: Side, b: Side, outcome: IntArray, weighted: BoolArray
    ) -> tuple[FloatArray, FloatArray, FloatArray, FloatArray]:
        score = np.where(outcome == FIRST_WINS, 1.0, np.where(outcome == SECOND_WINS, 0.0, 0.5))
        n0 = a.mu.shape[1]
        n1 = b.mu.shape[1]
        zeros_a = np.zeros_like(a.mu)
        zeros_b = np.zeros_like(b.mu)
        if self._full:
            plain_a = _column_sum(a.mu) / n0
            plain_b = _column_sum(b.mu) / n1
            r_a = np.where(weighted, _column_sum(a.weight * a.mu), plain_a)
            r_b = np.where(weighted, _column_sum(b.weight * b.mu), plain_b)
            both = ~weighted | ((a.weight > 0.0).any(axis=1) & (b.weight > 0.0).any(axis=1))
            d = np.where(both, self.duel(score, r_a - r_b), 0.0)
            wcol = weighted[:, None]
            delta_a = np.where(wcol, (n0 * d)[:, None] * a.weight, d[:, None])
            delta_b = np.where(wcol, (n1 * -d)[:, None] * b.weight, -d[:, None])
            return a.mu + delta_a, zeros_a, b.mu + delta_b, zeros_b
        # The duelling heuristic, accumulated in the scalar loop's order (every player of
        # team 0 in turn against every player of team 1).
        cols_a: list[FloatArray] = [np.zeros(a.mu.shape[0]) for _ in range(n0)]
        cols_b: list[FloatArray] = [np.zeros(a.mu.shape[0]) for _ in range(n1)]
        for i in range(n0):
            for j in range(n1):
                dd = self.duel(score, a.mu[:, i] - b.mu[:, j]) * (a.weight[:, i] * b.weight[:, j])
                cols_a[i] = cols_a[i] + dd
                cols_b[j] = cols_b[j] - dd
        delta_a = np.stack(cols_a, axis=1)
        delta_b = np.stack(cols_b, axis=1)
        if self.mean:
            # Each player's mean over its opponents: n - n_0 = n_1 of them for team 0.
            delta_a = delta_a / n1
            delta_b = delta_b / n0
        return a.mu + delta_a, zeros_a, b.mu + delta_b, zeros_b


def _elo_rate_many(
    kernel: EloKernel, sides: list[Side], ranks: FloatArray
) -> tuple[list[tuple[FloatArray, FloatArray]], BoolArray]:
    """``Elo._pairwise_deltas_small`` over a block: every duel in the scalar loop's order.

    (Matches of more than ``elo._SMALL_MATCH`` players take ``Elo._pairwise_deltas``,
    the same sums in another order: they agree to rounding.)
    """
    team_of = [j for j, side in enumerate(sides) for _ in range(side.mu.shape[1])]
    mus = [side.mu[:, i] for side in sides for i in range(side.mu.shape[1])]
    ws = [side.weight[:, i] for side in sides for i in range(side.mu.shape[1])]
    n = len(mus)
    rows = ranks.shape[0]
    delta = [np.zeros(rows) for _ in range(n)]
    for a in range(n):
        ta = team_of[a]
        ra = ranks[:, ta]
        for b in range(a + 1, n):
            tb = team_of[b]
            if ta == tb:
                continue
            rb = ranks[:, tb]
            score = np.where(ra < rb, 1.0, np.where(ra > rb, 0.0, 0.5))
            d = kernel.duel(score, mus[a] - mus[b]) * (ws[a] * ws[b])
            delta[a] = delta[a] + d
            delta[b] = delta[b] - d
    if kernel.mean:
        delta = [d / (n - sides[team_of[i]].mu.shape[1]) for i, d in enumerate(delta)]
    out: list[tuple[FloatArray, FloatArray]] = []
    start = 0
    for side in sides:
        size = side.mu.shape[1]
        out.append(
            (side.mu + np.stack(delta[start : start + size], axis=1), np.zeros_like(side.mu))
        )
        start += size
    return out, np.zeros(rows, np.bool_)


def kernel_for(model: object) -> Kernel | None:
    """The vectorised kernel of a model of exactly one of the three core classes, else None."""
    if type(model) is TrueSkill:
        return TrueSkillKernel(model)
    if type(model) is PlackettLuce:
        return PlackettLuceKernel(model)
    if type(model) is Elo:
        return EloKernel(model)
    return None


def two_team_quality(
    kernel: Kernel, a: Side, b: Side, raw_a: FloatArray, raw_b: FloatArray
) -> FloatArray:
    """``match_quality`` for two teams over a block (the paper's equation 7, weighted).

    ``raw_*`` are the partial-play weights as given (1 for an unweighted match). Elo:
    ``entrant_quality`` (``_entrant_quality``).
    """
    if kernel.exact_skills:
        return _entrant_quality(kernel, [a, b], [raw_a, raw_b])
    beta = kernel.quality_beta
    beta2 = beta * beta
    b_: list[FloatArray] = []  # beta^2 sum w^2, per team
    v_: list[FloatArray] = []  # b_j + sum w^2 sigma^2
    m_: list[FloatArray] = []  # sum w mu
    for side, w in ((a, raw_a), (b, raw_b)):
        w2 = w * w
        sw2 = _column_sum(w2)
        if (sw2 == 0.0).any() or (beta2 * sw2 < MIN_TEAM_VARIANCE).any():
            raise RatingInputError("weights", "a team's performance variance is too small")
        bj = beta2 * sw2
        b_.append(bj)
        # Elo rates exact skills: quality passes a deviation whose square underflows to 0.
        v_.append(bj + _column_sum(w2 * side.sigma * side.sigma))
        m_.append(_column_sum(w * side.mu))
    vt = v_[0] + v_[1]
    d = m_[0] - m_[1]
    log_q = 0.5 * np.log((b_[0] + b_[1]) / vt) - 0.5 * d * d / vt
    q = np.exp(np.minimum(log_q, 0.0))
    out: FloatArray = np.where(log_q >= 0.0, 1.0, np.where(q >= QUALITY_FLOOR, q, QUALITY_FLOOR))
    return out


def many_team_quality(kernel: Kernel, sides: list[Side], raws: list[FloatArray]) -> FloatArray:
    """``match_quality`` for k >= 3 teams over a block (equation 7 generalised, in O(k)).

    ``rating-models.md`` section 1: log q = 1/2 [sum_j log(B_j / V_j) + log sum_j 1/B_j
    - log sum_j 1/V_j] - 1/2 sum_j (m_j - m_bar)^2 / V_j. The scalar function sums with
    ``math.fsum`` (exactly rounded), these are plain sums: they agree to rounding. Elo:
    ``entrant_quality`` (``_entrant_quality``).
    """
    if kernel.exact_skills:
        return _entrant_quality(kernel, sides, raws)
    beta = kernel.quality_beta
    beta2 = beta * beta
    b_: list[FloatArray] = []
    v_: list[FloatArray] = []
    m_: list[FloatArray] = []
    for side, w in zip(sides, raws, strict=True):
        w2 = w * w
        sw2 = _column_sum(w2)
        if (sw2 == 0.0).any() or (beta2 * sw2 < MIN_TEAM_VARIANCE).any():
            raise RatingInputError("weights", "a team's performance variance is too small")
        bj = beta2 * sw2
        b_.append(bj)
        v_.append(bj + _column_sum(w2 * side.sigma * side.sigma))
        m_.append(_column_sum(w * side.mu))
    inv_v = [1.0 / v for v in v_]
    sum_inv_v = sum(inv_v[1:], inv_v[0])
    m_bar = sum((m * iv for m, iv in zip(m_, inv_v, strict=True)), np.zeros_like(sum_inv_v))
    m_bar = m_bar / sum_inv_v
    quad = sum(
        ((m - m_bar) ** 2 * iv for m, iv in zip(m_, inv_v, strict=True)), np.zeros_like(sum_inv_v)
    )
    log_ratio = sum((np.log(b / v) for b, v in zip(b_, v_, strict=True)), np.zeros_like(sum_inv_v))
    inv_b = [1.0 / b for b in b_]
    log_det_ratio = log_ratio + np.log(sum(inv_b[1:], inv_b[0])) - np.log(sum_inv_v)
    log_q = 0.5 * log_det_ratio - 0.5 * quad
    q = np.exp(np.minimum(log_q, 0.0))
    out: FloatArray = np.where(log_q >= 0.0, 1.0, np.where(q >= QUALITY_FLOOR, q, QUALITY_FLOOR))
    return out


def _entrant_quality(kernel: Kernel, sides: list[Side], raws: list[FloatArray]) -> FloatArray:
    """``entrant_quality`` of Elo's team ratings over a block: each team rated by the
    weight-averaged mean of its members (``Elo._team_ratings``: the weights normalised
    first; a team whose weights are all 0 by its plain mean), q = exp(-sum_j (R_j -
    R_bar)^2 / (2 beta^2)). Plain sums where the scalar code takes ``math.fsum``."""
    beta = kernel.quality_beta
    ratings: list[FloatArray] = []
    for side, w in zip(sides, raws, strict=True):
        plain = _column_sum(side.mu) / side.mu.shape[1]
        total = _column_sum(w)
        played = total > 0.0
        share = w / np.where(played, total, 1.0)[:, None]
        ratings.append(np.where(played, _column_sum(share * side.mu), plain))
    r_bar = sum(ratings[1:], ratings[0]) / len(ratings)
    with np.errstate(over="ignore"):  # a square past the float range is inf: q underflows
        log_q = sum((((r - r_bar) / beta) ** 2 for r in ratings), np.zeros_like(r_bar)) * -0.5
    q = np.exp(np.minimum(log_q, 0.0))
    out: FloatArray = np.where(log_q >= 0.0, 1.0, np.where(q >= QUALITY_FLOOR, q, QUALITY_FLOOR))
    return out


__all__: Sequence[str] = [
    "DRAWN",
    "FIRST_WINS",
    "SECOND_WINS",
    "Kernel",
    "Side",
    "kernel_for",
    "many_team_quality",
    "two_team_quality",
]
