"""The Elo family: hand-computed values, Kerby's closed forms, quadrature, properties, inputs."""

from __future__ import annotations

import copy
import itertools
import json
import math
from pathlib import Path
from statistics import NormalDist

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import integrate

from app.rating import Rating, RatingInputError
from app.rating.elo import MAX_ABS_RATING, Elo
from app.rating.quality import QUALITY_FLOOR
from app.rating.registry import make_model
from tests.rating.test_thurstone import reference_nested

PHI = NormalDist()
# The quadrature references ask for more digits than quad always certifies; tests check them.
pytestmark = pytest.mark.filterwarnings("ignore::scipy.integrate.IntegrationWarning")
VARIANTS = [
    (model, rule, multiplayer)
    for model in ("logistic", "gaussian")
    for rule in ("classic", "mle")
    for multiplayer in ("pairwise_mean", "pairwise_sum", "full")
]


def rt(mu: float) -> Rating:
    return Rating(float(mu), 0.0)


def mus(teams: list[list[Rating]]) -> list[list[float]]:
    return [[p.mu for p in team] for team in teams]


def deltas(model: Elo, teams: list[list[Rating]], **kwargs: object) -> list[list[float]]:
    new = model.rate(teams, **kwargs)  # type: ignore[arg-type]
    return [
        [b.mu - a.mu for a, b in zip(t0, t1, strict=True)]
        for t0, t1 in zip(teams, new, strict=True)
    ]


def p_logistic(a: float, b: float, scale: float = 400.0) -> float:
    """P(a beats b) = 1 / (1 + 10^((b - a)/scale))."""
    return 1.0 / (1.0 + 10.0 ** ((b - a) / scale))


def inverse_mills(z: float) -> float:
    return PHI.pdf(z) / PHI.cdf(z)


def kerby_gradient(rho: list[float], order: list[int]) -> list[float]:
    """Kerby section 3.2, literally, in his orientation: X_1 < X_2 < ... < X_n, the last wins.

    Plackett-Luce with the winner chosen first and strengths e^rho is his model with the
    orientation reversed, i.e. his formula with rho' = -rho and the order read winner first;
    then d/d rho = -d/d rho'.
    """
    n = len(order)
    rho_p = [-rho[k] for k in order]  # rho' in place order, place 1 = our winner
    lam = [math.exp(-r) for r in rho_p]  # his lambda_i = e^{-rho'_i}
    grad = [0.0] * n
    for k in range(n):
        g = -1.0 + sum(lam[k] / sum(lam[i:]) for i in range(k + 1))
        grad[order[k]] = -g
    return grad


GOLDEN = json.loads((Path(__file__).parent / "golden" / "elo.json").read_text())["cases"]


@pytest.mark.parametrize(
    "case",
    GOLDEN,
    ids=lambda c: "-".join([c["params"]["model"], c["params"]["rule"], c["params"]["multiplayer"]]),
)
def test_golden_against_the_reference_implementation(case: dict[str, object]) -> None:
    """elo.json: written by golden/gen_elo.py from a slow independent reference."""
    teams = [[rt(x) for x in team] for team in case["teams"]]  # type: ignore[attr-defined]
    new = Elo(**case["params"]).rate(  # type: ignore[arg-type]
        teams,
        ranks=case["ranks"],
        weights=case["weights"],  # type: ignore[arg-type]
    )
    expected = case["expected"]
    assert [len(t) for t in new] == [len(t) for t in expected]  # type: ignore[attr-defined]
    np.testing.assert_allclose(
        [p.mu for team in new for p in team],
        [x for team in expected for x in team],  # type: ignore[attr-defined]
        atol=1e-9,
        rtol=0,
    )
    assert all(p.sigma == 0.0 for team in new for p in team)


class TestDefaultsAndParams:
    def test_defaults_are_locked(self) -> None:
        assert Elo().params == {
            "initial": 1500.0,
            "k_factor": 32.0,
            "model": "logistic",
            "scale": 400.0,
            "beta": 200.0,
            "rule": "classic",
            "multiplayer": "pairwise_mean",
            "advantage": 0.0,
            "margin": 0.0,
            "stat_scale": 0.0,
            "stat_weight": 0.1,
            "stat_spread": 0.0,
        }
        assert Elo.name == "elo"

    def test_registry_builds_it_from_its_params(self) -> None:
        model = make_model("elo", {"model": "gaussian", "multiplayer": "full", "k_factor": 24})
        assert isinstance(model, Elo)
        assert make_model("elo", model.params).params == model.params

    def test_rating_has_no_uncertainty(self) -> None:
        elo = Elo(initial=1200)
        assert elo.rating() == Rating(1200.0, 0.0)
        assert elo.rating(1733.5, 50.0) == Rating(1733.5, 0.0)  # sigma is ignored
        assert elo.rating().conservative() == 1200.0

    def test_no_draw_model(self) -> None:
        assert Elo().draw_probability([[rt(1500)], [rt(1700)]]) is None


