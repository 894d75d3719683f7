"""Replay: the same numbers as rating the matches one by one through ``model.rate``."""

from __future__ import annotations

import math
import random
from typing import Any

import numpy as np
import pytest

from app.rating.base import Rating, RatingInputError, RatingModel, age
from app.rating.bradley_terry import BradleyTerryFull, BradleyTerryPart
from app.rating.elo import Elo
from app.rating.plackett_luce import PlackettLuce
from app.rating.replay import ReplayMatch, ReplayResult, replay
from app.rating.thurstone_mosteller import ThurstoneMostellerFull, ThurstoneMostellerPart
from app.rating.trueskill import TrueSkill

TOL = 1e-12


def one_by_one(
    model: RatingModel,
    mu: list[float],
    sigma: list[float],
    matches: list[ReplayMatch],
    tau_per_day: float = 0.0,
    last_day: list[float] | None = None,
    with_quality: bool = False,
) -> dict[str, Any]:
    """The reference: every match through ``model.rate``, each player aged before it
    (``start_sigma``: the sigma each update starts from, after ageing)."""
    table = [Rating(m, s) for m, s in zip(mu, sigma, strict=True)]
    days = [math.nan] * len(mu) if last_day is None else list(last_day)
    out: dict[str, Any] = {
        k: []
        for k in ("before_mu", "before_sigma", "start_sigma", "after_mu", "after_sigma", "quality")
    }
    bayesian = model.name != "elo"
    for match in matches:
        teams = []
        for team in match.teams:
            row = []
            for p in team:
                r = table[p]
                out["before_mu"].append(r.mu)
                out["before_sigma"].append(r.sigma)
                if bayesian and not math.isnan(days[p]):
                    r = age(r, tau_per_day, match.day - days[p])
                out["start_sigma"].append(r.sigma)
                row.append(r)
            teams.append(row)
        if with_quality:
            out["quality"].append(model.quality(teams, match.weights))
        new = model.rate(teams, ranks=match.ranks, weights=match.weights)
        for team, new_team in zip(match.teams, new, strict=True):
            for p, r in zip(team, new_team, strict=True):
                table[p] = r
                days[p] = match.day
                out["after_mu"].append(r.mu)
                out["after_sigma"].append(r.sigma)
    out["mu"] = [r.mu for r in table]
    out["sigma"] = [r.sigma for r in table]
    out["last_day"] = days
    return out


def assert_same(result: ReplayResult, ref: dict[str, Any]) -> None:
    names = ("mu", "sigma", "before_mu", "before_sigma", "start_sigma", "after_mu", "after_sigma")
    for name in names:
        got = getattr(result, name)
        want = np.asarray(ref[name], dtype=np.float64)
        assert got.dtype == np.float64 and got.shape == want.shape, name
        np.testing.assert_allclose(got, want, rtol=TOL, atol=TOL, err_msg=name)
    np.testing.assert_array_equal(result.last_day, np.asarray(ref["last_day"], dtype=np.float64))
    if ref["quality"]:
        assert result.quality is not None
        # In log space: a quality of 1e-190 is exp(-437), so ratings equal to 1e-15 move it
        # by a relative 1e-12 or more; log q keeps the precision the ratings have.
        np.testing.assert_allclose(
            np.log(result.quality), np.log(ref["quality"]), rtol=TOL, atol=TOL
        )


