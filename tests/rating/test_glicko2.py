"""Glicko-2: the paper's worked example, an independent reference, the team and period
rules, predictions, properties over the parameter ranges, and input checks."""

from __future__ import annotations

import math
import pickle
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.optimize import brentq

from app.rating import Glicko2, Rating, RatingInputError, VolatileRating
from app.rating.glicko2 import (
    MAX_TAU,
    MAX_VOLATILITY,
    MIN_TAU,
    MIN_VOLATILITY,
    SCALE,
    _new_volatility,
)
from app.rating.params import MAX_LENGTH, MAX_MEAN, MIN_LENGTH
from app.rating.replay import MIN_FAST_MATCHES, ReplayMatch, replay

PLAYER = (1500.0, 200.0, 0.06)
OPPONENTS = [((1400.0, 30.0), 1.0), ((1550.0, 100.0), 0.0), ((1700.0, 300.0), 0.0)]


def reference_period(
    player: tuple[float, float, float],
    games: list[tuple[tuple[float, float], float]],
    tau: float,
) -> tuple[float, float, float]:
    """The paper's steps 2 to 8 written out plainly, the volatility by Brent's method on
    f(x) = 0 to 1e-14 (independent of the Illinois iteration under test)."""
    r, rd, sigma = player
    mu, phi = (r - 1500.0) / SCALE, rd / SCALE
    g = [1.0 / math.sqrt(1.0 + 3.0 * (rd_j / SCALE) ** 2 / math.pi**2) for (_, rd_j), _ in games]
    e = [
        1.0 / (1.0 + math.exp(-gj * (mu - (r_j - 1500.0) / SCALE)))
        for gj, ((r_j, _), _) in zip(g, games, strict=True)
    ]
    v = 1.0 / sum(gj * gj * ej * (1.0 - ej) for gj, ej in zip(g, e, strict=True))
    total = sum(gj * (s - ej) for gj, ej, (_, s) in zip(g, e, games, strict=True))
    delta = v * total
    a = math.log(sigma**2)

    def f(x: float) -> float:
        ex = math.exp(x)
        return ex * (delta**2 - phi**2 - v - ex) / (2.0 * (phi**2 + v + ex) ** 2) - (x - a) / tau**2

    lo, hi = a - 10.0, a + 10.0
    root = brentq(f, lo, hi, xtol=1e-14, rtol=1e-15)
    new_sigma = math.exp(root / 2.0)
    phi_star = math.sqrt(phi**2 + new_sigma**2)
    new_phi = 1.0 / math.sqrt(1.0 / phi_star**2 + 1.0 / v)
    new_mu = mu + new_phi**2 * total
    return SCALE * new_mu + 1500.0, SCALE * new_phi, new_sigma


def test_the_papers_worked_example() -> None:
    g = Glicko2(rating=1500.0, deviation=350.0, volatility=0.06, tau=0.5)
    me = g.rating(*PLAYER)
    new = g.rate_period(me, [(g.rating(r, rd, 0.06), s) for (r, rd), s in OPPONENTS])
    assert isinstance(new, VolatileRating)
    # The unrounded values of rating-models.md section 6.
    assert new.mu == pytest.approx(1464.0507, abs=1e-4)
    assert new.sigma == pytest.approx(151.5165, abs=1e-4)
    assert new.volatility == pytest.approx(0.0599960, abs=1e-7)
    # The independent reference: the Illinois iteration stops at |B - A| <= 1e-6 in
    # ln(sigma^2) (at most 5e-7 relative in sigma'); its last bracket is far tighter here.
    r, rd, sigma = reference_period(PLAYER, OPPONENTS, 0.5)
    assert new.mu == pytest.approx(r, abs=1e-8)
    assert new.sigma == pytest.approx(rd, abs=1e-8)
    assert new.volatility == pytest.approx(sigma, rel=1e-8)


