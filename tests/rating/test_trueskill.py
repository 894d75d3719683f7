"""TrueSkill: published values, the trueskill package as oracle, integration and properties."""

from __future__ import annotations

import copy
import json
import math
import random
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import trueskill
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import integrate, stats

from app.rating.base import Rating, RatingInputError
from app.rating.quality import match_quality
from app.rating.trueskill import EP_MAX_ROUNDS, EP_TOLERANCE, TrueSkill

GOLDEN = Path(__file__).parent / "golden" / "trueskill.json"
ORACLE_MIN_DELTA = 1e-12


def _oracle(model: TrueSkill) -> trueskill.TrueSkill:
    params = {
        k: v
        for k, v in model.params.items()
        if k not in ("advantage", "margin") and not k.startswith("stat_")
    }
    return trueskill.TrueSkill(backend="scipy", **params)


def _to_oracle(teams: list[list[Rating]]) -> list[list[trueskill.Rating]]:
    return [[trueskill.Rating(r.mu, r.sigma) for r in team] for team in teams]


def _max_error(ours: list[list[Rating]], ref: Any) -> float:
    return max(
        max(abs(a.mu - b.mu), abs(a.sigma - b.sigma))
        for team_a, team_b in zip(ours, ref, strict=True)
        for a, b in zip(team_a, team_b, strict=True)
    )


class TestDefaults:
    def test_parameters_and_published_values(self) -> None:
        model = TrueSkill()
        assert model.name == "trueskill"
        assert model.params == pytest.approx(
            {
                "mu": 25.0,
                "sigma": 25 / 3,
                "beta": 25 / 6,
                "tau": 25 / 300,
                "draw_probability": 0.10,
                "advantage": 0.0,
                "margin": 0.0,
                "stat_scale": 0.0,
                "stat_noise": 1.0,
                "stat_spread": 0.0,
            }
        )
        assert model.rating() == Rating(25.0, 25 / 3)
        # The published 1 vs 1 numbers from the prior (trueskill.org / the package docs).
        winner, loser = model.rate_1vs1(model.rating(), model.rating())
        assert (round(winner.mu, 3), round(winner.sigma, 3)) == (29.396, 7.171)
        assert (round(loser.mu, 3), round(loser.sigma, 3)) == (20.604, 7.171)
        a, b = model.rate_1vs1(model.rating(), model.rating(), drawn=True)
        assert (round(a.mu, 3), round(a.sigma, 3)) == (25.000, 6.458)
        assert (round(b.mu, 3), round(b.sigma, 3)) == (25.000, 6.458)
        assert model.rate([[model.rating()], [model.rating()]]) == [[winner], [loser]]
        assert model.quality([[model.rating()], [model.rating()]]) == pytest.approx(0.4472135955)
        assert EP_TOLERANCE > 0.0 and EP_MAX_ROUNDS >= 1

    def test_rating_with_values(self) -> None:
        assert TrueSkill().rating(mu=10.0) == Rating(10.0, 25 / 3)
        assert TrueSkill(mu=0.0, sigma=2.0).rating() == Rating(0.0, 2.0)
        assert TrueSkill().rating(sigma=1.5) == Rating(25.0, 1.5)


@pytest.fixture(scope="module")
def golden() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(GOLDEN.read_text())
    return data


class TestGolden:
    def test_every_match_matches_the_oracle(self, golden: dict[str, Any]) -> None:
        checked = 0
        for scenario in golden["scenarios"]:
            model = TrueSkill(**scenario["params"])
            for match in scenario["matches"]:
                teams = [[Rating(mu, sigma) for mu, sigma in team] for team in match["before"]]
                ours = model.rate(teams, ranks=match["ranks"], weights=match["weights"])
                expected = [[Rating(mu, sigma) for mu, sigma in team] for team in match["after"]]
                assert _max_error(ours, expected) < 1e-6, (scenario["name"], match)
                checked += 1
        assert checked > 1500

    def test_replaying_whole_sequences_stays_on_the_oracle(self, golden: dict[str, Any]) -> None:
        for scenario in golden["scenarios"]:
            model = TrueSkill(**scenario["params"])
            pool: dict[int, Rating] = {}
            for match in scenario["matches"]:
                teams = [
                    [
                        pool.get(i, Rating(mu, sigma))
                        for i, (mu, sigma) in zip(ids, before, strict=True)
                    ]
                    for ids, before in zip(match["players"], match["before"], strict=True)
                ]
                ours = model.rate(teams, ranks=match["ranks"], weights=match["weights"])
                for ids, new in zip(match["players"], ours, strict=True):
                    pool.update(zip(ids, new, strict=True))
            last = {}
            for match in scenario["matches"]:
                for ids, after in zip(match["players"], match["after"], strict=True):
                    last.update(zip(ids, after, strict=True))
            for i, (mu, sigma) in last.items():
                assert pool[i].mu == pytest.approx(mu, abs=1e-6)
                assert pool[i].sigma == pytest.approx(sigma, abs=1e-6)


