"""The paper's table and a comparison with the public packages on real match files.

    # The TrueSkill paper's section 4.1 table on the Halo 2 beta files, beside its numbers
    .venv/bin/python benchmarks/evaluate.py paper ../shared/data/halo2

    # Fitted on the earlier half, measured on the later half, against the public
    # ``trueskill`` and ``openskill`` packages at their defaults
    .venv/bin/python benchmarks/evaluate.py packages FILE [FILE...] [--json OUT]

The packages are test-only dependencies; they are wrapped here in the small interface the
evaluation replays (``rating``, ``rate``, ``quality``, ``win_probabilities``) and replayed
exactly like the models of ``app.rating``: the same files, order, prediction and measures.
Their win probability for two teams is each package's own (``openskill``'s
``predict_win``; for ``trueskill``, which has none, the standard
Phi(delta mu / sqrt(n beta^2 + sum sigma^2))); their quality is the TrueSkill paper's
equation 7 with the package's beta.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from app.evaluation.data import MatchFile, read_matches
from app.evaluation.fit import fit
from app.evaluation.metrics import Predictions, json_safe, pair_log_loss, predict, summarize
from app.evaluation.runner import evaluate_file
from app.rating.base import Rating
from app.rating.quality import match_quality

HALO = {
    "free_for_all": "Free for All",
    "small_team": "Small Teams",
    "head_to_head": "Head to Head",
    "large_team": "Large Teams",
}
#: The paper's table (section 4.1): Elo full, TrueSkill full, Elo challenged, TrueSkill
#: challenged, in percent.
PAPER = {
    "free_for_all": (32.14, 30.82, 38.30, 35.64),
    "small_team": (34.92, 35.23, 42.55, 37.17),
    "head_to_head": (33.24, 32.44, 40.57, 30.83),
    "large_team": (39.49, 38.15, 44.12, 29.94),
}


def _pct(x: float) -> str:
    return "-" if not math.isfinite(x) else f"{100 * x:.2f}%"


def cmd_paper(args: argparse.Namespace) -> int:
    lines = [
        "| mode | matches | Elo (paper) | Elo | TrueSkill (paper) | TrueSkill | "
        "Elo challenged (paper) | Elo challenged | TrueSkill challenged (paper) | "
        "TrueSkill challenged | ties as | seconds |",
        "|" + "---|" * 12,
    ]
    for stem, mode in HALO.items():
        path = Path(args.directory) / f"{stem}.jsonl"
        if not path.exists():
            print(f"skipping {path}: not there", file=sys.stderr)
            continue
        ev = evaluate_file(read_matches(path), ["elo-paper", "trueskill"])
        seconds = sum(r.seconds for r in ev.runs)
        paper = PAPER[stem]
        for label, weight in (("half", 0.5), ("wrong", 1.0)):
            elo, ts = summarize(ev.runs, tie_weight=weight)
            lines.append(
                f"| {mode} | {elo['matches']} | {paper[0]:.2f}% | {_pct(elo['prediction_error'])} "
                f"| {paper[1]:.2f}% | {_pct(ts['prediction_error'])} "
                f"| {paper[2]:.2f}% | {_pct(elo['challenged']['trueskill'])} "
                f"| {paper[3]:.2f}% | {_pct(ts['challenged']['elo-paper'])} "
                f"| {label} | {seconds:.1f} |"
            )
        print(
            f"{stem}: draw probability {ev.draw_probability:.4f}, predicted-even pairs "
            f"TrueSkill {int(ev.runs[1].tied.sum())} of {int(ev.runs[1].pairs.sum())}",
            file=sys.stderr,
        )
    print("\n".join(lines))
    return 0


class _Package:
    """A public package's model behind the interface ``predict`` replays, at its defaults:
    the packages have no advantage, so the shares a match gives are ignored."""

    name = "package"

    def __init__(self, label: str) -> None:
        self.label = label

    @property
    def params(self) -> dict[str, float | str]:
        return {"package": self.label}


class TrueSkillPackage(_Package):
    """The ``trueskill`` package (0.4.5) at its defaults (draw probability 0.10)."""

    def __init__(self) -> None:
        import trueskill

        super().__init__("trueskill (package)")
        self.env = trueskill.TrueSkill()
        self.beta = float(self.env.beta)

    def rating(self, mu: float | None = None, sigma: float | None = None) -> Rating:
        return Rating(float(self.env.mu), float(self.env.sigma))

    def rate(
        self,
        teams: Sequence[Sequence[Rating]],
        ranks: Sequence[float] | None = None,
        weights: Any = None,
        advantage: Any = None,
        scores: Sequence[float] | None = None,
    ) -> list[list[Rating]]:
        if scores is not None:
            ranks = [-s for s in scores]
        groups = [[self.env.create_rating(r.mu, r.sigma) for r in team] for team in teams]
        new = self.env.rate(groups, ranks=list(ranks) if ranks is not None else None)
        return [[Rating(float(r.mu), float(r.sigma)) for r in team] for team in new]

    def quality(
        self, teams: Sequence[Sequence[Rating]], weights: Any = None, advantage: Any = None
    ) -> float:
        return match_quality(teams, None, self.beta)

    def win_probabilities(
        self, teams: Sequence[Sequence[Rating]], weights: Any = None, advantage: Any = None
    ) -> list[float]:
        a, b = teams
        delta = sum(r.mu for r in a) - sum(r.mu for r in b)
        var = (len(a) + len(b)) * self.beta**2 + sum(r.sigma**2 for r in (*a, *b))
        p = 0.5 * math.erfc(-delta / math.sqrt(2.0 * var))
        return [p, 1.0 - p]


class OpenSkillPackage(_Package):
    """One of the ``openskill`` package's models at its defaults."""

    def __init__(self, model: str) -> None:
        from openskill import models

        super().__init__(f"openskill {model}")
        self.model = getattr(models, model)()
        self.beta = float(self.model.beta)

    def rating(self, mu: float | None = None, sigma: float | None = None) -> Rating:
        r = self.model.rating()
        return Rating(float(r.mu), float(r.sigma))

    def _ratings(self, teams: Sequence[Sequence[Rating]]) -> list[list[Any]]:
        return [[self.model.rating(mu=r.mu, sigma=r.sigma) for r in team] for team in teams]

    def rate(
        self,
        teams: Sequence[Sequence[Rating]],
        ranks: Sequence[float] | None = None,
        weights: Any = None,
        advantage: Any = None,
        scores: Sequence[float] | None = None,
    ) -> list[list[Rating]]:
        if scores is not None:
            ranks = [-s for s in scores]
        new = self.model.rate(
            self._ratings(teams), ranks=list(ranks) if ranks is not None else None
        )
        return [[Rating(float(r.mu), float(r.sigma)) for r in team] for team in new]

    def quality(
        self, teams: Sequence[Sequence[Rating]], weights: Any = None, advantage: Any = None
    ) -> float:
        return match_quality(teams, None, self.beta)

    def win_probabilities(
        self, teams: Sequence[Sequence[Rating]], weights: Any = None, advantage: Any = None
    ) -> list[float]:
        return [float(p) for p in self.model.predict_win(self._ratings(teams))]