@pytest.mark.parametrize("tau", [0.3, 0.5, 1.2])
@pytest.mark.parametrize(
    "games",
    [
        OPPONENTS,
        [((1900.0, 50.0), 1.0)],  # an upset: the volatility rises
        [((1500.0, 60.0), 0.5)] * 4,
        [((1200.0, 350.0), 1.0), ((1300.0, 80.0), 1.0), ((1250.0, 40.0), 0.5)],
    ],
)
def test_periods_agree_with_the_reference(
    tau: float, games: list[tuple[tuple[float, float], float]]
) -> None:
    g = Glicko2(tau=tau)
    new = g.rate_period(g.rating(*PLAYER), [(g.rating(r, rd), s) for (r, rd), s in games])
    r, rd, sigma = reference_period(PLAYER, games, tau)
    # |B - A| <= 1e-6 in ln(sigma^2): sigma' within 5e-7 (relative) of the root.
    assert new.mu == pytest.approx(r, abs=1e-6)
    assert new.sigma == pytest.approx(rd, abs=1e-6)
    assert new.volatility == pytest.approx(sigma, rel=5e-7)


def test_an_upset_raises_the_volatility_and_an_expected_result_lowers_it() -> None:
    g = Glicko2()
    me = g.rating(1500.0, 50.0, 0.06)
    upset = g.rate_period(me, [(g.rating(2200.0, 50.0), 1.0)] * 3)
    expected = g.rate_period(me, [(g.rating(1000.0, 50.0), 1.0)] * 3)
    assert upset.volatility > 0.06 > expected.volatility


def test_a_match_is_one_rating_period() -> None:
    g = Glicko2()
    a, b = g.rating(1620.0, 80.0, 0.05), g.rating(1480.0, 210.0, 0.09)
    won = g.rate([[a], [b]])
    assert won[0][0] == g.rate_period(a, [(b, 1.0)])
    assert won[1][0] == g.rate_period(b, [(a, 0.0)])
    assert tuple(g.rate_1vs1(a, b)) == (won[0][0], won[1][0])
    drawn = g.rate([[a], [b]], ranks=[1, 1])
    assert drawn[0][0] == g.rate_period(a, [(b, 0.5)])
    assert tuple(g.rate_1vs1(a, b, drawn=True)) == (drawn[0][0], drawn[1][0])
    lost = g.rate([[a], [b]], scores=[0, 3])
    assert lost[0][0] == g.rate_period(a, [(b, 0.0)])
    assert lost[1][0] == g.rate_period(b, [(a, 1.0)])


def test_a_free_for_all_is_a_period_against_every_other_player() -> None:
    g = Glicko2()
    players = [g.rating(1500.0 + 40.0 * i, 60.0 + 30.0 * i, 0.06) for i in range(5)]
    ranks = [2, 0, 2, 1, 3]
    new = g.rate([[p] for p in players], ranks=ranks)
    for i, p in enumerate(players):
        games = [
            (q, 1.0 if ranks[i] < ranks[j] else 0.0 if ranks[i] > ranks[j] else 0.5)
            for j, q in enumerate(players)
            if j != i
        ]
        assert new[i][0].mu == pytest.approx(g.rate_period(p, games).mu, rel=1e-15)
        assert new[i][0].sigma == pytest.approx(g.rate_period(p, games).sigma, rel=1e-15)


def test_teams_play_against_composite_opponents() -> None:
    g = Glicko2()
    # A team of equal players is the same opponent as one of them.
    me = g.rating(1500.0, 120.0)
    twin = g.rating(1600.0, 90.0)
    assert g.rate([[me], [twin, twin, twin]])[0][0] == g.rate([[me], [twin]])[0][0]
    # Mean rating, root mean square deviation: the composite of (1400, 30) and (1800, 90)
    # is (1600, sqrt((30^2 + 90^2) / 2)).
    pair = [g.rating(1400.0, 30.0), g.rating(1800.0, 90.0)]
    composite = g.rating(1600.0, math.sqrt((30.0**2 + 90.0**2) / 2.0))
    assert g.rate([[me], pair])[0][0].mu == pytest.approx(g.rate_period(me, [(composite, 1.0)]).mu)
    # Every member of a team is rated on its own rating against the same opponents.
    new = g.rate([pair, [me]], ranks=[0, 1])
    assert new[0][0] == g.rate_period(pair[0], [(me, 1.0)])
    assert new[0][1] == g.rate_period(pair[1], [(me, 1.0)])


