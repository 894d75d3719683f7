"""The advantage of home ground or first move, in every model.

A team with advantage share a_j plays as if its mean performance were ``advantage * a_j``
higher. For a model whose team strength is the sum of its members' means (TrueSkill, the
Weng-Lin family) that is the same as moving each of its n members' means by
``advantage * a_j / n``; for a model that rates a team by its members' mean (Elo,
Glicko-2) by moving each member by ``advantage * a_j``. Every prediction equals the
prediction at the moved means, and every update equals the update at the moved means with
the move taken back, which is what these tests check, model by model.
"""

from __future__ import annotations

import math

import pytest

from app.rating import Rating, RatingInputError, make_model
from app.rating.base import RatingModel
from app.rating.quality import predict_rank
from app.rating.registry import ALGORITHMS

#: Models whose team strength is the mean of its members' ratings.
MEAN_TEAMS = {"elo", "glicko2"}

SIZE = {"elo": 100.0, "glicko2": 80.0}


def _size(algorithm: str) -> float:
    return SIZE.get(algorithm, 1.7)


def _teams(model: RatingModel, algorithm: str) -> list[list[Rating]]:
    base = model.rating()
    if algorithm in MEAN_TEAMS:
        step = 40.0
        sd = base.sigma
    else:
        step = 1.3
        sd = base.sigma
    return [
        [Rating(base.mu + step, sd * 0.9), Rating(base.mu - step / 2, sd * 0.7)],
        [Rating(base.mu, sd * 0.8), Rating(base.mu + step / 3, sd * 0.6)],
        [Rating(base.mu - step, sd)],
    ]


def _moved(teams: list[list[Rating]], shifts: list[float], algorithm: str) -> list[list[Rating]]:
    out = []
    for team, shift in zip(teams, shifts, strict=True):
        each = shift if algorithm in MEAN_TEAMS else shift / len(team)
        out.append([r._replace(mu=r.mu + each) for r in team])
    return out


def _close(a: float, b: float) -> None:
    assert a == pytest.approx(b, rel=1e-9, abs=1e-9)


@pytest.mark.parametrize("algorithm", ALGORITHMS)
@pytest.mark.parametrize("k", [2, 3])
def test_advantage_is_a_move_of_the_team_means(algorithm: str, k: int) -> None:
    size = _size(algorithm)
    model = make_model(algorithm, {"advantage": size})
    plain = make_model(algorithm)
    teams = _teams(model, algorithm)[:k]
    shares = [1.0, 0.0, 0.5][:k]
    shifts = [size * a for a in shares]
    moved = _moved(teams, shifts, algorithm)

    for got, want in zip(
        model.win_probabilities(teams, advantage=shares),
        plain.win_probabilities(moved),
        strict=True,
    ):
        _close(got, want)
    _close(model.quality(teams, advantage=shares), plain.quality(moved))
    draw = model.draw_probability(teams, advantage=shares)
    draw_moved = plain.draw_probability(moved)
    assert (draw is None) == (draw_moved is None)
    if draw is not None and draw_moved is not None:
        _close(draw, draw_moved)
    got_ranks = predict_rank(model, teams, advantage=shares)
    want_ranks = predict_rank(plain, moved)
    assert [r.rank for r in got_ranks] == [r.rank for r in want_ranks]
    for g, w in zip(got_ranks, want_ranks, strict=True):
        _close(g.probability, w.probability)

    for ranks in ([2, 1, 3][:k], [1, 1, 2][:k]):
        new = model.rate(teams, ranks=ranks, advantage=shares)
        new_moved = plain.rate(moved, ranks=ranks)
        for team, team_moved, old, old_moved in zip(new, new_moved, teams, moved, strict=True):
            for r, rm, o, om in zip(team, team_moved, old, old_moved, strict=True):
                _close(r.mu - o.mu, rm.mu - om.mu)
                _close(r.sigma, rm.sigma)


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_no_advantage_changes_nothing(algorithm: str) -> None:
    plain = make_model(algorithm)
    sized = make_model(algorithm, {"advantage": _size(algorithm)})
    teams = _teams(plain, algorithm)[:2]
    want = plain.rate(teams, ranks=[2, 1])
    # A size of 0 (the default) ignores the shares; shares of 0 ignore the size.
    assert plain.rate(teams, ranks=[2, 1], advantage=[1, 0]) == want
    assert sized.rate(teams, ranks=[2, 1], advantage=[0, 0]) == want
    assert sized.rate(teams, ranks=[2, 1]) == want
    assert plain.win_probabilities(teams, advantage=[1, 0]) == plain.win_probabilities(teams)


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_a_home_win_is_worth_less_and_a_home_loss_costs_more(algorithm: str) -> None:
    model = make_model(algorithm, {"advantage": _size(algorithm)})
    a, b = model.rating(), model.rating()
    even = model.rate([[a], [b]])
    home_win = model.rate([[a], [b]], advantage=[1, 0])
    home_loss = model.rate([[a], [b]], ranks=[2, 1], advantage=[1, 0])
    away_win = model.rate([[a], [b]], ranks=[2, 1])
    assert home_win[0][0].mu - a.mu < even[0][0].mu - a.mu
    assert a.mu - home_loss[0][0].mu > a.mu - away_win[0][0].mu
    p_home = model.win_probabilities([[a], [b]], advantage=[1, 0])[0]
    assert p_home > 0.5 if _size(algorithm) > 0 else p_home == 0.5