class TestTwoPlayersByHand:
    def test_even_logistic_win_moves_half_k(self) -> None:
        w, l = Elo().rate_1vs1(rt(1500), rt(1500))
        assert (w, l) == (Rating(1516.0, 0.0), Rating(1484.0, 0.0))

    def test_unequal_logistic(self) -> None:
        # P(1600 beats 1400) = 1 / (1 + 10^(-200/400)) = 0.7597469266479578
        w, l = Elo().rate_1vs1(rt(1600), rt(1400))
        assert w.mu == pytest.approx(1600 + 7.688098347265349, abs=1e-12)  # 32 (1 - P)
        assert l.mu == pytest.approx(1400 - 7.688098347265349, abs=1e-12)
        w, l = Elo().rate_1vs1(rt(1400), rt(1600))  # the upset
        assert w.mu == pytest.approx(1400 + 24.31190165273465, abs=1e-12)  # 32 P
        assert l.mu == pytest.approx(1600 - 24.31190165273465, abs=1e-12)

    def test_draw_logistic(self) -> None:
        hi, lo = Elo().rate_1vs1(rt(1600), rt(1400), drawn=True)
        assert hi.mu == pytest.approx(1600 - 8.311901652734651, abs=1e-12)  # 32 (1/2 - P)
        assert lo.mu == pytest.approx(1400 + 8.311901652734651, abs=1e-12)
        assert Elo().rate_1vs1(rt(1500), rt(1500), drawn=True) == (rt(1500), rt(1500))

    def test_k_and_scale(self) -> None:
        w, _ = Elo(k_factor=10, scale=200).rate_1vs1(rt(1600), rt(1400))
        assert w.mu == pytest.approx(1600 + 10 * (1 - 1 / (1 + 10 ** (-1.0))), abs=1e-12)

    def test_gaussian_classic(self) -> None:
        # The paper's equation 1: P = Phi((s1 - s2) / (sqrt 2 beta)), beta = 200.
        p = PHI.cdf(200 / (math.sqrt(2) * 200))
        w, l = Elo(model="gaussian").rate_1vs1(rt(1600), rt(1400))
        assert w.mu == pytest.approx(1600 + 32 * (1 - p), abs=1e-12)
        assert l.mu == pytest.approx(1400 - 32 * (1 - p), abs=1e-12)
        hi, _ = Elo(model="gaussian", beta=100).rate_1vs1(rt(1600), rt(1400), drawn=True)
        assert hi.mu == pytest.approx(1600 + 32 * (0.5 - PHI.cdf(200 / (math.sqrt(2) * 100))))
        assert Elo(model="gaussian").rate_1vs1(rt(1500), rt(1500))[0].mu == 1516.0

    def test_gaussian_mle_moves_an_even_match_like_classic(self) -> None:
        w, l = Elo(model="gaussian", rule="mle").rate_1vs1(rt(1500), rt(1500))
        assert w.mu == pytest.approx(1516.0, abs=1e-12)
        assert l.mu == pytest.approx(1484.0, abs=1e-12)

    def test_gaussian_mle_is_the_scaled_likelihood_gradient(self) -> None:
        # d/dr_w log Phi(z) = V(z) / (sqrt 2 beta), scaled by K sqrt(pi) beta / 2.
        for rw, rl, beta in [(1400, 1600, 200), (1600, 1400, 200), (1500, 2300, 150)]:
            z = (rw - rl) / (math.sqrt(2) * beta)
            expected = 32 * math.sqrt(math.pi) * beta / 2 * inverse_mills(z) / (math.sqrt(2) * beta)
            w, l = Elo(model="gaussian", rule="mle", beta=beta).rate_1vs1(rt(rw), rt(rl))
            assert w.mu - rw == pytest.approx(expected, rel=1e-12)
            assert l.mu - rl == pytest.approx(-expected, rel=1e-12)

    def test_gaussian_mle_draw_is_half_a_win_and_half_a_loss(self) -> None:
        z = 200 / (math.sqrt(2) * 200)
        gain = 32 * math.sqrt(math.pi / 8)
        hi, lo = Elo(model="gaussian", rule="mle").rate_1vs1(rt(1600), rt(1400), drawn=True)
        expected = gain * 0.5 * (inverse_mills(z) - inverse_mills(-z))
        assert expected < 0
        assert hi.mu - 1600 == pytest.approx(expected, rel=1e-12)
        assert lo.mu - 1400 == pytest.approx(-expected, rel=1e-12)

    def test_gaussian_mle_is_unbounded_and_finite_for_huge_upsets(self) -> None:
        # V(z) ~ -z for z -> -inf (Kerby section 2.2): the step grows with the upset.
        w, l = Elo(model="gaussian", rule="mle").rate_1vs1(rt(0), rt(1e6))
        z = -1e6 / (math.sqrt(2) * 200)
        assert w.mu == pytest.approx(32 * math.sqrt(math.pi / 8) * (-z - 1 / z), rel=1e-9)
        assert math.isfinite(l.mu)

    def test_inverse_mills_ratio_is_exact_across_the_tail_switch(self) -> None:
        from scipy.special import log_ndtr

        from app.rating.elo import _inverse_mills

        for z in [3.0, 0.0, -4.9, -5.0, -5.1, -8.0]:
            exact = math.exp(-0.5 * z * z - 0.5 * math.log(2 * math.pi) - float(log_ndtr(z)))
            assert _inverse_mills(z) == pytest.approx(exact, rel=1e-13)
        for t in [100.0, 1e4, 1e8]:
            # Far tail: the asymptotic series t + 1/t - 2/t^3 + 10/t^5 - 74/t^7.
            series = t + 1 / t - 2 / t**3 + 10 / t**5 - 74 / t**7
            assert _inverse_mills(-t) == pytest.approx(series, rel=1e-15)

    def test_logistic_mle_is_classic(self) -> None:
        for a, b, drawn in [(1500, 1500, False), (1620, 1390, False), (1390, 1620, True)]:
            assert Elo(rule="mle").rate_1vs1(rt(a), rt(b), drawn) == Elo().rate_1vs1(
                rt(a), rt(b), drawn
            )

    @pytest.mark.parametrize(("model", "rule", "multiplayer"), VARIANTS)
    def test_rate_1vs1_equals_rate(self, model: str, rule: str, multiplayer: str) -> None:
        elo = Elo(model=model, rule=rule, multiplayer=multiplayer)
        for a, b, drawn in [(1500, 1500, False), (1700, 1450, False), (1450, 1700, True)]:
            w, l = elo.rate_1vs1(rt(a), rt(b), drawn)
            assert elo.rate([[rt(a)], [rt(b)]], ranks=[0, 0] if drawn else [0, 1]) == [[w], [l]]