def random_matches(
    rng: random.Random,
    players: int,
    count: int,
    shapes: list[list[int]],
    *,
    draws: float = 0.0,
    weighted: float = 0.0,
    ranked: float = 0.5,
    day_step: float = 0.0,
) -> list[ReplayMatch]:
    """Random matches over ``players``: shapes drawn from ``shapes``, days non-decreasing."""
    out = []
    day = 0.0
    for _ in range(count):
        shape = rng.choice(shapes)
        picked = rng.sample(range(players), sum(shape))
        teams: list[list[int]] = []
        start = 0
        for n in shape:
            teams.append(picked[start : start + n])
            start += n
        ranks: list[float] | None = None
        if rng.random() < ranked or rng.random() < draws:
            ranks = [float(x) for x in range(len(shape))]
            rng.shuffle(ranks)
            if rng.random() < draws:
                a, b = rng.sample(range(len(shape)), 2)
                ranks[a] = ranks[b]
        weights = None
        if rng.random() < weighted:
            weights = [[rng.choice([0.0, 0.25, rng.random(), 1.0]) for _ in t] for t in teams]
            for row in weights:
                if not any(row):
                    row[0] = 0.5
        day += rng.random() * day_step
        out.append(ReplayMatch(teams=teams, ranks=ranks, weights=weights, day=day))
    return out


def random_table(
    rng: random.Random, players: int, *, elo: bool = False
) -> tuple[list[float], list[float]]:
    if elo:
        return [rng.gauss(1500.0, 200.0) for _ in range(players)], [0.0] * players
    return (
        [rng.gauss(25.0, 6.0) for _ in range(players)],
        [rng.uniform(0.5, 8.5) for _ in range(players)],
    )


class TestAgainstOneByOne:
    @pytest.mark.parametrize("seed", [1, 2])
    def test_trueskill_mixed_shapes(self, seed: int) -> None:
        rng = random.Random(seed)
        model = TrueSkill()
        mu, sigma = random_table(rng, 60)
        matches = random_matches(
            rng, 60, 400, [[1, 1], [2, 2], [1, 3], [1, 1, 1]], draws=0.2, weighted=0.2, day_step=2.0
        )
        ref = one_by_one(model, mu, sigma, matches, 0.5, with_quality=True)
        assert_same(replay(model, mu, sigma, matches, tau_per_day=0.5, with_quality=True), ref)

    def test_plackett_luce_mixed_shapes(self) -> None:
        rng = random.Random(3)
        model = PlackettLuce()
        mu, sigma = random_table(rng, 60)
        matches = random_matches(
            rng,
            60,
            400,
            [[1, 1], [3, 3], [2, 1], [1, 1, 1, 1]],
            draws=0.2,
            weighted=0.2,
            day_step=2.0,
        )
        ref = one_by_one(model, mu, sigma, matches, 0.3)
        assert_same(replay(model, mu, sigma, matches, tau_per_day=0.3), ref)

    @pytest.mark.parametrize("multiplayer", ["pairwise_mean", "pairwise_sum", "full"])
    def test_elo_mixed_shapes(self, multiplayer: str) -> None:
        rng = random.Random(4)
        model = Elo(multiplayer=multiplayer)
        mu, sigma = random_table(rng, 60, elo=True)
        matches = random_matches(
            rng, 60, 300, [[1, 1], [2, 2], [1, 2], [1, 1, 1]], draws=0.2, weighted=0.2, day_step=2.0
        )
        ref = one_by_one(model, mu, sigma, matches, 0.0)
        result = replay(model, mu, sigma, matches, tau_per_day=1.0)
        assert_same(result, ref)
        assert not result.sigma.any()


