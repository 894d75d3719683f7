"""The season's soft reset (``rating-models.md`` section 8) against its formulas written out,
its exact ends (keep 1 and 0) and its refusals."""

from __future__ import annotations

import math

import numpy as np
import pytest

from app.rating.base import RatingInputError
from app.rating.seasons import check_keep, reset_mu, reset_sigma


@pytest.mark.parametrize("keep", [0.0, 0.1, 0.25, 0.5, 0.9, 1.0])
def test_the_formulas(keep: float) -> None:
    for mu, sigma in [(31.2, 2.5), (12.0, 9.0), (-400.0, 1e-3), (25.0, 25 / 3)]:
        assert reset_mu(mu, prior_mu=25.0, keep=keep) == pytest.approx(
            25.0 + keep * (mu - 25.0), rel=1e-15, abs=1e-12
        )
        expected = math.sqrt(keep * sigma**2 + (1 - keep) * (25 / 3) ** 2)
        assert reset_sigma(sigma, prior_sigma=25 / 3, keep=keep) == pytest.approx(
            expected, rel=1e-15
        )


def test_the_ends_are_exact() -> None:
    """keep 1 carries a rating over bit for bit (mu0 + (mu - mu0) would round a tiny mu
    to 0); keep 0 is the prior itself."""
    assert reset_mu(1e-17, prior_mu=25.0, keep=1.0) == 1e-17
    assert reset_sigma(0.1, prior_sigma=8.0, keep=1.0) == 0.1
    assert reset_mu(1e9, prior_mu=1500.0, keep=0.0) == 1500.0
    assert reset_sigma(1e-6, prior_sigma=350.0, keep=0.0) == 350.0


def test_arrays_element_by_element() -> None:
    mu = np.array([30.0, 20.0, 25.0])
    sigma = np.array([2.0, 8.0, 25 / 3])
    got_mu = reset_mu(mu, prior_mu=25.0, keep=0.3)
    got_sigma = reset_sigma(sigma, prior_sigma=25 / 3, keep=0.3)
    for n in range(3):
        assert got_mu[n] == reset_mu(float(mu[n]), prior_mu=25.0, keep=0.3)
        assert got_sigma[n] == reset_sigma(float(sigma[n]), prior_sigma=25 / 3, keep=0.3)
    # The prior stays the prior (to the last bit of its mean).
    assert got_mu[2] == 25.0
    assert got_sigma[2] == pytest.approx(25 / 3, rel=1e-15)


def test_the_reset_pulls_toward_the_prior_and_widens() -> None:
    for keep in (0.2, 0.5, 0.8):
        mu = reset_mu(40.0, prior_mu=25.0, keep=keep)
        assert 25.0 < mu < 40.0
        assert 2.0 < reset_sigma(2.0, prior_sigma=8.0, keep=keep) < 8.0


@pytest.mark.parametrize("keep", [-0.01, 1.01, math.nan, math.inf, True, "0.5"])
def test_keep_outside_zero_to_one_is_refused(keep: object) -> None:
    with pytest.raises(RatingInputError, match="keep"):
        check_keep(keep)  # type: ignore[arg-type]
    with pytest.raises(RatingInputError, match="keep"):
        reset_mu(30.0, prior_mu=25.0, keep=keep)  # type: ignore[arg-type]