class TestPairwise:
    def test_free_for_all_mean_by_hand(self) -> None:
        r = [1500.0, 1600.0, 1400.0]
        got = deltas(Elo(), [[rt(x)] for x in r])  # listed winner first
        # Player 0 beat 1 and 2; player 1 beat 2 and lost to 0; player 2 lost to both.
        d01 = 32 * (1 - p_logistic(r[0], r[1]))
        d02 = 32 * (1 - p_logistic(r[0], r[2]))
        d12 = 32 * (1 - p_logistic(r[1], r[2]))
        assert got[0][0] == pytest.approx((d01 + d02) / 2, abs=1e-12)
        assert got[1][0] == pytest.approx((-d01 + d12) / 2, abs=1e-12)
        assert got[2][0] == pytest.approx((-d02 - d12) / 2, abs=1e-12)
        summed = deltas(Elo(multiplayer="pairwise_sum"), [[rt(x)] for x in r])
        np.testing.assert_allclose(summed, 2 * np.array(got), atol=1e-12)

    def test_teams_duel_player_by_player(self) -> None:
        teams = [[rt(1500), rt(1700)], [rt(1550), rt(1620)], [rt(1480), rt(1660)]]
        got = deltas(Elo(model="gaussian"), teams, ranks=[2, 1, 1])
        p = lambda a, b: PHI.cdf((a - b) / (math.sqrt(2) * 200))  # noqa: E731
        # Team 0 lost to both; team 1 and 2 drew.
        a = teams[0][1].mu
        expected = sum(32 * (0 - p(a, x.mu)) for x in teams[1] + teams[2]) / 4
        assert got[0][1] == pytest.approx(expected, abs=1e-12)
        b = teams[1][0].mu
        expected = (
            sum(32 * (1 - p(b, x.mu)) for x in teams[0])
            + sum(32 * (0.5 - p(b, x.mu)) for x in teams[2])
        ) / 4
        assert got[1][0] == pytest.approx(expected, abs=1e-12)

    def test_partial_play_weights_each_duel_by_both_players(self) -> None:
        teams = [[rt(1500), rt(1600)], [rt(1550)]]
        weights = [[1.0, 0.5], [0.8]]
        got = deltas(Elo(), teams, weights=weights)
        d0 = 32 * (1 - p_logistic(1500, 1550)) * 1.0 * 0.8
        d1 = 32 * (1 - p_logistic(1600, 1550)) * 0.5 * 0.8
        assert got[0] == pytest.approx([d0, d1], abs=1e-12)
        assert got[1][0] == pytest.approx(-(d0 + d1) / 2, abs=1e-12)
        absent = deltas(Elo(), teams, weights=[[1.0, 0.0], [1.0]])
        assert absent[0][1] == 0.0

    def test_large_matches_take_the_array_path_with_the_same_numbers(self) -> None:
        rng = np.random.default_rng(3)
        teams = [[rt(x) for x in rng.normal(1500, 200, 3)] for _ in range(5)]  # 15 players
        for model, rule in [("logistic", "classic"), ("gaussian", "classic"), ("gaussian", "mle")]:
            elo = Elo(model=model, rule=rule)
            got = deltas(elo, teams, ranks=[3, 0, 1, 1, 2])
            for j, team in enumerate(teams):
                for i, player in enumerate(team):
                    total = 0.0
                    for k, other_team in enumerate(teams):
                        if k == j:
                            continue
                        for other in other_team:
                            ranks = [3, 0, 1, 1, 2]
                            drawn = ranks[j] == ranks[k]
                            if ranks[j] <= ranks[k]:
                                new, _ = elo.rate_1vs1(player, other, drawn)
                                total += new.mu - player.mu
                            else:
                                _, new = elo.rate_1vs1(other, player)
                                total += new.mu - player.mu
                    assert got[j][i] == pytest.approx(total / 12, abs=1e-11)