class TestSemantics:
    def test_ageing_widens_by_the_days_since_the_previous_match(self) -> None:
        model = TrueSkill()
        a, b = model.rate_1vs1(Rating(25.0, 8.0), Rating(25.0, 8.0))
        result = replay(
            model,
            [25.0, 25.0],
            [8.0, 8.0],
            [ReplayMatch([[0], [1]], day=10.0), ReplayMatch([[1], [0]], day=14.0)],
            tau_per_day=0.5,
        )
        # Four days at 0.5 per day add 0.25 * 4 = 1 to each variance before the second match.
        b2, a2 = model.rate_1vs1(
            Rating(b.mu, math.sqrt(b.sigma**2 + 1.0)), Rating(a.mu, math.sqrt(a.sigma**2 + 1.0))
        )
        assert result.mu.tolist() == [a2.mu, b2.mu]
        assert result.sigma.tolist() == [a2.sigma, b2.sigma]
        assert result.last_day.tolist() == [14.0, 14.0]
        # "before" is the stored rating, not the aged one; the update started from the aged.
        assert result.before_sigma.tolist() == [8.0, 8.0, b.sigma, a.sigma]
        assert result.start_sigma is not None
        assert result.start_sigma.tolist() == [
            8.0,
            8.0,
            math.sqrt(b.sigma**2 + 1.0),
            math.sqrt(a.sigma**2 + 1.0),
        ]

    def test_never_played_is_not_aged_and_inputs_are_not_changed(self) -> None:
        model = TrueSkill()
        mu = np.array([25.0, 30.0, 20.0])
        sigma = np.array([8.0, 3.0, 5.0])
        last = np.array([np.nan, 0.0, np.nan])
        result = replay(
            model, mu, sigma, [ReplayMatch([[0], [1]], day=9.0)], tau_per_day=1.0, last_day=last
        )
        w, l = model.rate_1vs1(Rating(25.0, 8.0), Rating(30.0, math.sqrt(9.0 + 9.0)))
        assert result.mu.tolist() == [w.mu, l.mu, 20.0]
        assert result.sigma.tolist() == [w.sigma, l.sigma, 5.0]
        assert result.last_day.tolist()[:2] == [9.0, 9.0] and math.isnan(result.last_day[2])
        assert mu.tolist() == [25.0, 30.0, 20.0] and sigma.tolist() == [8.0, 3.0, 5.0]
        assert math.isnan(last[0]) and last[1] == 0.0
        assert result.quality is None

    def test_empty_replay_copies_the_table(self) -> None:
        mu = np.array([1.0, 2.0])
        result = replay(TrueSkill(), mu, [1.0, 1.0], [])
        assert result.mu.tolist() == [1.0, 2.0] and result.mu is not mu
        assert result.before_mu.shape == (0,)


class TestInvalidInput:
    @pytest.mark.parametrize(
        ("kwargs", "argument"),
        [
            ({"mu": [[1.0]]}, "mu"),
            ({"sigma": [1.0]}, "sigma"),
            ({"last_day": [0.0, math.inf]}, "last_day"),
            ({"tau_per_day": -1.0}, "tau_per_day"),
            ({"matches": [ReplayMatch([[0], [2]])]}, "matches[0].teams"),
            ({"matches": [ReplayMatch([[0], [1]]), ReplayMatch([[0], [0]])]}, "matches[1].teams"),
            ({"matches": [ReplayMatch([[0], [1.0]])]}, "matches[0].teams"),  # type: ignore[list-item]
            ({"matches": [ReplayMatch([[0], [1]], ranks=[0.0])]}, "matches[0].ranks"),
            ({"matches": [ReplayMatch([[0], [1]], weights=[[2.0], [1.0]])]}, "matches[0].weights"),
            ({"matches": [ReplayMatch([[0], [1]], day=math.nan)]}, "matches[0].day"),
            ({"matches": [ReplayMatch([[0, 1]])]}, "matches[0].teams"),
        ],
    )
    def test_names_the_argument(self, kwargs: dict[str, Any], argument: str) -> None:
        args: dict[str, Any] = {
            "mu": [25.0, 25.0],
            "sigma": [8.0, 8.0],
            "matches": [ReplayMatch([[0], [1]])],
        }
        args.update(kwargs)
        with pytest.raises(RatingInputError) as info:
            replay(TrueSkill(), args.pop("mu"), args.pop("sigma"), args.pop("matches"), **args)
        assert info.value.argument == argument


class Counter:
    """Counts the matches each path of the grouped replay rates."""

    def __init__(self) -> None:
        self.vector = 0
        self.scalar = 0


