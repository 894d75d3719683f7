"""PNG figures of an evaluation (matplotlib, headless; the optional ``eval`` extra).

For one file (``<stem>-<figure>.png``):

- ``calibration``: the win probability of the first team, binned in tenths, against the
  fraction of those decisive two-team matches it won (the diagonal is perfect).
- ``quality``: the paper's match-quality figure (section 4.1, "Match Quality"): matches
  sorted from the highest predicted quality down, and the draws accumulated along that
  order as a fraction of all draws, each match counting the fraction of its pairs of
  teams that drew (a two-team match: 1 for a draw). A system that finds tight matches
  climbs early; one with no information follows the diagonal.
- ``trajectories``: the rating (mu) of the most active players after each of their
  matches, one panel per algorithm (the paper's "Convergence Properties").
- ``error``: the prediction error accumulated as matches are played.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from app.evaluation.metrics import Predictions

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from app.evaluation.runner import FileEvaluation


def _figure(width: float = 6.4, height: float = 4.4) -> Figure:
    from matplotlib.figure import Figure

    return Figure(figsize=(width, height), dpi=100, layout="constrained")


def calibration(runs: list[Predictions], title: str) -> Figure | None:
    """Predicted against observed win rate of the first team (decisive two-team matches)."""
    fig = _figure()
    ax = fig.add_subplot()
    drawn = False
    edges = np.linspace(0.0, 1.0, 11)
    for r in runs:
        sel = ~np.isnan(r.p_first)
        if sel.sum() < 10:
            continue
        p, y = r.p_first[sel], r.first_won[sel]
        which = np.clip(np.digitize(p, edges) - 1, 0, 9)
        xs, ys = [], []
        for b in range(10):
            inside = which == b
            if inside.sum() >= 5:
                xs.append(float(p[inside].mean()))
                ys.append(float(y[inside].mean()))
        ax.plot(xs, ys, marker="o", label=r.algorithm)
        drawn = True
    if not drawn:
        return None
    ax.plot([0, 1], [0, 1], color="grey", linestyle=":", label="perfect")
    ax.set_xlabel("predicted P(first team wins)")
    ax.set_ylabel("observed fraction won")
    ax.set_title(f"Calibration: {title}")
    ax.legend(fontsize="small")
    return fig


def quality(runs: list[Predictions], title: str) -> Figure | None:
    """Fraction of draws accumulated over the matches sorted by predicted quality."""
    if not runs:
        return None
    # Each match counts the fraction of its pairs of teams that drew, so that matches of
    # many teams (more pairs, and lower quality by construction) do not dominate.
    all_pairs = runs[0].drawn + runs[0].pairs
    share = np.divide(runs[0].drawn, all_pairs, out=np.zeros_like(all_pairs), where=all_pairs > 0)
    total = float(share.sum())
    if total == 0.0:
        return None
    fig = _figure()
    ax = fig.add_subplot()
    n = len(share)
    x = np.arange(1, n + 1) / n
    for r in runs:
        order = np.argsort(-r.quality, kind="stable")
        ax.plot(x, np.cumsum(share[order]) / total, label=r.algorithm)
    ax.plot([0, 1], [0, 1], color="grey", linestyle=":", label="no information")
    ax.set_xlabel("fraction of matches, highest predicted quality first")
    ax.set_ylabel("fraction of all draws")
    ax.set_title(f"Match quality: {title}")
    ax.legend(fontsize="small")
    return fig


def trajectories(runs: list[Predictions], title: str, players: list[str]) -> Figure | None:
    """Rating trajectories of the tracked players, one panel per algorithm."""
    shown = [r for r in runs if r.trajectories]
    if not shown:
        return None
    cols = min(len(shown), 3)
    rows = (len(shown) + cols - 1) // cols
    fig = _figure(4.2 * cols, 3.2 * rows)
    for k, r in enumerate(shown):
        ax = fig.add_subplot(rows, cols, k + 1)
        for i, (_, mus) in r.trajectories.items():
            ax.plot(np.arange(1, len(mus) + 1), mus, linewidth=0.9, label=players[i][:16])
        ax.set_title(r.algorithm, fontsize="medium")
        ax.set_xlabel("player's matches")
        ax.set_ylabel("mu")
        if k == 0:
            ax.legend(fontsize="x-small")
    fig.suptitle(f"Rating trajectories of the most active players: {title}")
    return fig


def error_curve(runs: list[Predictions], title: str) -> Figure | None:
    """Prediction error of all matches so far, as matches accumulate."""
    fig = _figure()
    ax = fig.add_subplot()
    for r in runs:
        pairs = np.cumsum(r.pairs)
        bad = np.cumsum(r.wrong + 0.5 * r.tied)
        ok = pairs > 0
        ax.plot(np.flatnonzero(ok) + 1, bad[ok] / pairs[ok], label=r.algorithm)
    ax.set_xscale("log")
    ax.set_xlabel("matches played")
    ax.set_ylabel("prediction error so far")
    ax.set_title(f"Prediction error: {title}")
    ax.legend(fontsize="small")
    return fig


def write_plots(evaluation: FileEvaluation, directory: str | Path) -> list[Path]:
    """Write the figures of one file's evaluation into ``directory``; return the paths."""
    try:
        import matplotlib
    except ImportError:
        raise RuntimeError("plots need matplotlib: pip install 'ratings[eval]'") from None
    matplotlib.use("Agg")
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    stem = Path(evaluation.file.path).name.removesuffix(".gz").removesuffix(".jsonl")
    runs = evaluation.runs
    figures = {
        "calibration": calibration(runs, stem),
        "quality": quality(runs, stem),
        "trajectories": trajectories(runs, stem, evaluation.file.players),
        "error": error_curve(runs, stem),
    }
    written: list[Path] = []
    for name, fig in figures.items():
        if fig is None:
            continue
        path = out / f"{stem}-{name}.png"
        fig.savefig(path)
        written.append(path)
    return written