class TestFullLogistic:
    def test_two_entrants_are_classic_elo(self) -> None:
        teams = [[rt(1500), rt(1700)], [rt(1550), rt(1550)]]
        got = deltas(Elo(multiplayer="full"), teams)
        d = 32 * (1 - p_logistic(1600, 1550))
        np.testing.assert_allclose(got, [[d, d], [-d, -d]], atol=1e-12)
        drawn = deltas(Elo(multiplayer="full"), teams, ranks=[1, 1])
        d = 32 * (0.5 - p_logistic(1600, 1550))
        np.testing.assert_allclose(drawn, [[d, d], [-d, -d]], atol=1e-12)

    def test_many_entrants_against_kerbys_closed_form(self) -> None:
        r = [1500.0, 1620.0, 1450.0, 1580.0, 1710.0]
        ranks = [2, 0, 4, 1, 3]
        got = deltas(Elo(multiplayer="full"), [[rt(x)] for x in r], ranks=ranks)
        rho = [x * math.log(10) / 400 for x in r]
        order = sorted(range(5), key=lambda j: ranks[j])
        expected = [32 * g for g in kerby_gradient(rho, order)]
        np.testing.assert_allclose([d[0] for d in got], expected, atol=1e-12)

    def test_float_and_array_gradients_agree_for_any_gap(self) -> None:
        from app.rating.elo import _plackett_luce_gradient, _plackett_luce_gradient_one

        rng = np.random.default_rng(5)
        for spread in (0.1, 3.0, 5000.0):
            rho = rng.normal(0.0, spread, 9)
            order = [int(x) for x in rng.permutation(9)]
            one = _plackett_luce_gradient_one(rho.tolist(), order)
            many = _plackett_luce_gradient(rho, np.asarray([order]))
            np.testing.assert_allclose(one, many, atol=1e-12)
            assert np.isfinite(one).all()

    def test_ties_average_over_the_orders_of_the_tied_group(self) -> None:
        r = [1500.0, 1620.0, 1450.0, 1580.0]
        ranks = [1, 0, 1, 2]
        got = deltas(Elo(multiplayer="full"), [[rt(x)] for x in r], ranks=ranks)
        rho = [x * math.log(10) / 400 for x in r]
        g = np.mean([kerby_gradient(rho, [1, 0, 2, 3]), kerby_gradient(rho, [1, 2, 0, 3])], axis=0)
        np.testing.assert_allclose([d[0] for d in got], 32 * g, atol=1e-12)

    def test_tied_equals_are_treated_alike(self) -> None:
        for model in ("logistic", "gaussian"):
            got = deltas(
                Elo(model=model, multiplayer="full"),
                [[rt(1550)], [rt(1600)], [rt(1600)], [rt(1500)]],
                ranks=[0, 1, 1, 2],
            )
            assert got[1][0] == pytest.approx(got[2][0], abs=1e-10)

    def test_partial_play_shares_the_team_change_by_playing_time(self) -> None:
        teams = [[rt(1500), rt(1700)], [rt(1550), rt(1550)]]
        got = deltas(Elo(multiplayer="full"), teams, weights=[[1.0, 0.5], [1.0, 1.0]])
        team0 = (1500 + 0.5 * 1700) / 1.5
        d = 32 * (1 - p_logistic(team0, 1550))
        np.testing.assert_allclose(got, [[2 * d / 1.5, d / 1.5], [-d, -d]], atol=1e-12)
        assert sum(map(sum, got)) == pytest.approx(0.0, abs=1e-12)

    def test_a_team_that_did_not_play_is_left_out(self) -> None:
        teams = [[rt(1500)], [rt(1650)], [rt(1400)]]
        got = deltas(Elo(multiplayer="full"), teams, weights=[[0.0], [1.0], [1.0]])
        d = 32 * (1 - p_logistic(1650, 1400))
        np.testing.assert_allclose(got, [[0.0], [d], [-d]], atol=1e-12)

    @pytest.mark.parametrize(
        "ranks",
        [
            [0, 1, 1, 1, 1, 1, 1, 2],  # a tie of six: 720 orders
            [1, 1, 1, 1, 1, 1, 0, 2],
            [0, 0, 0, 1, 2, 2, 2, 2],  # a tie of three and one of four: 144 orders
            [2, 0, 2, 1, 2, 0, 2, 2],  # ties of two and of five: 240 orders
        ],
    )
    def test_ties_are_the_average_over_every_order_by_brute_force(self, ranks: list[int]) -> None:
        # The subset sums are exact: the same numbers as enumerating every order.
        r = [1500.0, 1620.0, 1450.0, 1580.0, 1710.0, 1390.0, 1555.0, 1640.0]
        got = deltas(Elo(multiplayer="full"), [[rt(x)] for x in r], ranks=ranks)
        rho = [x * math.log(10) / 400 for x in r]
        consistent = [
            list(p)
            for p in itertools.permutations(range(8))
            if all(ranks[p[i]] <= ranks[p[i + 1]] for i in range(7))
        ]
        g = np.mean([kerby_gradient(rho, o) for o in consistent], axis=0)
        np.testing.assert_allclose([d[0] for d in got], 32 * g, atol=1e-12, rtol=0)

    def test_large_ties_are_averaged_exactly(self) -> None:
        # A tie of 12 (479001600 orders) by its 4095 subsets, against a tie of 12 written as
        # nested ties: the average over the orders of the last 11 given the first, averaged
        # over which of the 12 comes first, is the same average; and equals stay equal.
        r = [1500.0 + 37.0 * ((7 * i) % 12) for i in range(12)]
        teams = [[rt(x)] for x in r]
        elo = Elo(multiplayer="full")
        got = np.array([d[0] for d in deltas(elo, teams, ranks=[0] * 12)])
        assert abs(got.sum()) < 1e-12
        rho = [x * math.log(10) / 400 for x in r]
        from app.rating.elo import _plackett_luce_tie_gradient

        nested = np.zeros(12)
        for first in range(12):
            rest = [j for j in range(12) if j != first]
            g = _plackett_luce_tie_gradient(rho, [[first], rest])
            nested += np.asarray(g) / 12
        np.testing.assert_allclose(got, 32 * nested, atol=1e-12, rtol=0)
        equal = deltas(elo, [[rt(1500)]] * 3 + [[rt(1600)]] * 9, ranks=[0] * 12)
        assert len({d[0] for d in equal[3:]}) == 1

    def test_a_tie_beyond_the_subset_limit_is_refused(self) -> None:
        from app.rating.elo import MAX_TIE_SIZE

        teams = [[rt(1500 + i)] for i in range(MAX_TIE_SIZE + 1)]
        with pytest.raises(RatingInputError) as err:
            Elo(multiplayer="full").rate(teams, ranks=[0] * (MAX_TIE_SIZE + 1))
        assert err.value.argument == "ranks"
        assert len(Elo(multiplayer="full").rate(teams, ranks=[0] * MAX_TIE_SIZE + [1])) == 17

    def test_scores_are_ranks_reversed(self) -> None:
        teams = [[rt(1500)], [rt(1620)], [rt(1450)]]
        elo = Elo(multiplayer="full")
        assert elo.rate(teams, scores=[10, 30, 10]) == elo.rate(teams, ranks=[1, 0, 1])