@pytest.fixture
def grouped(monkeypatch: pytest.MonkeyPatch) -> Counter:
    """Every group of matches, however small, takes the vectorised path."""
    import app.rating.replay as module

    counter = Counter()
    monkeypatch.setattr(module, "MIN_BLOCK", 1)
    monkeypatch.setattr(module, "MIN_BLOCK_MANY", 1)
    monkeypatch.setattr(module, "MIN_BLOCK_PER_TEAM_PASSING", 0)
    monkeypatch.setattr(module, "MIN_BLOCK_PER_DUEL", 0.0)
    monkeypatch.setattr(module, "MIN_FAST_MATCHES", 1)
    rate_block = module._Engine._rate_block
    rate_many_block = module._Engine._rate_many_block
    rate_one = module._Engine._rate_one

    def block(self: Any, idx: Any, *args: Any) -> None:
        counter.vector += len(idx)
        rate_block(self, idx, *args)

    def many_block(self: Any, idx: Any, *args: Any) -> None:
        counter.vector += len(idx)
        rate_many_block(self, idx, *args)

    def one(self: Any, *args: Any) -> None:
        counter.scalar += 1
        rate_one(self, *args)

    monkeypatch.setattr(module._Engine, "_rate_block", block)
    monkeypatch.setattr(module._Engine, "_rate_many_block", many_block)
    monkeypatch.setattr(module._Engine, "_rate_one", one)
    return counter


SHAPES = [[1, 1], [2, 2], [1, 3], [3, 2], [4, 4], [1, 1, 1], [2, 1, 2]]

MODELS: list[tuple[str, RatingModel]] = [
    ("trueskill", TrueSkill()),
    ("trueskill-no-draws", TrueSkill(draw_probability=0.0, tau=0.0)),
    ("trueskill-wide-draws", TrueSkill(draw_probability=0.6, beta=2.0)),
    ("plackett-luce", PlackettLuce()),
    ("plackett-luce-tight", PlackettLuce(beta=1.0, tau=0.0, kappa=0.3)),
    ("plackett-luce-limit-sigma", PlackettLuce(tau=1.0, limit_sigma=True)),
    *[
        (f"elo-{mp}-{kind}-{rule}", Elo(multiplayer=mp, model=kind, rule=rule))
        for mp in ("pairwise_mean", "pairwise_sum", "full")
        for kind, rule in (("logistic", "classic"), ("gaussian", "classic"), ("gaussian", "mle"))
    ],
]


WENG_LIN: list[tuple[str, RatingModel]] = [
    ("bradley-terry-full", BradleyTerryFull()),
    ("bradley-terry-part", BradleyTerryPart(window_size=1, limit_sigma=True)),
    ("thurstone-mosteller-full", ThurstoneMostellerFull(epsilon=0.5)),
    ("thurstone-mosteller-part", ThurstoneMostellerPart(tau=1.0, limit_sigma=True)),
]


@pytest.mark.parametrize(("name", "model"), WENG_LIN, ids=[n for n, _ in WENG_LIN])
def test_weng_lin_replay_is_rate_one_by_one(name: str, model: RatingModel) -> None:
    """The models without a vectorised kernel replay match by match, exactly."""
    rng = random.Random(name)
    mu, sigma = random_table(rng, 80, elo=False)
    matches = random_matches(rng, 80, 600, SHAPES, draws=0.25, weighted=0.25, day_step=1.5)
    ref = one_by_one(model, mu, sigma, matches, 0.4, with_quality=True)
    result = replay(model, mu, sigma, matches, tau_per_day=0.4, with_quality=True)
    assert_same(result, ref)
    assert (result.after_sigma != result.before_sigma).any()