def test_partial_play_scales_the_players_games() -> None:
    g = Glicko2()
    a, b, c = g.rating(1500.0, 100.0), g.rating(1550.0, 120.0), g.rating(1480.0, 200.0)
    full = g.rate([[a, b], [c]])
    same = g.rate([[a, b], [c]], weights=[[1.0, 1.0], [1.0]])
    assert full == same
    half = g.rate([[a, b], [c]], weights=[[0.5, 1.0], [1.0]])
    assert 0.0 < half[0][0].mu - a.mu < full[0][0].mu - a.mu
    # Weight 0: the player did not play, an empty period (RD grows by the volatility).
    absent = g.rate([[a, b], [c]], weights=[[0.0, 1.0], [1.0]])
    assert absent[0][0] == g.rate_period(a, [])
    assert absent[0][0].sigma == pytest.approx(math.hypot(100.0, SCALE * 0.06))


def test_an_empty_period_grows_the_deviation_by_the_volatility() -> None:
    g = Glicko2()
    new = g.rate_period(g.rating(1700.0, 50.0, 0.09), [])
    assert (new.mu, new.volatility) == (1700.0, 0.09)
    assert new.sigma / SCALE == pytest.approx(math.sqrt((50.0 / SCALE) ** 2 + 0.09**2))


def test_time_away_grows_the_deviation_per_day() -> None:
    g = Glicko2(deviation_per_day=5.0)
    old = g.age(g.rating(1600.0, 60.0, 0.07), 36.0)
    assert old == VolatileRating(1600.0, math.sqrt(60.0**2 + 25.0 * 36.0), 0.07)
    assert g.age(g.rating(1600.0, 60.0, 0.07), -3.0).sigma == 60.0
    assert Glicko2().age(g.rating(1600.0, 60.0), 100.0).sigma == 60.0


def test_time_away_widens_the_deviation_up_to_a_new_players() -> None:
    # Glicko's own rule: RD = min(sqrt(RD^2 + c^2 t), RD_0); a seeded RD above RD_0 stays.
    g = Glicko2(deviation=300.0, deviation_per_day=5.0)
    assert g.deviation_ceiling == 300.0
    assert g.age(g.rating(1600.0, 60.0, 0.07), 36.0).sigma == math.sqrt(60.0**2 + 25.0 * 36.0)
    assert g.age(g.rating(1600.0, 60.0, 0.07), 1e6).sigma == 300.0
    assert g.age(g.rating(1600.0, 400.0, 0.07), 1e6).sigma == 400.0
    # An empty period (weight 0) is capped the same way.
    idle = g.rate([[g.rating(1600.0, 299.99, 0.5)], [g.rating()]], weights=[[0.0], [1.0]])
    assert idle[0][0].sigma == 300.0
    # A replay ages with the same ceiling.
    result = replay(
        g,
        [1600.0, 1500.0],
        [60.0, 60.0],
        [ReplayMatch(teams=[[0], [1]], day=0.0), ReplayMatch(teams=[[0], [1]], day=1e6)],
        tau_per_day=5.0,
    )
    assert list(result.start_sigma[2:]) == [300.0, 300.0]