class TestFullGaussian:
    def test_two_entrants_are_the_mle_step(self) -> None:
        teams = [[rt(1500), rt(1700)], [rt(1550), rt(1550)]]
        for rule in ("classic", "mle"):
            got = deltas(Elo(model="gaussian", rule=rule, multiplayer="full"), teams)
            z = 50 / (math.sqrt(2) * 200)
            d = 32 * math.sqrt(math.pi / 8) * inverse_mills(z)
            np.testing.assert_allclose(got, [[d, d], [-d, -d]], atol=1e-12)
        drawn = deltas(Elo(model="gaussian", multiplayer="full"), teams, ranks=[0, 0])
        mle = Elo(model="gaussian", rule="mle").rate_1vs1(rt(1600), rt(1550), drawn=True)
        assert drawn[0][0] == pytest.approx(mle[0].mu - 1600, abs=1e-12)

    def test_even_two_entrants_move_half_k(self) -> None:
        got = deltas(Elo(model="gaussian", multiplayer="full"), [[rt(1500)] * 2, [rt(1500)] * 2])
        np.testing.assert_allclose(got, [[16, 16], [-16, -16]], atol=1e-12)

    @pytest.mark.parametrize(
        ("ratings", "beta"),
        [([1500.0, 1620.0, 1450.0], 200.0), ([1500.0, 1380.0, 1620.0, 1550.0, 1490.0], 150.0)],
    )
    def test_many_entrants_against_quadrature(self, ratings: list[float], beta: float) -> None:
        # Listed winner first; delta = K (sqrt pi / 2) beta d log P / d r, d/dr = (d/dm) / beta.
        got = deltas(
            Elo(model="gaussian", beta=beta, multiplayer="full"), [[rt(x)] for x in ratings]
        )
        _, grad_m = reference_nested([x / beta for x in ratings])
        expected = [32 * math.sqrt(math.pi) / 2 * g for g in grad_m]
        np.testing.assert_allclose([d[0] for d in got], expected, atol=1e-9)

    def test_many_tied_orders_are_refused(self) -> None:
        from app.rating.elo import MAX_TIE_ORDERS

        teams = [[rt(2130 - 10 * i)] for i in range(64)]  # rated in the order they finish
        elo = Elo(model="gaussian", multiplayer="full")
        # three ties of five: 20^3 = 8000 orders of the affine design
        ranks = [0] * 5 + [1] * 5 + [2] * 5 + list(range(3, 52))
        assert MAX_TIE_ORDERS < 20**3
        with pytest.raises(RatingInputError) as err:
            elo.rate(teams, ranks=ranks)
        assert err.value.argument == "ranks"
        # a tie of five among 64 (refused before, for its 120 orders of integration work)
        assert len(elo.rate(teams, ranks=[0] * 5 + list(range(1, 60)))) == 64

    def test_small_ties_average_over_every_order(self) -> None:
        # Groups up to EXACT_TIE_SIZE: the exact average, checked order by order.
        from app.rating.thurstone import order_log_likelihood

        r = [1500.0, 1620.0, 1450.0, 1580.0, 1710.0]
        ranks = [1, 0, 1, 1, 1]
        got = deltas(Elo(model="gaussian", multiplayer="full"), [[rt(x)] for x in r], ranks=ranks)
        orders = [[1, *p] for p in itertools.permutations([0, 2, 3, 4])]
        _, g = order_log_likelihood(
            [x / 200 for x in r], orders, step=0.08, levels=4
        )  # the log-space integrator
        expected = 32 * math.sqrt(math.pi) / 2 * g.mean(axis=0)
        np.testing.assert_allclose([d[0] for d in got], expected, atol=1e-8, rtol=0)

    def test_affine_design_balances_pairs_of_places(self) -> None:
        from app.rating.elo import _group_orders

        for m in (5, 7, 11):  # prime: sharply 2-transitive, every pair once
            rows = _group_orders(list(range(m)), [0.0] * m)
            assert len(rows) == m * (m - 1)
            pairs = {
                (row.index(a), row.index(b), a, b)
                for row in rows
                for a in range(m)
                for b in range(m)
                if a != b
            }
            assert len(pairs) == (m * (m - 1)) ** 2
        for m in (6, 8, 12):  # not prime: every member still takes every place
            rows = _group_orders(list(range(m)), [0.0] * m)
            counts = np.zeros((m, m))
            for row in rows:
                for place, j in enumerate(row):
                    counts[j, place] += 1
            assert len(set(rows)) == len(rows)
            assert counts.min() > 0

    @pytest.mark.parametrize("ranks", [[0, 1, 1, 1, 1, 1, 2], [1, 1, 1, 0, 1, 1, 1]])
    def test_large_ties_stay_close_to_the_exact_average(self, ranks: list[int]) -> None:
        # A tie of six: the 36 orders of the design against all 720 (module docstring).
        from app.rating.thurstone import order_log_likelihood

        r = [1500.0, 1620.0, 1450.0, 1580.0, 1710.0, 1390.0, 1555.0]
        got = deltas(Elo(model="gaussian", multiplayer="full"), [[rt(x)] for x in r], ranks=ranks)
        tied = [j for j in range(7) if ranks[j] == 1]
        top = [j for j in range(7) if ranks[j] == 0]
        bottom = [j for j in range(7) if ranks[j] == 2]
        orders = [top + list(p) + bottom for p in itertools.permutations(tied)]
        _, g = order_log_likelihood([x / 200 for x in r], orders)
        exact = 32 * math.sqrt(math.pi) / 2 * g.mean(axis=0)
        dev = np.abs(np.array([d[0] for d in got]) - exact)
        assert dev.max() < 0.5
        assert abs(sum(d[0] for d in got)) < 1e-9

    def test_tied_equals_get_identical_deltas_in_large_ties(self) -> None:
        elo = Elo(model="gaussian", multiplayer="full")
        teams = [[rt(1600)], [rt(1500)], [rt(1500)], [rt(1450)], [rt(1500)], [rt(1700)]]
        got = deltas(elo, teams, ranks=[0, 1, 1, 1, 1, 1])
        assert got[1][0] == got[2][0] == got[4][0]
        assert got[3][0] != got[1][0]

    def test_ties_average_over_the_orders(self) -> None:
        ratings = [1500.0, 1620.0, 1450.0]
        got = deltas(
            Elo(model="gaussian", multiplayer="full"), [[rt(x)] for x in ratings], ranks=[0, 1, 1]
        )
        m = [x / 200 for x in ratings]
        _, g1 = reference_nested(m)  # order 0 > 1 > 2
        _, g2 = reference_nested([m[0], m[2], m[1]])  # order 0 > 2 > 1
        g = [(g1[0] + g2[0]) / 2, (g1[1] + g2[2]) / 2, (g1[2] + g2[1]) / 2]
        np.testing.assert_allclose(
            [d[0] for d in got], [32 * math.sqrt(math.pi) / 2 * x for x in g], atol=1e-9
        )