class TestLiveOracle:
    @pytest.mark.parametrize("seed", range(4))
    def test_random_matches(self, seed: int) -> None:
        rng = random.Random(seed)
        model = TrueSkill(draw_probability=rng.choice([0.0, 0.1, 0.3]))
        env = _oracle(model)
        for _ in range(40):
            k = rng.randint(2, 8)
            teams = [
                [
                    Rating(rng.gauss(25.0, 8.0), rng.uniform(0.5, 9.0))
                    for _ in range(rng.randint(1, 4))
                ]
                for _ in range(k)
            ]
            if model.params["draw_probability"] == 0.0:
                ranks = rng.sample(range(k), k)
            else:
                ranks = [rng.randint(0, k - 1) for _ in range(k)]
            weights = (
                [[rng.uniform(0.05, 1.0) for _ in team] for team in teams]
                if rng.random() < 0.5
                else None
            )
            ours = model.rate(teams, ranks=ranks, weights=weights)
            ref = env.rate(
                _to_oracle(teams), ranks=ranks, weights=weights, min_delta=ORACLE_MIN_DELTA
            )
            assert _max_error(ours, ref) < 1e-6

    def test_scores_and_listed_order(self) -> None:
        model = TrueSkill()
        env = _oracle(model)
        teams = [[Rating(20.0, 6.0)], [Rating(30.0, 4.0), Rating(22.0, 7.0)], [Rating(25.0, 3.0)]]
        by_scores = model.rate(teams, scores=[10, 30, 10])
        ref = env.rate(_to_oracle(teams), ranks=[1, 0, 1], min_delta=ORACLE_MIN_DELTA)
        assert _max_error(by_scores, ref) < 1e-6
        listed = model.rate(teams)
        ref = env.rate(_to_oracle(teams), min_delta=ORACLE_MIN_DELTA)
        assert _max_error(listed, ref) < 1e-6
        # Two teams given loser first by ranks.
        a, b = model.rate([[Rating(20.0, 6.0)], [Rating(30.0, 4.0)]], ranks=[2, 1])
        ref2 = env.rate(
            [[trueskill.Rating(20.0, 6.0)], [trueskill.Rating(30.0, 4.0)]], ranks=[2, 1]
        )
        assert _max_error([a, b], ref2) < 1e-9

    def test_rate_1vs1_matches_rate(self) -> None:
        model = TrueSkill(tau=0.5, draw_probability=0.2)
        a, b = Rating(31.0, 2.0), Rating(18.0, 5.0)
        for drawn in (False, True):
            ranks = [0, 0] if drawn else [0, 1]
            ([x], [y]) = model.rate([[a], [b]], ranks=ranks)
            assert model.rate_1vs1(a, b, drawn=drawn) == (x, y)

    def test_quality_matches_the_oracle(self) -> None:
        model = TrueSkill(beta=3.0)
        env = _oracle(model)
        teams = [[Rating(20.0, 6.0), Rating(27.0, 2.0)], [Rating(30.0, 4.0)], [Rating(25.0, 3.0)]]
        weights = [[1.0, 0.5], [0.8], [1.0]]
        assert model.quality(teams, weights) == pytest.approx(
            env.quality(_to_oracle(teams), weights=weights), rel=1e-10
        )
        assert model.quality(teams) == pytest.approx(match_quality(teams, None, 3.0), rel=1e-15)