class TestGroupedAgainstOneByOne:
    """The vectorised path against ``model.rate`` one by one, for every model and option."""

    @pytest.mark.parametrize(("name", "model"), MODELS, ids=[n for n, _ in MODELS])
    def test_random_sequences(self, name: str, model: RatingModel, grouped: Counter) -> None:
        rng = random.Random(name)
        elo = model.name == "elo"
        mu, sigma = random_table(rng, 80, elo=elo)
        matches = random_matches(
            rng,
            80,
            600,
            SHAPES + ([[6, 6]] if elo else []),
            draws=0.25,
            weighted=0.25,
            day_step=1.5,
        )
        ref = one_by_one(model, mu, sigma, matches, 0.4, with_quality=True)
        result = replay(model, mu, sigma, matches, tau_per_day=0.4, with_quality=True)
        assert_same(result, ref)
        multi = sum(len(m.teams) > 2 for m in matches)
        # Whole-order Elo rates 3+ teams one at a time.
        one_at_a_time = multi if name.startswith("elo-full") else 0
        assert grouped.scalar == one_at_a_time
        assert grouped.vector == len(matches) - one_at_a_time

    @pytest.mark.parametrize(("name", "model"), MODELS, ids=[n for n, _ in MODELS])
    def test_far_tails(self, name: str, model: RatingModel, grouped: Counter) -> None:
        """Ratings hundreds of deviations apart: upsets and draws in the far tails."""
        rng = random.Random(name)
        elo = model.name == "elo"
        scale = 3000.0 if elo else 60.0
        mu = [rng.uniform(-scale, scale) for _ in range(40)]
        sigma = [0.0] * 40 if elo else [rng.uniform(0.05, 10.0) for _ in range(40)]
        matches = random_matches(
            rng,
            40,
            400,
            [[1, 1], [2, 2], [1, 2]],
            draws=0.4,
            weighted=0.2,
            ranked=1.0,
            day_step=3.0,
        )
        assert_same(
            replay(model, mu, sigma, matches, tau_per_day=2.0),
            one_by_one(model, mu, sigma, matches, 2.0),
        )
        assert grouped.vector == len(matches)

    @pytest.mark.parametrize(
        ("model", "spread"),
        [
            (PlackettLuce(), 9000.0),
            (PlackettLuce(), 5.0),
            (Elo(), 900.0),
            (Elo(model="gaussian", rule="mle"), 3000.0),
            (TrueSkill(), 5.0),
            (TrueSkill(draw_probability=0.5), 60.0),
            (TrueSkill(ep_tolerance=1e-3, ep_max_rounds=3), 20.0),
        ],
        ids=[
            "pl-far",
            "pl",
            "elo",
            "elo-gaussian-mle",
            "trueskill",
            "trueskill-draws",
            "trueskill-round-cap",
        ],
    )
    def test_many_teams(self, model: RatingModel, spread: float, grouped: Counter) -> None:
        """Three or more teams of every shape, ties included. Plackett-Luce rows with
        exponents 600 apart are rated by ``model.rate`` inside a vectorised block;
        TrueSkill's message passing also when its round cap stops it."""
        rng = random.Random(repr(model.params) + str(spread))
        elo = model.name == "elo"
        mu = [rng.uniform(-spread, spread) for _ in range(400)]
        sigma = [0.0] * 400 if elo else [rng.uniform(0.5, 8.0) for _ in range(400)]
        matches = random_matches(
            rng,
            400,
            300,
            [[1, 1, 1], [2, 1, 3, 1], [1] * 8, [2] * 6],
            draws=0.3,
            weighted=0.2,
            ranked=0.8,
            day_step=1.0,
        )
        assert_same(
            replay(model, mu, sigma, matches, tau_per_day=0.5, with_quality=True),
            one_by_one(model, mu, sigma, matches, 0.5, with_quality=True),
        )
        assert grouped.scalar == 0

    def test_tie_groups(self, grouped: Counter) -> None:
        """Matches of many teams in a few tied groups (ranks 0, 1, 2 only)."""
        rng = random.Random(16)
        for model in (PlackettLuce(), TrueSkill(), Elo()):
            mu, sigma = random_table(rng, 300, elo=model.name == "elo")
            matches = [
                ReplayMatch(m.teams, [float(rng.randint(0, 2)) for _ in m.teams], m.weights, m.day)
                for m in random_matches(
                    rng, 300, 300, [[1] * 8, [2, 1, 2, 1, 2], [1, 1, 1]], weighted=0.3, day_step=0.5
                )
            ]
            assert_same(
                replay(model, mu, sigma, matches, tau_per_day=0.1),
                one_by_one(model, mu, sigma, matches, 0.1),
            )
        assert grouped.scalar == 0

    @pytest.mark.parametrize("multiplayer", ["pairwise_mean", "full"])
    def test_elo_team_that_did_not_play(self, multiplayer: str, grouped: Counter) -> None:
        """Elo accepts a team whose weights are all 0 (it did not play)."""
        rng = random.Random(15)
        model = Elo(multiplayer=multiplayer)
        mu, sigma = random_table(rng, 50, elo=True)
        matches = [
            ReplayMatch(
                m.teams,
                m.ranks,
                [[0.0] * len(m.teams[0]), [1.0] * len(m.teams[1])] if n % 3 == 0 else m.weights,
                m.day,
            )
            for n, m in enumerate(
                random_matches(rng, 50, 200, [[1, 1], [2, 2], [2, 3]], weighted=0.3)
            )
        ]
        assert_same(replay(model, mu, sigma, matches), one_by_one(model, mu, sigma, matches))
        assert grouped.vector == len(matches)

    def test_trueskill_draw_branches(self, grouped: Counter) -> None:
        """Draws on every branch of the two-sided truncation: narrow, straddling, one tail."""
        rng = random.Random(7)
        for draw_probability, spread in ((0.02, 5.0), (0.5, 5.0), (0.9, 40.0), (0.3, 200.0)):
            model = TrueSkill(draw_probability=draw_probability)
            mu = [rng.uniform(-spread, spread) for _ in range(30)]
            sigma = [rng.uniform(0.1, 8.0) for _ in range(30)]
            matches = [
                ReplayMatch(m.teams, ranks=[0.0, 0.0], weights=m.weights, day=m.day)
                for m in random_matches(rng, 30, 200, [[1, 1], [2, 1]], weighted=0.3)
            ]
            assert_same(replay(model, mu, sigma, matches), one_by_one(model, mu, sigma, matches))

    def test_long_histories_do_not_drift(self, grouped: Counter) -> None:
        """Thousands of matches per player stay within 1e-12 of the one-by-one replay."""
        rng = random.Random(8)
        for model, elo in ((TrueSkill(), False), (PlackettLuce(), False), (Elo(), True)):
            mu, sigma = random_table(rng, 12, elo=elo)
            matches = random_matches(rng, 12, 6000, [[1, 1], [2, 2]], draws=0.1, day_step=0.3)
            assert_same(
                replay(model, mu, sigma, matches, tau_per_day=0.2),
                one_by_one(model, mu, sigma, matches, 0.2),
            )

    def test_days_out_of_order_and_table_days(self, grouped: Counter) -> None:
        rng = random.Random(9)
        model = TrueSkill()
        mu, sigma = random_table(rng, 50)
        last = [rng.choice([math.nan, rng.uniform(-30.0, 30.0)]) for _ in range(50)]
        matches = [
            ReplayMatch(m.teams, m.ranks, m.weights, day=rng.uniform(-10.0, 40.0))
            for m in random_matches(rng, 50, 300, [[1, 1], [2, 2]])
        ]
        assert_same(
            replay(model, mu, sigma, matches, tau_per_day=0.8, last_day=last),
            one_by_one(model, mu, sigma, matches, 0.8, last_day=last),
        )

    def test_default_thresholds_mix_both_paths(self) -> None:
        """Without forcing, big groups go vectorised and small ones one by one."""
        rng = random.Random(10)
        model = TrueSkill()
        mu, sigma = random_table(rng, 3000)
        matches = random_matches(
            rng,
            3000,
            5000,
            [[1, 1], [1, 1], [2, 2], [1, 2, 1]],
            draws=0.1,
            weighted=0.1,
            day_step=0.01,
        )
        assert_same(
            replay(model, mu, sigma, matches, tau_per_day=1.0, with_quality=True),
            one_by_one(model, mu, sigma, matches, 1.0, with_quality=True),
        )

    def test_numpy_indices_and_short_replays(self) -> None:
        rng = random.Random(13)
        model = PlackettLuce()
        mu, sigma = random_table(rng, 40)
        matches = random_matches(rng, 40, 200, [[1, 1], [2, 3]], draws=0.2, day_step=1.0)
        as_numpy = [
            ReplayMatch(
                [np.array(t, dtype=np.int32) for t in m.teams],
                m.ranks,
                m.weights,
                np.float64(m.day),
            )
            for m in matches
        ]
        ref = one_by_one(model, mu, sigma, matches, 0.5, with_quality=True)
        assert_same(replay(model, mu, sigma, as_numpy, tau_per_day=0.5, with_quality=True), ref)
        short = one_by_one(model, mu, sigma, matches[:10], 0.5, with_quality=True)
        assert_same(
            replay(model, mu, sigma, matches[:10], tau_per_day=0.5, with_quality=True), short
        )


