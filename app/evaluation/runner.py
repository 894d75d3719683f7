"""Evaluate several algorithms on one match file (what ``ratings evaluate`` runs)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

from app.evaluation.data import MatchFile, empirical_draw_probability
from app.evaluation.metrics import TIE_WEIGHT, Predictions, predict, summarize
from app.evaluation.presets import build


@dataclass(slots=True)
class FileEvaluation:
    """The runs of every algorithm on one file and their summaries."""

    file: MatchFile
    draw_probability: float
    runs: list[Predictions]
    results: list[dict[str, Any]]


def most_active(match_file: MatchFile, count: int) -> list[int]:
    """The ``count`` players with the most matches (ties: first seen first)."""
    played: Counter[int] = Counter()
    for m in match_file.matches:
        for team in m.teams:
            played.update(team)
    return [i for i, _ in played.most_common(count)]


def evaluate_file(
    match_file: MatchFile,
    names: Sequence[str],
    params: Mapping[str, Mapping[str, Any]] | None = None,
    *,
    start: int = 0,
    on_progress: Callable[[str, int, int], None] | None = None,
    track: int = 0,
    pair_loss: bool = False,
    tie_weight: float = TIE_WEIGHT,
) -> FileEvaluation:
    """Replay ``match_file`` once per algorithm name; metrics from match ``start`` on.

    ``params`` maps an algorithm or preset name to parameters overriding its own.
    TrueSkill's draw probability defaults to the empirical one of the matches before
    ``start`` (all matches when ``start`` is 0). ``track`` players (the most active) have
    their rating trajectories kept for plotting. ``on_progress(name, done, total)`` is told
    how many matches each algorithm has replayed.
    """
    params = params or {}
    known = match_file.matches[:start] if start else match_file.matches
    draw = empirical_draw_probability(known)
    tracked = most_active(match_file, track) if track else []
    runs: list[Predictions] = []
    for name in names:
        model = build(name, params.get(name), draw_probability=draw)
        runs.append(
            predict(
                model,
                match_file.matches,
                len(match_file.players),
                algorithm=name,
                track=tracked,
                pair_loss=pair_loss,
                on_progress=(None if on_progress is None else partial(on_progress, f"{name:<18}")),
            )
        )
    results = summarize(runs, start=start, tie_weight=tie_weight)
    for row in results:
        row["file"] = match_file.path
        row["draw_probability"] = draw
        row["skipped"] = match_file.skipped
    return FileEvaluation(match_file, draw, runs, results)