class TestProbabilities:
    def test_win_probabilities_use_team_performance(self) -> None:
        model = TrueSkill()
        teams = [[Rating(27.0, 3.0), Rating(22.0, 5.0)], [Rating(26.0, 8.0)]]
        weights = [[1.0, 0.5], [1.0]]
        m1 = 27.0 + 0.5 * 22.0
        s1 = (3.0**2 + model.params["beta"] ** 2) + 0.25 * (5.0**2 + model.params["beta"] ** 2)
        m2, s2 = 26.0, 8.0**2 + model.params["beta"] ** 2
        p = model.win_probabilities(teams, weights)
        assert p[0] == pytest.approx(stats.norm.cdf((m1 - m2) / math.sqrt(s1 + s2)), rel=1e-13)
        assert sum(p) == pytest.approx(1.0, abs=1e-15)

    @pytest.mark.parametrize("k", [2, 3, 4, 5, 6])
    def test_win_probabilities_by_integration(self, k: int) -> None:
        rng = random.Random(100 + k)
        model = TrueSkill()
        beta2 = model.params["beta"] ** 2
        teams = [[Rating(rng.gauss(25.0, 5.0), rng.uniform(1.0, 8.0))] for _ in range(k)]
        means = [t[0].mu for t in teams]
        sds = [math.sqrt(t[0].sigma ** 2 + beta2) for t in teams]
        p = model.win_probabilities(teams)
        for j in range(k):

            def integrand(x: float, j: int = j) -> float:
                z = (x - means[j]) / sds[j]
                out = math.exp(-0.5 * z * z) / (sds[j] * math.sqrt(2.0 * math.pi))
                for i in range(k):
                    if i != j:
                        out *= 0.5 * math.erfc(-(x - means[i]) / (sds[i] * math.sqrt(2.0)))
                return out

            ref = integrate.quad(integrand, -np.inf, np.inf, epsabs=1e-14, epsrel=1e-12)[0]
            assert p[j] == pytest.approx(ref, abs=1e-11)

    def test_draw_probability_by_integration(self) -> None:
        model = TrueSkill(draw_probability=0.2)
        teams = [[Rating(27.0, 3.0), Rating(21.0, 5.0)], [Rating(26.0, 8.0), Rating(24.0, 2.0)]]
        beta2 = model.params["beta"] ** 2
        mean = 27.0 + 21.0 - 26.0 - 24.0
        sd = math.sqrt(9.0 + 25.0 + 64.0 + 4.0 + 4 * beta2)
        eps = stats.norm.ppf(0.6) * math.sqrt(4) * model.params["beta"]
        ref = integrate.quad(
            lambda x: stats.norm.pdf(x, mean, sd), -eps, eps, epsabs=0.0, epsrel=1e-13
        )[0]
        assert model.draw_probability(teams) == pytest.approx(ref, rel=1e-11)
        # Two even new players draw with the configured probability (the paper's 4.1).
        even = [[model.rating()], [model.rating()]]
        margin = model.draw_margin(2)
        c = math.sqrt(2 * (25 / 3) ** 2 + 2 * beta2)
        p_even = model.draw_probability(even)
        assert p_even == pytest.approx(2 * stats.norm.cdf(margin / c) - 1, rel=1e-12)
        assert model.draw_probability([[model.rating()]] * 3) is None
        assert TrueSkill(draw_probability=0.0).draw_probability(even) == 0.0