def test_a_new_rating_stays_within_the_range_every_input_takes() -> None:
    # The largest deviation over a long absence and a rating at the edge of the range: the
    # update would leave +-1e12, where no later match or query could take it.
    g = Glicko2(deviation=MAX_LENGTH, deviation_per_day=MAX_LENGTH)
    alice, bob = g.rating(1e12, MAX_LENGTH, 1.0), g.rating(-1e12, MAX_LENGTH, 1.0)
    for winner, loser in ((bob, alice), (alice, bob)):
        for new in (*g.rate_1vs1(winner, loser), *(t[0] for t in g.rate([[winner], [loser]]))):
            assert abs(new.mu) <= 1e12
            g.rate_1vs1(new, g.rating())  # accepted again


def test_two_team_win_probability_is_glickmans_expected_outcome() -> None:
    g = Glicko2()
    a, b = g.rating(1700.0, 80.0), g.rating(1500.0, 150.0)
    phi2 = (80.0 / SCALE) ** 2 + (150.0 / SCALE) ** 2
    gc = 1.0 / math.sqrt(1.0 + 3.0 * phi2 / math.pi**2)
    expected = 1.0 / (1.0 + math.exp(-gc * 200.0 / SCALE))
    p = g.win_probabilities([[a], [b]])
    assert p[0] == pytest.approx(expected, rel=1e-14)
    assert sum(p) == pytest.approx(1.0)
    assert g.draw_probability([[a], [b]]) is None


def test_many_entrants_take_the_plackett_luce_first_place() -> None:
    g = Glicko2()
    teams = [[g.rating(1500.0 + 100.0 * i, 100.0)] for i in range(4)]
    p = g.win_probabilities(teams)
    assert sum(p) == pytest.approx(1.0)
    assert p == sorted(p)
    # Equal ratings: equal chances, and a perfectly even match.
    even = [[g.rating(1500.0, 100.0 + 50.0 * i)] for i in range(3)]
    assert g.win_probabilities(even) == pytest.approx([1 / 3] * 3)
    assert g.quality(even) == 1.0


def test_quality_falls_as_the_chances_move_away_from_even() -> None:
    g = Glicko2()
    base = g.rating(1500.0, 100.0)
    qualities = []
    chances = []
    for gap in (0.0, 50.0, 150.0, 400.0, 1000.0):
        teams = [[base], [g.rating(1500.0 + gap, 100.0)]]
        qualities.append(g.quality(teams))
        chances.append(abs(g.win_probabilities(teams)[0] - 0.5))
    assert qualities[0] == 1.0
    assert qualities == sorted(qualities, reverse=True)
    assert chances == sorted(chances)
    # The team model of the win probabilities: a 2 v 1 of equal ratings is even.
    assert g.quality([[base, base], [base]]) == 1.0
    # More uncertainty flattens the win probability and raises the quality of a gap.
    wide = [[g.rating(1500.0, 300.0)], [g.rating(1650.0, 300.0)]]
    narrow = [[g.rating(1500.0, 30.0)], [g.rating(1650.0, 30.0)]]
    assert g.quality(wide) > g.quality(narrow)


def test_plain_ratings_take_the_prior_volatility() -> None:
    g = Glicko2(volatility=0.08)
    plain = g.rate([[Rating(1500.0, 200.0)], [Rating(1450.0, 100.0)]])
    volatile = g.rate([[g.rating(1500.0, 200.0)], [g.rating(1450.0, 100.0)]])
    assert plain == volatile


def test_volatile_rating_is_a_rating() -> None:
    r = VolatileRating(1500.0, 200.0, 0.06)
    mu, sigma = r
    assert (mu, sigma, r.volatility) == (1500.0, 200.0, 0.06)
    assert isinstance(r, Rating) and Rating(1500.0, 200.0).volatility is None
    assert r.conservative(2.0) == 1100.0
    assert pickle.loads(pickle.dumps(r)) == r
    assert r._replace(sigma=100.0) == VolatileRating(1500.0, 100.0, 0.06)
    assert r != VolatileRating(1500.0, 200.0, 0.07)
    assert r != Rating(1500.0, 200.0)
    assert repr(r) == "VolatileRating(mu=1500.0, sigma=200.0, volatility=0.06)"


