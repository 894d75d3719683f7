"""The season's soft reset (``rating-models.md`` section 8): every rating pulled toward
the prior by a ``keep`` factor f in [0, 1] when a new season opens.

- Gaussian beliefs (TrueSkill, the Weng-Lin family, Glicko-2's rating and deviation):
  mu' = mu0 + f (mu - mu0) and sigma'^2 = f sigma^2 + (1 - f) sigma0^2, so the
  uncertainty grows back toward the prior's as the mean is pulled toward it.
- Elo (no sigma): r' = r0 + f (r - r0).

f = 1 carries every rating over unchanged and f = 0 is a hard reset to the prior, both
exactly (no rounding). A rating at the prior stays there. Glicko-2's volatility is not
reset: the caller keeps it. Works on one rating or on arrays of them, element-wise.
"""

from __future__ import annotations

from typing import TypeVar

import numpy as np
import numpy.typing as npt

from app.rating.base import RatingInputError

Values = TypeVar("Values", float, npt.NDArray[np.float64])


def check_keep(keep: float) -> float:
    """``keep`` as a float in [0, 1]; ``RatingInputError`` otherwise."""
    if isinstance(keep, bool) or not isinstance(keep, int | float) or not 0.0 <= keep <= 1.0:
        raise RatingInputError("keep", f"must be a number in [0, 1], got {keep!r}")
    return float(keep)


def reset_mu(mu: Values, *, prior_mu: float, keep: float) -> Values:
    """The mean (or Elo rating) after the reset: mu0 + f (mu - mu0)."""
    keep = check_keep(keep)
    if keep == 1.0:
        return mu
    if keep == 0.0:
        return mu * 0.0 + prior_mu
    return prior_mu + keep * (mu - prior_mu)


def reset_sigma(sigma: Values, *, prior_sigma: float, keep: float) -> Values:
    """The deviation after the reset: sqrt(f sigma^2 + (1 - f) sigma0^2)."""
    keep = check_keep(keep)
    if keep == 1.0:
        return sigma
    if keep == 0.0:
        return sigma * 0.0 + prior_sigma
    return np.sqrt(keep * sigma * sigma + (1.0 - keep) * prior_sigma * prior_sigma)  # type: ignore[no-any-return]