def test_elo_home_advantage_is_the_world_football_elo_expectation() -> None:
    """eloratings.net: W_e = 1 / (10^(-dr/400) + 1), dr the difference plus 100 at home."""
    model = make_model("elo", {"advantage": 100.0, "k_factor": 20.0})
    home, away = Rating(1600.0, 0.0), Rating(1650.0, 0.0)
    expected = 1.0 / (10.0 ** (-(1600.0 + 100.0 - 1650.0) / 400.0) + 1.0)
    p = model.win_probabilities([[home], [away]], advantage=[1, 0])[0]
    assert p == pytest.approx(expected, rel=1e-15)
    (h,), (w,) = model.rate([[home], [away]], advantage=[1, 0])
    assert h.mu == pytest.approx(1600.0 + 20.0 * (1.0 - expected), rel=1e-15)
    assert w.mu == pytest.approx(1650.0 - 20.0 * (1.0 - expected), rel=1e-15)


def test_trueskill_home_advantage_against_the_paper_equations() -> None:
    """1 v 1, the paper's section 3 update with m_1 - m_2 moved by the advantage."""
    model = make_model("trueskill", {"advantage": 2.0, "draw_probability": 0.0, "tau": 0.0})
    a, b = Rating(25.0, 8.0), Rating(27.0, 6.0)
    beta = 25.0 / 6.0
    c = math.sqrt(2 * beta * beta + 64.0 + 36.0)
    t = (25.0 + 2.0 - 27.0) / c
    pdf = math.exp(-t * t / 2) / math.sqrt(2 * math.pi)
    cdf = 0.5 * math.erfc(-t / math.sqrt(2))
    v = pdf / cdf
    w = v * (v + t)
    (na,), (nb,) = model.rate([[a], [b]], advantage=[1, 0])
    assert na.mu == pytest.approx(25.0 + 64.0 / c * v, rel=1e-12)
    assert nb.mu == pytest.approx(27.0 - 36.0 / c * v, rel=1e-12)
    assert na.sigma == pytest.approx(math.sqrt(64.0 * (1 - 64.0 / c**2 * w)), rel=1e-12)
    assert model.win_probabilities([[a], [b]], advantage=[1, 0])[0] == pytest.approx(cdf)


@pytest.mark.parametrize("algorithm", ALGORITHMS)
@pytest.mark.parametrize(
    ("shares", "message"),
    [([1.0], "expected 2 values"), ([1.5, 0.0], "in [0, 1]"), ([math.nan, 0.0], "finite")],
)
def test_bad_shares_are_refused_by_name(algorithm: str, shares: list[float], message: str) -> None:
    model = make_model(algorithm, {"advantage": _size(algorithm)})
    teams = [[model.rating()], [model.rating()]]
    for call in (
        lambda: model.rate(teams, advantage=shares),
        lambda: model.win_probabilities(teams, advantage=shares),
        lambda: model.quality(teams, advantage=shares),
    ):
        with pytest.raises(RatingInputError) as info:
            call()
        assert info.value.argument == "advantage"
        assert message in info.value.message


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_events_beyond_the_array_threshold_keep_the_advantage(algorithm: str) -> None:
    """Past ``LARGE_MATCH_TEAMS`` the updates and pair measures run in arrays: the
    advantage still moves the team means exactly as on the scalar paths."""
    from app.rating.pairwise import LARGE_MATCH_TEAMS

    size = _size(algorithm)
    model = make_model(algorithm, {"advantage": size})
    plain = make_model(algorithm)
    base = model.rating()
    k = LARGE_MATCH_TEAMS + 6
    step = 7.0 if algorithm in MEAN_TEAMS else 0.2
    teams = [[Rating(base.mu + step * ((j * 7) % 11 - 5), base.sigma)] for j in range(k)]
    shares = [1.0 if j % 5 == 0 else 0.0 for j in range(k)]
    moved = _moved(teams, [size * a for a in shares], algorithm)
    ranks = [float(j // 3) for j in range(k)]
    new = model.rate(teams, ranks=ranks, advantage=shares)
    want = plain.rate(moved, ranks=ranks)
    for (r,), (rm,), (o,), (om,) in zip(new, want, teams, moved, strict=True):
        assert r.mu - o.mu == pytest.approx(rm.mu - om.mu, rel=1e-7, abs=1e-9)
        assert r.sigma == pytest.approx(rm.sigma, rel=1e-7)
    strengths = getattr(model, "team_strengths", None)
    if strengths is not None:
        got = strengths(teams, None, shares)
        expected = plain.team_strengths(moved)  # type: ignore[attr-defined]
        assert got.mean.tolist() == pytest.approx(expected.mean.tolist(), rel=1e-12)