def test_the_volatility_stays_within_its_bounds() -> None:
    # A period carrying no information (I underflows) and a large surprise: f stays
    # positive past the largest volatility, which is kept.
    assert _new_volatility(0.5, 1.0, 0.0, 3.0, MAX_TAU) == MAX_VOLATILITY
    assert _new_volatility(0.06, 1.0, 0.0, 0.0, 0.5) == 0.06
    g = Glicko2(tau=MAX_TAU)
    me = g.rating(-MAX_MEAN, MIN_LENGTH, MAX_VOLATILITY)
    for _ in range(50):
        me = g.rate_period(me, [(g.rating(MAX_MEAN, MIN_LENGTH), 1.0)])
        assert MIN_VOLATILITY <= me.volatility <= MAX_VOLATILITY
        assert math.isfinite(me.mu) and 0.0 < me.sigma < math.inf
    low = Glicko2(tau=MIN_TAU)
    me = low.rating(1500.0, MIN_LENGTH, MIN_VOLATILITY)
    for _ in range(50):
        me = low.rate_period(me, [(low.rating(1500.0, MIN_LENGTH), 0.5)] * 10)
        assert MIN_VOLATILITY <= me.volatility <= MAX_VOLATILITY


RATINGS = st.floats(-MAX_MEAN, MAX_MEAN)
DEVIATIONS = st.floats(math.log10(MIN_LENGTH), math.log10(MAX_LENGTH)).map(lambda e: 10.0**e)
VOLATILITIES = st.floats(math.log10(MIN_VOLATILITY), 0.0).map(lambda e: 10.0**e)
TAUS = st.floats(MIN_TAU, MAX_TAU)
PLAYERS = st.tuples(RATINGS, DEVIATIONS, VOLATILITIES)


@settings(max_examples=300, deadline=None, derandomize=True, database=None)
@given(a=PLAYERS, b=PLAYERS, tau=TAUS, drawn=st.booleans())
def test_updates_are_finite_and_move_the_right_way(
    a: tuple[float, float, float], b: tuple[float, float, float], tau: float, drawn: bool
) -> None:
    g = Glicko2(tau=tau)
    ra, rb = g.rating(*a), g.rating(*b)
    new_a, new_b = g.rate_1vs1(ra, rb, drawn=drawn)
    for new in (new_a, new_b):
        assert math.isfinite(new.mu) and 0.0 < new.sigma < math.inf
        assert MIN_VOLATILITY <= new.volatility <= MAX_VOLATILITY
        assert math.isfinite(new.conservative(100.0))
    if drawn:
        # A draw moves each player towards the other (or leaves it).
        assert (new_a.mu - ra.mu) * (rb.mu - ra.mu) >= 0.0
        assert (new_b.mu - rb.mu) * (ra.mu - rb.mu) >= 0.0
    else:
        assert new_a.mu >= ra.mu and new_b.mu <= rb.mu
    p = g.win_probabilities([[ra], [rb]])
    assert 0.0 <= p[0] <= 1.0 and sum(p) == pytest.approx(1.0)
    assert 0.0 < g.quality([[ra], [rb]]) <= 1.0