class TestPredictions:
    def test_two_team_win_probabilities(self) -> None:
        teams = [[rt(1600), rt(1500)], [rt(1450), rt(1550)]]
        p = Elo().win_probabilities(teams)
        assert p[0] == pytest.approx(p_logistic(1550, 1500), abs=1e-15)
        assert sum(p) == pytest.approx(1.0, abs=1e-15)
        g = Elo(model="gaussian").win_probabilities(teams)
        assert g[0] == pytest.approx(PHI.cdf(50 / (math.sqrt(2) * 200)), abs=1e-15)

    def test_many_teams_logistic_is_plackett_luce_first_place(self) -> None:
        r = [1500.0, 1700.0, 1450.0, 1600.0]
        p = Elo().win_probabilities([[rt(x)] for x in r])
        strengths = [10 ** (x / 400) for x in r]
        np.testing.assert_allclose(p, [s / sum(strengths) for s in strengths], atol=1e-15)

    def test_many_teams_gaussian_against_integration(self) -> None:
        r = [1500.0, 1700.0, 1450.0]
        p = Elo(model="gaussian").win_probabilities([[rt(x)] for x in r])
        for j in range(3):
            others = [x for i, x in enumerate(r) if i != j]
            ref = integrate.quad(
                lambda x, j=j, others=others: (
                    PHI.pdf((x - r[j]) / 200)
                    / 200
                    * math.prod(PHI.cdf((x - o) / 200) for o in others)
                ),
                r[j] - 4000.0,
                r[j] + 4000.0,
                points=[r[j]],
                epsabs=1e-13,
                limit=200,
            )[0]
            assert p[j] == pytest.approx(ref, abs=1e-9)

    def test_quality_is_equation_7_without_uncertainty(self) -> None:
        d = 150.0
        assert Elo(model="gaussian").quality([[rt(1500)], [rt(1500 + d)]]) == pytest.approx(
            math.exp(-(d**2) / (4 * 200**2)), rel=1e-12
        )
        beta = 2 * 400 / (math.sqrt(math.pi) * math.log(10))  # 196.0195...
        assert Elo().quality_beta == pytest.approx(196.0195383056674, rel=1e-15)
        assert Elo().quality([[rt(1500)], [rt(1500 + d)]]) == pytest.approx(
            math.exp(-(d**2) / (4 * beta**2)), rel=1e-12
        )
        assert Elo().quality([[rt(1500)], [rt(1500)]]) == 1.0
        assert Elo().quality([[rt(0)], [rt(1e6)]]) == QUALITY_FLOOR > 0.0


