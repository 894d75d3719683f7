"""Named algorithm configurations for evaluation.

A name is either a ladder algorithm (``trueskill``, ``plackett_luce``, ``elo``,
``glicko2``) or another
Weng-Lin model (``bradley_terry_full``, ``bradley_terry_part``,
``thurstone_mosteller_full``, ``thurstone_mosteller_part``) at its defaults, or one of
these presets of the Elo family:

- ``elo-paper``: the Elo the TrueSkill paper compares against (section 4.1): Gaussian
  performances (equation 1), the linearised update with K = alpha beta sqrt(pi),
  alpha = 0.07, and the duelling heuristic for teams and free-for-all (the mean of the
  duel deltas, ``multiplayer="pairwise_mean"``). It runs on the TrueSkill scale: initial
  rating mu_0 = 25, beta = sigma_0 / 2 = 25/6, so K = 0.07 * 25/6 * sqrt(pi) ~ 0.517. This
  is the paper's "K factor of 24 on the Elo scale" multiplied by 25/1200: on the Elo scale
  (beta 200) the same alpha gives K = 0.07 * 200 * sqrt(pi) ~ 24.8, and both scales
  predict and rank identically.
- ``elo-full-logistic``: logistic Elo with one likelihood step on the whole finishing
  order (Plackett-Luce on team ratings; Kerby section 3.2), Elo defaults otherwise.
- ``elo-full-gaussian``: Gaussian Elo with one likelihood step on the whole order
  (Thurstonian integration; Kerby section 3.3), Elo defaults otherwise.

TrueSkill's ``draw_probability``, when not given, is the file's empirical draw
probability (the paper's section 4.1).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from app.rating.base import RatingInputError, RatingModel
from app.rating.registry import MODELS, make_model

#: The paper's alpha (section 4.1) and the TrueSkill scale's beta = sigma_0 / 2.
PAPER_ALPHA = 0.07
PAPER_BETA = 25.0 / 6.0

PRESETS: dict[str, tuple[str, dict[str, Any]]] = {
    "elo-paper": (
        "elo",
        {
            "initial": 25.0,
            "model": "gaussian",
            "beta": PAPER_BETA,
            "k_factor": PAPER_ALPHA * PAPER_BETA * math.sqrt(math.pi),
            "rule": "classic",
            "multiplayer": "pairwise_mean",
        },
    ),
    "elo-full-logistic": ("elo", {"model": "logistic", "multiplayer": "full"}),
    "elo-full-gaussian": ("elo", {"model": "gaussian", "multiplayer": "full"}),
}

#: Every name ``resolve`` accepts.
NAMES = (*MODELS, *PRESETS)

#: What ``ratings evaluate`` runs when no ``--algorithms`` are given.
DEFAULT_ALGORITHMS = ("trueskill", "plackett_luce", "elo", "elo-paper", "elo-full-logistic")


def resolve(
    name: str,
    params: Mapping[str, Any] | None = None,
    *,
    draw_probability: float | None = None,
) -> tuple[str, dict[str, Any]]:
    """The ladder algorithm and full parameter set for ``name`` plus overriding ``params``.

    ``draw_probability`` (the file's empirical one) fills in TrueSkill's when the
    parameters do not set it. Raises ``RatingInputError`` for an unknown name.
    """
    if name in PRESETS:
        algorithm, base = PRESETS[name]
        merged = {**base, **(params or {})}
    elif name in MODELS:
        algorithm, merged = name, dict(params or {})
    else:
        raise RatingInputError("algorithms", f"unknown {name!r}: choose from {', '.join(NAMES)}")
    if algorithm == "trueskill" and draw_probability is not None:
        merged.setdefault("draw_probability", draw_probability)
    return algorithm, merged


def build(
    name: str,
    params: Mapping[str, Any] | None = None,
    *,
    draw_probability: float | None = None,
) -> RatingModel:
    """The model for ``name`` (see ``resolve``)."""
    algorithm, merged = resolve(name, params, draw_probability=draw_probability)
    return make_model(algorithm, merged)
