"""An independent replay with the rating core, one ``model.rate`` call per match: what the
service's ratings, history and results must equal after batches, voids and rebuilds."""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, cast

from app.rating.base import Rating, RatingModel, VolatileRating, age
from app.rating.glicko2 import Glicko2
from app.rating.registry import make_model

LADDER_PARAMS = ("tau_per_day", "conservative_k")


def when(text: str) -> datetime:
    moment = datetime.fromisoformat(text)
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


@dataclass
class Replayed:
    """Ratings after the replay, each player's history (oldest first, as (kind, match_id,
    before, after)), and per match id the quality, the teams' win probabilities before it
    and the (before, after) of each player."""

    ratings: dict[str, Rating] = field(default_factory=dict)
    played: dict[str, int] = field(default_factory=dict)
    history: dict[str, list[tuple[str, str | None, Rating, Rating]]] = field(default_factory=dict)
    quality: dict[str, float] = field(default_factory=dict)
    win_probabilities: dict[str, list[float]] = field(default_factory=dict)
    changes: dict[str, dict[str, tuple[Rating, Rating]]] = field(default_factory=dict)


def soft_reset(rating: Rating, prior: Rating, keep: float, *, elo: bool) -> Rating:
    """``rating-models.md`` section 8, written out: mu' = mu0 + f (mu - mu0), sigma'^2 =
    f sigma^2 + (1 - f) sigma0^2 (Elo: the rating alone; Glicko-2 keeps its volatility)."""
    if keep == 1.0:
        return rating
    mu = prior.mu if keep == 0.0 else prior.mu + keep * (rating.mu - prior.mu)
    if elo:
        return Rating(mu, 0.0)
    variance = keep * rating.sigma**2 + (1.0 - keep) * prior.sigma**2
    sigma = prior.sigma if keep == 0.0 else math.sqrt(variance)
    if isinstance(rating, VolatileRating):
        return VolatileRating(mu, sigma, rating.volatility)
    return Rating(mu, sigma)


def core_replay(algorithm: str, params: dict[str, Any], events: list[dict[str, Any]]) -> Replayed:
    """Replay ``events`` in order: match bodies, ``{"seed": player, "mu": .., "sigma": ..}``,
    or ``{"season": id, "keep": f}`` (every player rated so far reset, ``soft_reset``).

    A Bayesian player's belief is aged by ``tau_per_day`` for the days since the latest
    played_at of its earlier matches (a match reported late widens nothing).
    """
    glicko2 = algorithm == "glicko2"  # its model holds deviation_per_day, conservative_k
    model_params = {k: v for k, v in params.items() if glicko2 or k not in LADDER_PARAMS}
    model: RatingModel = make_model(algorithm, model_params)
    tau_per_day = float(params.get("tau_per_day", 0.0)) if algorithm != "elo" else 0.0
    if glicko2:
        tau_per_day = float(params.get("deviation_per_day", 0.0))
    out = Replayed()
    latest: dict[str, datetime] = {}
    for event in events:
        if "season" in event:
            for player, old in list(out.ratings.items()):
                new = soft_reset(old, model.rating(), event["keep"], elo=algorithm == "elo")
                out.ratings[player] = new
                out.history.setdefault(player, []).append(("season_reset", None, old, new))
            continue
        if "seed" in event:
            player = event["seed"]
            old = out.ratings.get(player, model.rating())
            sigma = event.get("sigma")
            new = Rating(event["mu"], sigma if sigma is not None else model.rating().sigma)
            if glicko2:
                # A seed without a volatility keeps the player's own.
                volatility = event.get("volatility") or old.volatility
                new = VolatileRating(new.mu, new.sigma, volatility or 0.06)
            if algorithm == "elo":
                new = Rating(event["mu"], 0.0)
            out.ratings[player] = new
            out.history.setdefault(player, []).append(("adjustment", None, old, new))
            continue
        played_at = when(event["played_at"])
        stored = [[out.ratings.get(p, model.rating()) for p in team] for team in event["teams"]]
        teams = []
        for team, ratings in zip(event["teams"], stored, strict=True):
            aged = []
            for player, rating in zip(team, ratings, strict=True):
                if player in latest and tau_per_day > 0:
                    days = (played_at - latest[player]).total_seconds() / 86400
                    if glicko2:  # the model's own rule: up to a new player's deviation
                        held = VolatileRating(*rating, rating.volatility or 0.06)
                        rating = cast(Glicko2, model).age(held, days)
                    else:
                        rating = age(rating, tau_per_day, days)
                aged.append(rating)
            teams.append(aged)
        weights = event.get("weights")
        advantage = event.get("advantage")
        out.quality[event["match_id"]] = model.quality(teams, weights, advantage)
        out.win_probabilities[event["match_id"]] = model.win_probabilities(
            teams, weights, advantage
        )
        new = model.rate(
            teams,
            ranks=event.get("ranks"),
            scores=event.get("scores"),
            weights=weights,
            advantage=advantage,
            player_scores=event.get("player_scores"),
        )
        changes: dict[str, tuple[Rating, Rating]] = {}
        for team, olds, news in zip(event["teams"], stored, new, strict=True):
            for player, old, rating in zip(team, olds, news, strict=True):
                out.ratings[player] = rating
                out.played[player] = out.played.get(player, 0) + 1
                latest[player] = max(played_at, latest.get(player, played_at))
                out.history.setdefault(player, []).append(("match", event["match_id"], old, rating))
                changes[player] = (old, rating)
        out.changes[event["match_id"]] = changes
    return out


def random_matches(
    seed: int,
    count: int,
    players: int = 12,
    start: str = "2026-01-01T00:00:00+00:00",
    advantage: bool = False,
) -> list[dict[str, Any]]:
    """Match bodies of every shape: 1 v 1, free-for-alls with ties, teams, scores, partial
    play, played_at moving forward by hours or days and now and then reported late; with
    ``advantage``, most matches give one team (or two, in part) an advantage share."""
    rng = random.Random(seed)
    names = [f"p{n:02d}" for n in range(players)]
    moment = datetime.fromisoformat(start)
    bodies = []
    for n in range(count):
        moment += timedelta(hours=rng.choice([1, 5, 30, 200]))
        played_at = moment - timedelta(days=3) if rng.random() < 0.1 else moment
        chosen = rng.sample(names, rng.choice([2, 2, 3, 4, 5]))
        if len(chosen) >= 4 and rng.random() < 0.5:
            teams = [chosen[:2], chosen[2:]]
        else:
            teams = [[p] for p in chosen]
        body: dict[str, Any] = {
            "match_id": f"r{seed}-{n}",
            "played_at": played_at.isoformat(),
            "teams": teams,
        }
        kind = rng.random()
        if kind < 0.4:
            body["ranks"] = [rng.randint(1, len(teams)) for _ in teams]
        elif kind < 0.6:
            body["scores"] = [rng.randint(0, 5) for _ in teams]
        if rng.random() < 0.2:
            body["weights"] = [[rng.choice([1.0, 0.5, 0.75]) for _ in team] for team in teams]
        if advantage and rng.random() < 0.7:
            shares = [0.0] * len(teams)
            shares[rng.randrange(len(teams))] = 1.0
            if len(teams) > 2 and rng.random() < 0.3:
                shares[rng.randrange(len(teams))] = 0.5
            body["advantage"] = shares
        bodies.append(body)
    return bodies