class TestInputs:
    @pytest.mark.parametrize(
        ("kwargs", "argument"),
        [
            ({"initial": math.inf}, "initial"),
            ({"initial": 1e13}, "initial"),
            ({"k_factor": 0}, "k_factor"),
            ({"k_factor": "32"}, "k_factor"),
            ({"model": "normal"}, "model"),
            ({"scale": -400}, "scale"),
            ({"beta": math.nan}, "beta"),
            ({"rule": "glicko"}, "rule"),
            ({"multiplayer": "sum"}, "multiplayer"),
            ({"multiplayer": None}, "multiplayer"),
        ],
    )
    def test_bad_parameters_are_named(self, kwargs: dict[str, object], argument: str) -> None:
        with pytest.raises(RatingInputError) as err:
            Elo(**kwargs)  # type: ignore[arg-type]
        assert err.value.argument == argument

    @pytest.mark.parametrize(
        ("call", "argument"),
        [
            (lambda e: e.rate([[rt(1500)]]), "teams"),
            (lambda e: e.rate([[rt(1500)], []]), "teams"),
            (lambda e: e.rate([[rt(1500)], [(1500.0, 0.0)]]), "teams"),
            (lambda e: e.rate([[rt(1500)], [rt(math.nan)]]), "teams"),
            (lambda e: e.rate([[rt(1500)], [rt(2e12)]]), "teams"),
            (lambda e: e.rate([[rt(1500)], [rt(1400)]], ranks=[0]), "ranks"),
            (lambda e: e.rate([[rt(1500)], [rt(1400)]], scores=[1, math.inf]), "scores"),
            (lambda e: e.rate([[rt(1500)], [rt(1400)]], weights=[[1.0], [1.5]]), "weights"),
            (lambda e: e.rate([[rt(1500)], [rt(1400)]], weights=[[1.0]]), "weights"),
            (lambda e: e.rate_1vs1((1500.0, 0.0), rt(1400)), "winner"),
            (lambda e: e.rate_1vs1(rt(1500), rt(math.inf)), "loser"),
            (lambda e: e.rate_1vs1(rt(-2e12), rt(1400)), "winner"),
            (lambda e: e.rating(math.nan), "mu"),
            (lambda e: e.quality([[rt(1500)]]), "teams"),
            (
                lambda e: e.win_probabilities([[rt(1500)], [rt(1)]], weights=[[2.0], [1.0]]),
                "weights",
            ),
            (lambda e: e.draw_probability([[rt(1500)]]), "teams"),
        ],
    )
    def test_bad_inputs_are_named(self, call, argument: str) -> None:  # type: ignore[no-untyped-def]
        for model in (Elo(), Elo(model="gaussian", multiplayer="full")):
            with pytest.raises(RatingInputError) as err:
                call(model)
            assert err.value.argument == argument

    def test_sigma_on_input_is_ignored(self) -> None:
        elo = Elo()
        assert elo.rate([[Rating(1500.0, 9.0)], [Rating(1500.0, math.nan)]]) == [
            [rt(1516)],
            [rt(1484)],
        ]


# ---------------------------------------------------------------------- properties

ratings = st.floats(min_value=0.0, max_value=3000.0, allow_nan=False)
variants = st.sampled_from(VARIANTS)


def build(variant: tuple[str, str, str]) -> Elo:
    model, rule, multiplayer = variant
    return Elo(model=model, rule=rule, multiplayer=multiplayer)


@st.composite
def equal_size_matches(
    draw: st.DrawFn,
) -> tuple[list[list[Rating]], list[int], list[list[float]] | None]:
    k = draw(st.integers(2, 5))
    size = draw(st.integers(1, 3))
    teams = [[rt(draw(ratings)) for _ in range(size)] for _ in range(k)]
    ranks = draw(st.lists(st.integers(0, 3), min_size=k, max_size=k))
    weights = draw(
        st.none() | st.just([[draw(st.floats(0.0, 1.0)) for _ in range(size)] for _ in range(k)])
    )
    return teams, ranks, weights


@settings(max_examples=60, deadline=None)
@given(variant=variants, match=equal_size_matches())
def test_updates_are_zero_sum_for_equal_team_sizes(
    variant: tuple[str, str, str],
    match: tuple[list[list[Rating]], list[int], list[list[float]] | None],
) -> None:
    teams, ranks, weights = match
    before = copy.deepcopy((teams, ranks, weights))
    elo = build(variant)
    state = copy.deepcopy(vars(elo))
    got = deltas(elo, teams, ranks=ranks, weights=weights)
    elo.win_probabilities(teams, weights=weights)
    assert (teams, ranks, weights) == before  # nothing mutated, inputs ...
    assert vars(elo) == state  # ... nor the model
    assert sum(map(sum, got)) == pytest.approx(0.0, abs=1e-9)


@settings(max_examples=60, deadline=None)
@given(
    variant=variants,
    sizes=st.tuples(st.integers(1, 3), st.integers(1, 3)),
    data=st.data(),
)
def test_winners_never_lose_in_two_team_games(
    variant: tuple[str, str, str], sizes: tuple[int, int], data: st.DataObject
) -> None:
    teams = [[rt(data.draw(ratings)) for _ in range(n)] for n in sizes]
    got = deltas(build(variant), teams)
    assert all(d >= 0.0 for d in got[0])
    assert all(d <= 0.0 for d in got[1])


@settings(max_examples=60, deadline=None)
@given(
    variant=variants,
    teams=st.lists(st.lists(ratings.map(rt), min_size=1, max_size=3), min_size=2, max_size=6),
)
def test_win_probabilities_sum_to_one_and_quality_is_in_range(
    variant: tuple[str, str, str], teams: list[list[Rating]]
) -> None:
    elo = build(variant)
    p = elo.win_probabilities(teams)
    assert len(p) == len(teams)
    assert all(0.0 <= x <= 1.0 for x in p)
    assert sum(p) == pytest.approx(1.0, abs=1e-9)
    assert 0.0 < elo.quality(teams) <= 1.0