class TestGroupedInvalidInput:
    """Invalid input anywhere in a long replay is reported against its match."""

    @pytest.mark.parametrize(
        ("bad", "argument"),
        [
            (ReplayMatch([[0], [999]]), "matches[150].teams"),
            (ReplayMatch([[0], [-1]]), "matches[150].teams"),
            (ReplayMatch([[3], [3]]), "matches[150].teams"),
            (ReplayMatch([[3], [4]], ranks=[0.0, math.inf]), "matches[150].ranks"),
            (ReplayMatch([[3], [4]], ranks=[True, 0]), "matches[150].ranks"),  # type: ignore[list-item]
            (ReplayMatch([[3], [4]], weights=[[0.0], [1.0]]), "matches[150].weights"),
            (ReplayMatch([[3], [4]], weights=[[0.5], [1.5]]), "matches[150].weights"),
            (ReplayMatch([[3], [4]], day=math.inf), "matches[150].day"),
            (ReplayMatch([[3], [4], []]), "matches[150].teams"),
        ],
    )
    def test_first_bad_match_is_named(
        self, bad: ReplayMatch, argument: str, grouped: Counter
    ) -> None:
        rng = random.Random(11)
        mu, sigma = random_table(rng, 100)
        matches = random_matches(rng, 100, 300, [[1, 1], [2, 2]])
        matches[150] = bad
        matches[200] = ReplayMatch([[0], [0]])
        with pytest.raises(RatingInputError) as info:
            replay(TrueSkill(), mu, sigma, matches)
        assert info.value.argument == argument

    def test_invalid_stored_rating(self, grouped: Counter) -> None:
        mu = [25.0] * 10
        sigma = [8.0] * 9 + [0.0]
        matches = [ReplayMatch([[i % 9], [(i + 1) % 9]]) for i in range(20)]
        matches.append(ReplayMatch([[0], [9]]))
        with pytest.raises(RatingInputError) as info:
            replay(TrueSkill(), mu, sigma, matches)
        assert info.value.argument == "matches[20].teams"
        # A player who never plays may hold anything.
        sigma[9] = math.nan
        result = replay(TrueSkill(), mu, sigma, matches[:-1])
        assert math.isnan(result.sigma[9])


class TestOtherModels:
    def test_a_model_of_another_class_is_rated_one_by_one(self, grouped: Counter) -> None:
        class Shifted(TrueSkill):
            pass

        rng = random.Random(12)
        mu, sigma = random_table(rng, 30)
        matches = random_matches(rng, 30, 100, [[1, 1]])
        model = Shifted()
        assert_same(replay(model, mu, sigma, matches), one_by_one(model, mu, sigma, matches))
        assert grouped.vector == grouped.scalar == 0