def _packages() -> list[_Package]:
    return [
        TrueSkillPackage(),
        OpenSkillPackage("PlackettLuce"),
        OpenSkillPackage("BradleyTerryFull"),
        OpenSkillPackage("ThurstoneMostellerFull"),
    ]


def _later(run: Predictions, split: int) -> dict[str, Any]:
    row = summarize([run], start=split)[0]
    mask = np.arange(len(run.wrong)) >= split
    row["pair_log_loss"] = pair_log_loss(run, mask)
    return row


def compare_file(
    match_file: MatchFile, ours: Sequence[str], max_evaluations: int
) -> list[dict[str, Any]]:
    split = len(match_file.matches) // 2
    rows: list[dict[str, Any]] = []
    for name in ours:
        started = time.perf_counter()
        result = fit(match_file, name, max_evaluations=max_evaluations)
        fitted = result.test["fitted"]
        rows.append(
            {
                "file": match_file.path,
                "system": f"{name} (fitted)",
                "params": result.params,
                "train_pair_log_loss": result.train_loss,
                "prediction_error": fitted["prediction_error"],
                "log_loss": fitted["log_loss"],
                "pair_log_loss": fitted["pair_log_loss"],
                "brier": fitted["brier"],
                "seconds": time.perf_counter() - started,
            }
        )
        print(f"  {rows[-1]['system']}: {_pct(rows[-1]['prediction_error'])}", file=sys.stderr)
    for package in _packages():
        started = time.perf_counter()
        run = predict(
            package,  # type: ignore[arg-type]
            match_file.matches,
            len(match_file.players),
            algorithm=package.label,
            pair_loss=True,
        )
        later = _later(run, split)
        rows.append(
            {
                "file": match_file.path,
                "system": package.label,
                "params": package.params,
                "train_pair_log_loss": pair_log_loss(run, np.arange(len(run.wrong)) < split),
                "prediction_error": later["prediction_error"],
                "log_loss": later["log_loss"],
                "pair_log_loss": later["pair_log_loss"],
                "brier": later["brier"],
                "seconds": time.perf_counter() - started,
            }
        )
        print(f"  {rows[-1]['system']}: {_pct(rows[-1]['prediction_error'])}", file=sys.stderr)
    return rows


def cmd_packages(args: argparse.Namespace) -> int:
    ours = [n.strip() for n in args.ours.split(",") if n.strip()]
    everything: list[dict[str, Any]] = []
    for path in args.files:
        print(f"{path}:", file=sys.stderr)
        everything.extend(compare_file(read_matches(path), ours, args.max_evaluations))
        if args.json:
            Path(args.json).write_text(json.dumps(json_safe(everything), indent=2))
    print("| file | system | error (later half) | log loss | pair log loss | brier |")
    print("|---|---|---|---|---|---|")
    for row in everything:
        ll = row["log_loss"]
        print(
            f"| {Path(row['file']).name} | {row['system']} | {_pct(row['prediction_error'])} "
            f"| {'-' if ll is None or not math.isfinite(ll) else f'{ll:.4f}'} "
            f"| {row['pair_log_loss']:.4f} | "
            f"{'-' if not math.isfinite(row['brier']) else format(row['brier'], '.4f')} |"
        )
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    paper = commands.add_parser("paper", help="the paper's section 4.1 table on Halo 2")
    paper.add_argument("directory", help="the folder of the four Halo 2 beta files")
    paper.set_defaults(func=cmd_paper)
    packages = commands.add_parser("packages", help="fitted models against the packages")
    packages.add_argument("files", nargs="+")
    packages.add_argument("--ours", default="trueskill,plackett_luce,elo-full-logistic")
    packages.add_argument("--max-evaluations", type=int, default=30)
    packages.add_argument("--json", help="also write the rows there")
    packages.set_defaults(func=cmd_packages)
    args = parser.parse_args(argv)
    status: int = args.func(args)
    return status


if __name__ == "__main__":
    sys.exit(main())