@settings(max_examples=40, deadline=None)
@given(variant=variants, match=equal_size_matches(), seed=st.randoms(use_true_random=False))
def test_relabelling_teams_with_their_ranks_changes_nothing(
    variant: tuple[str, str, str],
    match: tuple[list[list[Rating]], list[int], list[list[float]] | None],
    seed: object,
) -> None:
    teams, ranks, weights = match
    perm = list(range(len(teams)))
    seed.shuffle(perm)  # type: ignore[attr-defined]
    elo = build(variant)
    got = elo.rate(teams, ranks=ranks, weights=weights)
    shuffled = elo.rate(
        [teams[j] for j in perm],
        ranks=[ranks[j] for j in perm],
        weights=None if weights is None else [weights[j] for j in perm],
    )
    for pos, j in enumerate(perm):
        np.testing.assert_allclose(mus([shuffled[pos]]), mus([got[j]]), atol=1e-9)
    np.testing.assert_allclose(
        [elo.win_probabilities(teams)[j] for j in perm],
        elo.win_probabilities([teams[j] for j in perm]),
        atol=1e-12,
    )


@settings(max_examples=30, deadline=None)
@given(variant=variants, data=st.data())
def test_rate_1vs1_is_rate(variant: tuple[str, str, str], data: st.DataObject) -> None:
    elo = build(variant)
    a, b = rt(data.draw(ratings)), rt(data.draw(ratings))
    drawn = data.draw(st.booleans())
    assert elo.rate([[a], [b]], ranks=[0, 0] if drawn else [0, 1]) == list(
        map(list, zip(elo.rate_1vs1(a, b, drawn), strict=True))
    )


extreme_ratings = st.sampled_from([0.0, 1e6, -1e6, 1500.0, 1e6 - 1.0]) | st.floats(-1e6, 1e6)


@settings(max_examples=40, deadline=None)
@given(
    variant=variants,
    teams=st.lists(
        st.lists(extreme_ratings.map(rt), min_size=1, max_size=4), min_size=2, max_size=16
    ),
    data=st.data(),
)
def test_outputs_stay_finite_for_extreme_ratings(
    variant: tuple[str, str, str], teams: list[list[Rating]], data: st.DataObject
) -> None:
    k = len(teams)
    ranks = data.draw(st.lists(st.integers(0, k - 1), min_size=k, max_size=k))
    elo = build(variant)
    try:
        new = elo.rate(teams, ranks=ranks)
    except RatingInputError as err:  # a tie too large for "full" to average over
        assert variant[2] == "full" and err.argument == "ranks"
        return
    assert np.isfinite([p.mu for team in new for p in team]).all()
    assert all(p.sigma == 0.0 for team in new for p in team)
    p = elo.win_probabilities(teams)
    assert np.isfinite(p).all() and sum(p) == pytest.approx(1.0, abs=1e-9)
    assert 0.0 < elo.quality(teams) <= 1.0


class TestExtremes:
    @pytest.mark.parametrize(("model", "rule", "multiplayer"), VARIANTS)
    def test_outputs_stay_finite(self, model: str, rule: str, multiplayer: str) -> None:
        elo = Elo(model=model, rule=rule, multiplayer=multiplayer)
        far = [[rt(0.0)], [rt(1e6)]]
        for ranks in ([0, 1], [1, 0], [0, 0]):
            new = elo.rate(far, ranks=ranks)
            assert np.isfinite(mus(new)).all()
            assert sum(map(sum, deltas(elo, far, ranks=ranks))) == pytest.approx(0.0, abs=1e-6)
        for winner, loser in [(rt(0.0), rt(1e6)), (rt(1e6), rt(0.0))]:
            assert all(math.isfinite(r.mu) for r in elo.rate_1vs1(winner, loser))
        rng = np.random.default_rng(11)
        ffa = [[rt(x)] for x in rng.choice([0.0, 1e6, 5e5, 1500.0], 64)]
        crowd = [[rt(x) for x in rng.uniform(0, 1e6, 4)] for _ in range(64)]  # 256 players
        ranks = [int(x) for x in rng.permutation(64)]
        for teams in (ffa, crowd):
            got = deltas(elo, teams, ranks=ranks)
            assert np.isfinite(got).all()
            assert sum(map(sum, got)) == pytest.approx(0.0, abs=1e-6 * max(1.0, np.abs(got).max()))
            p = elo.win_probabilities(teams)
            assert np.isfinite(p).all() and sum(p) == pytest.approx(1.0, abs=1e-9)
            assert 0.0 < elo.quality(teams) <= 1.0

    def test_ratings_at_the_limit_are_accepted(self) -> None:
        new = Elo(model="gaussian", rule="mle").rate_1vs1(rt(-MAX_ABS_RATING), rt(MAX_ABS_RATING))
        assert all(math.isfinite(r.mu) for r in new)


def test_variants_differ_where_they_should() -> None:
    # A three-way game: the sum variant moves by the number of opponents times the mean.
    teams = [[rt(x)] for x in (1500.0, 1550.0, 1450.0)]
    mean = deltas(Elo(), teams)
    total = deltas(Elo(multiplayer="pairwise_sum"), teams)
    full = deltas(Elo(multiplayer="full"), teams)
    np.testing.assert_allclose(total, 2 * np.array(mean), atol=1e-12)
    assert not np.allclose(full, mean)
    for perm in itertools.permutations(range(3)):
        assert len(Elo(multiplayer="full").rate([teams[j] for j in perm])) == 3