class TestPartialPlayAndEdges:
    def test_zero_weight_player_only_gets_dynamics(self) -> None:
        model = TrueSkill()
        tau = model.params["tau"]
        sitting = Rating(24.0, 4.0)
        for k in (2, 4):
            teams = [[Rating(30.0, 3.0), sitting]] + [[Rating(25.0, 5.0)] for _ in range(k - 1)]
            weights = [[1.0, 0.0]] + [[1.0] for _ in range(k - 1)]
            out = model.rate(teams, weights=weights)
            assert out[0][1].mu == pytest.approx(24.0, abs=1e-12)
            assert out[0][1].sigma == pytest.approx(math.sqrt(16.0 + tau**2), rel=1e-12)

    def test_a_team_with_no_weight_is_rejected(self) -> None:
        model = TrueSkill()
        teams = [[Rating(30.0, 3.0)], [Rating(25.0, 5.0), Rating(20.0, 5.0)], [Rating(1.0, 1.0)]]
        for method in (model.rate, model.quality, model.win_probabilities):
            with pytest.raises(RatingInputError) as info:
                method(teams, weights=[[1.0], [0.0, 0.0], [1.0]])
            assert info.value.argument == "weights"

    def test_a_team_whose_performance_variance_vanishes_is_rejected(self) -> None:
        model = TrueSkill()
        for k in (2, 3):
            teams = [[Rating(25.0, 8.0)] for _ in range(k)]
            weights = [[1e-160]] + [[1.0]] * (k - 1)
            for method in (
                model.rate,
                model.quality,
                model.win_probabilities,
                model.draw_probability,
            ):
                with pytest.raises(RatingInputError) as info:
                    method(teams, weights=weights)
                assert info.value.argument == "weights"
        tiny = TrueSkill(beta=1e-80, tau=0.0)
        for k in (2, 3):
            with pytest.raises(RatingInputError) as info:
                tiny.rate([[Rating(0.0, 1e-80)]] + [[Rating(0.0, 1.0)]] * (k - 1))
            assert info.value.argument == "teams"
        # A single vanishing weight next to a real teammate is fine.
        out = model.rate(
            [[Rating(25.0, 8.0), Rating(20.0, 3.0)], [Rating(25.0, 8.0)], [Rating(30.0, 2.0)]],
            weights=[[1e-160, 1.0], [1.0], [1.0]],
        )
        assert out[0][0].mu == 25.0

    def test_inputs_are_not_mutated(self) -> None:
        model = TrueSkill()
        teams = [[Rating(30.0, 3.0), Rating(20.0, 6.0)], [Rating(25.0, 5.0)], [Rating(22.0, 2.0)]]
        ranks = [1, 0, 1]
        weights = [[1.0, 0.5], [1.0], [0.7]]
        saved = copy.deepcopy((teams, ranks, weights))
        params = dict(model.params)
        model.rate(teams, ranks=ranks, weights=weights)
        model.quality(teams, weights)
        model.win_probabilities(teams, weights)
        assert (teams, ranks, weights) == saved
        assert model.params == params

    def test_single_round_cap_still_gives_sane_ratings(self) -> None:
        teams = [[Rating(25.0, 8.0)] for _ in range(6)]
        loose = TrueSkill(ep_max_rounds=1).rate(teams)
        tight = TrueSkill().rate(teams)
        for a, b in zip(loose, tight, strict=True):
            assert math.isfinite(a[0].mu) and 0.0 < a[0].sigma <= 8.0 + 1e-9
            assert a[0].mu == pytest.approx(b[0].mu, abs=1.0)

    @pytest.mark.parametrize(
        ("kwargs", "argument"),
        [
            ({"sigma": 0.0}, "sigma"),
            ({"beta": -1.0}, "beta"),
            ({"tau": math.nan}, "tau"),
            ({"draw_probability": 1.0}, "draw_probability"),
            ({"draw_probability": -0.1}, "draw_probability"),
            ({"mu": math.inf}, "mu"),
            ({"ep_tolerance": 0.0}, "ep_tolerance"),
            ({"ep_max_rounds": 0}, "ep_max_rounds"),
        ],
    )
    def test_invalid_parameters(self, kwargs: dict[str, float], argument: str) -> None:
        with pytest.raises(RatingInputError) as info:
            TrueSkill(**kwargs)  # type: ignore[arg-type]
        assert info.value.argument == argument

    def test_invalid_inputs(self) -> None:
        model = TrueSkill()
        good = [[Rating(25.0, 8.0)], [Rating(25.0, 8.0)]]
        cases: list[tuple[dict[str, Any], str]] = [
            ({"teams": good[:1]}, "teams"),
            ({"teams": [[Rating(25.0, 0.0)], [Rating(25.0, 8.0)]]}, "teams"),
            ({"teams": good, "ranks": [1]}, "ranks"),
            ({"teams": good, "ranks": [1, 2], "scores": [1, 2]}, "ranks"),
            ({"teams": good, "scores": [1, math.nan]}, "scores"),
            ({"teams": good, "weights": [[1.0], [1.5]]}, "weights"),
            ({"teams": good, "weights": [[1.0]]}, "weights"),
        ]
        for kwargs, argument in cases:
            with pytest.raises(RatingInputError) as info:
                model.rate(**kwargs)
            assert info.value.argument == argument
            assert isinstance(info.value, ValueError)
        with pytest.raises(RatingInputError) as info:
            model.rate_1vs1(Rating(25.0, 8.0), Rating(25.0, -1.0))
        assert info.value.argument == "teams"
        with pytest.raises(RatingInputError) as info:
            model.rating(sigma=0.0)
        assert info.value.argument == "sigma"