@settings(max_examples=100, deadline=None, derandomize=True, database=None)
@given(
    players=st.lists(PLAYERS, min_size=3, max_size=8),
    tau=TAUS,
    data=st.data(),
)
def test_free_for_alls_and_teams_are_finite(
    players: list[tuple[float, float, float]], tau: float, data: st.DataObject
) -> None:
    g = Glicko2(tau=tau)
    ratings = [g.rating(*p) for p in players]
    ranks = data.draw(st.lists(st.integers(0, 3), min_size=len(players), max_size=len(players)))
    weights = data.draw(st.lists(st.floats(0.0, 1.0), min_size=len(players), max_size=len(players)))
    for teams, rk, ws in (
        ([[r] for r in ratings], ranks, [[w] for w in weights]),
        ([ratings[:1], ratings[1:]], ranks[:2], [weights[:1], weights[1:]]),
    ):
        new = g.rate(teams, ranks=rk, weights=ws)
        for row in new:
            for r in row:
                assert math.isfinite(r.mu) and 0.0 < r.sigma < math.inf
                assert r.volatility is not None
                assert MIN_VOLATILITY <= r.volatility <= MAX_VOLATILITY
        win = g.win_probabilities(teams, ws)
        assert sum(win) == pytest.approx(1.0)
        assert 0.0 < g.quality(teams, ws) <= 1.0


def test_inputs_are_checked_and_named() -> None:
    g = Glicko2()
    with pytest.raises(RatingInputError) as caught:
        g.rate([[g.rating()]])
    assert caught.value.argument == "teams"
    with pytest.raises(RatingInputError) as caught:
        g.rate_period(g.rating(), [(g.rating(), 1.5)])
    assert caught.value.argument == "games"
    with pytest.raises(RatingInputError) as caught:
        g.rate_1vs1(VolatileRating(1500.0, 100.0, 2.0), g.rating())
    assert caught.value.argument == "winner"
    with pytest.raises(RatingInputError) as caught:
        g.rate_1vs1(g.rating(), Rating(1e13, 100.0))
    assert caught.value.argument == "loser"
    for name, value in (("tau", 0.0), ("volatility", 0.0), ("deviation", -1.0)):
        with pytest.raises(RatingInputError) as caught:
            Glicko2(**{name: value})
        assert caught.value.argument == name


def test_the_defaults_are_glickmans() -> None:
    g = Glicko2()
    assert g.params == {
        "rating": 1500.0,
        "deviation": 350.0,
        "volatility": 0.06,
        "tau": 0.5,
        "deviation_per_day": 0.0,
        "conservative_k": 2.0,
        "advantage": 0.0,
    }
    assert g.rating() == VolatileRating(1500.0, 350.0, 0.06)
    assert g.conservative(g.rating()) == 800.0


def test_replay_equals_rating_match_by_match() -> None:
    g = Glicko2(tau=0.7)
    rng = random.Random(3)
    size = 10
    mu = [1500.0 + rng.uniform(-200, 200) for _ in range(size)]
    sigma = [rng.uniform(40.0, 350.0) for _ in range(size)]
    vol = [rng.uniform(0.03, 0.2) for _ in range(size)]
    matches = []
    for n in range(MIN_FAST_MATCHES * 2):
        players = rng.sample(range(size), rng.choice([2, 3, 4]))
        teams = [[p] for p in players] if len(players) < 4 else [players[:2], players[2:]]
        ranks = [float(rng.randint(0, 2)) for _ in teams]
        matches.append(ReplayMatch(teams=teams, ranks=ranks, day=float(n)))
    result = replay(g, mu, sigma, matches, tau_per_day=4.0, volatility=vol)
    table = [VolatileRating(m, s, v) for m, s, v in zip(mu, sigma, vol, strict=True)]
    # The replay ages by tau_per_day as the model's own deviation_per_day does.
    aged = Glicko2(tau=0.7, deviation_per_day=4.0)
    last: dict[int, float] = {}
    for match in matches:
        teams = [
            [aged.age(table[p], match.day - last[p]) if p in last else table[p] for p in team]
            for team in match.teams
        ]
        new = aged.rate(teams, ranks=match.ranks)
        for team, rated in zip(match.teams, new, strict=True):
            for p, r in zip(team, rated, strict=True):
                table[p] = r
                last[p] = match.day
    assert result.volatility is not None and result.after_volatility is not None
    assert result.mu.tolist() == [r.mu for r in table]
    assert result.sigma.tolist() == [r.sigma for r in table]
    assert result.volatility.tolist() == [r.volatility for r in table]