_finite_rating = st.builds(
    Rating,
    st.floats(-1e4, 1e4),
    st.floats(1e-6, 1e4),
)


class TestProperties:
    @settings(max_examples=200, deadline=None)
    @given(
        st.lists(_finite_rating, min_size=1, max_size=4),
        st.lists(_finite_rating, min_size=1, max_size=4),
        st.booleans(),
        st.floats(0.0, 0.9),
        st.booleans(),
        st.randoms(use_true_random=False),
    )
    def test_two_teams_winners_gain_losers_lose_no_sigma_grows(
        self,
        team_a: list[Rating],
        team_b: list[Rating],
        drawn: bool,
        p_draw: float,
        weighted: bool,
        rng: random.Random,
    ) -> None:
        model = TrueSkill(draw_probability=p_draw)
        tau2 = model.params["tau"] ** 2
        weights = None
        if weighted:
            weights = [[rng.choice([0.0, rng.random(), 1.0]) for _ in t] for t in (team_a, team_b)]
            weights[0][0] = weights[1][0] = 0.5
        out = model.rate([team_a, team_b], ranks=[0, 0] if drawn else [0, 1], weights=weights)
        for before, after in zip([team_a, team_b], out, strict=True):
            for r, new in zip(before, after, strict=True):
                assert math.isfinite(new.mu) and math.isfinite(new.sigma)
                assert 0.0 < new.sigma <= math.sqrt(r.sigma**2 + tau2) * (1 + 1e-12)
        if not drawn:
            assert all(new.mu >= r.mu for r, new in zip(team_a, out[0], strict=True))
            assert all(new.mu <= r.mu for r, new in zip(team_b, out[1], strict=True))

    @settings(max_examples=100, deadline=None)
    @given(
        st.lists(st.lists(_finite_rating, min_size=1, max_size=3), min_size=3, max_size=8),
        st.data(),
    )
    def test_many_teams_finite_and_no_sigma_grows(
        self, teams: list[list[Rating]], data: st.DataObject
    ) -> None:
        model = TrueSkill()
        tau2 = model.params["tau"] ** 2
        ranks = data.draw(st.lists(st.integers(0, 3), min_size=len(teams), max_size=len(teams)))
        weights = data.draw(
            st.one_of(
                st.none(),
                st.just([[1.0] * len(t) for t in teams]),
                st.builds(
                    lambda ws: ws,
                    st.tuples(
                        *[
                            st.lists(st.floats(0.05, 1.0), min_size=len(t), max_size=len(t))
                            for t in teams
                        ]
                    ).map(list),
                ),
            )
        )
        out = model.rate(teams, ranks=ranks, weights=weights)
        for before, after in zip(teams, out, strict=True):
            for r, new in zip(before, after, strict=True):
                assert math.isfinite(new.mu) and math.isfinite(new.sigma)
                assert 0.0 < new.sigma <= math.sqrt(r.sigma**2 + tau2) * (1 + 1e-9)
        q = model.quality(teams, weights)
        assert 0.0 < q <= 1.0
        p = model.win_probabilities(teams, weights)
        assert sum(p) == pytest.approx(1.0, abs=1e-12)

    @settings(max_examples=100, deadline=None)
    @given(
        st.lists(st.lists(_finite_rating, min_size=1, max_size=3), min_size=2, max_size=6),
        st.data(),
    )
    def test_relabelling_teams_changes_nothing(
        self, teams: list[list[Rating]], data: st.DataObject
    ) -> None:
        model = TrueSkill()
        k = len(teams)
        # Distinct ranks and draws both: a permutation must not change any result.
        ranks = data.draw(st.lists(st.integers(0, k - 1), min_size=k, max_size=k))
        perm = list(data.draw(st.permutations(range(k))))
        # The paper's chain links tied teams in the order they are listed (a stable sort),
        # and a tie's middle team is linked to both neighbours, so tied teams keep their
        # relative order here; any other relabelling is free.
        for value in set(ranks):
            slots = [pos for pos, i in enumerate(perm) if ranks[i] == value]
            for pos, i in zip(slots, sorted(perm[pos] for pos in slots), strict=True):
                perm[pos] = i
        out = model.rate(teams, ranks=ranks)
        out_perm = model.rate([teams[i] for i in perm], ranks=[ranks[i] for i in perm])
        for pos, i in enumerate(perm):
            for a, b in zip(out[i], out_perm[pos], strict=True):
                assert a == b
        p = model.win_probabilities(teams)
        p_perm = model.win_probabilities([teams[i] for i in perm])
        for pos, i in enumerate(perm):
            assert p_perm[pos] == pytest.approx(p[i], abs=1e-9)

    @settings(max_examples=40, deadline=None)
    @given(
        st.integers(2, 64),
        st.integers(1, 4),
        st.floats(0.0, 0.9),
        st.randoms(use_true_random=False),
    )
    def test_large_extreme_matches_stay_finite(
        self, k: int, size: int, p_draw: float, rng: random.Random
    ) -> None:
        model = TrueSkill(draw_probability=p_draw)
        tau2 = model.params["tau"] ** 2
        teams = []
        for _ in range(k):
            team = []
            for _ in range(size):
                sigma = 10 ** rng.uniform(-6.0, 4.0)
                # Means up to 10^4 deviations apart, or anywhere in +-10^5.
                mu = rng.choice([rng.uniform(-1e4, 1e4) * sigma, rng.uniform(-1e5, 1e5)])
                team.append(Rating(mu, sigma))
            teams.append(team)
        ranks = [rng.randint(0, max(1, k // 3)) for _ in range(k)]
        weights = [[rng.choice([0.0, rng.random(), 1.0]) for _ in t] for t in teams]
        for row in weights:
            row[0] = max(row[0], 0.01)
        for w in (None, weights):
            out = model.rate(teams, ranks=ranks, weights=w)
            for before, after in zip(teams, out, strict=True):
                for r, new in zip(before, after, strict=True):
                    assert math.isfinite(new.mu)
                    assert 0.0 < new.sigma <= math.sqrt(r.sigma**2 + tau2) * (1 + 1e-9)
            assert 0.0 < model.quality(teams, w) <= 1.0
            p = model.win_probabilities(teams, w)
            assert all(math.isfinite(x) for x in p) and sum(p) == pytest.approx(1.0)
            d = model.draw_probability(teams, w)
            assert d is None or 0.0 <= d <= 1.0

    def test_extreme_inputs_stay_finite(self) -> None:
        model = TrueSkill()
        rng = random.Random(9)
        # A 10^4-sigma upset, in both directions, with tiny and huge deviations.
        for sigma in (1e-6, 1.0, 1e4):
            for drawn in (False, True):
                strong, weak = Rating(1e4 * sigma, sigma), Rating(0.0, sigma)
                for a, b in ((strong, weak), (weak, strong)):
                    for new in model.rate_1vs1(a, b, drawn=drawn):
                        assert math.isfinite(new.mu) and 0.0 < new.sigma <= sigma + 1.0
        # 64 teams, 256 players, sigma from 1e-6 to 1e4, ranks with ties, random weights.
        teams = [
            [Rating(rng.uniform(-1e4, 1e4), 10 ** rng.uniform(-6, 4)) for _ in range(4)]
            for _ in range(64)
        ]
        ranks = [rng.randint(0, 20) for _ in range(64)]
        weights = [[rng.uniform(0.0, 1.0) for _ in range(3)] + [1.0] for _ in range(64)]
        for w in (None, weights):
            out = model.rate(teams, ranks=ranks, weights=w)
            assert all(math.isfinite(r.mu) and 0.0 < r.sigma < math.inf for t in out for r in t)
            q = model.quality(teams, w)
            assert 0.0 < q <= 1.0
            p = model.win_probabilities(teams, w)
            assert all(math.isfinite(x) for x in p) and sum(p) == pytest.approx(1.0)
