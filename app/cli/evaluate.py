"""The ``evaluate`` and ``fit`` subcommands of ``ratings``.

``add_parsers(subparsers)`` registers both on the ``ratings`` parser; each handler
(``func`` and ``handler`` in the parsed namespace) returns the exit status: 0 on
success, 2 for unusable input (a malformed match file, whose message names the line,
or bad ``--params``), 1 when the optional ``eval`` extra that ``fit`` (scipy) or
``--plots`` (matplotlib) needs is not installed, with the message on stderr.
``main(argv)`` runs them standalone.
"""

from __future__ import annotations

import argparse
import importlib
import json
import math
import os
import sys
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from app.cli.progress import Bars, evaluation_reporter, wanted
from app.evaluation.auto import SHORT, SHORTLIST, AutoResult
from app.evaluation.data import DataError, read_matches
from app.evaluation.presets import DEFAULT_ALGORITHMS, NAMES
from app.rating.base import RatingInputError
from app.rating.registry import ALGORITHMS

if TYPE_CHECKING:  # scipy's: imported when fit runs
    from app.evaluation.fit import FitResult

#: The ``--algorithm`` of ``fit`` that fits every candidate and chooses.
AUTO = "auto"

_EXIT_INPUT = 2
_EXIT_NOT_INSTALLED = 1
#: What installs the packages that ``fit`` and ``--plots`` need beyond the service.
EVAL_EXTRA = "pip install 'ratings[eval]'"


def _fail(message: str, status: int = _EXIT_INPUT) -> int:
    print(f"ratings: {message}", file=sys.stderr)
    return status


def _not_installed(what: str, package: str) -> int | None:
    """None when ``package`` imports; otherwise report that ``what`` needs the extra."""
    try:
        importlib.import_module(package)
    except ImportError:
        return _fail(
            f"{what} needs {package}, which is not installed: {EVAL_EXTRA}", _EXIT_NOT_INSTALLED
        )
    return None


def _percent(value: float) -> str:
    return "-" if not math.isfinite(value) else f"{100.0 * value:.2f}%"


def _number(value: float, digits: int = 4) -> str:
    return "-" if not math.isfinite(value) else f"{value:.{digits}f}"


def _parse_params(text: str | None) -> dict[str, dict[str, Any]]:
    if not text:
        return {}
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"--params is not valid JSON: {exc.msg}") from None
    if not isinstance(value, dict) or not all(isinstance(v, dict) for v in value.values()):
        raise ValueError('--params must be an object of objects, e.g. {"trueskill": {"beta": 4}}')
    unknown = sorted(set(value) - set(NAMES))
    if unknown:
        raise ValueError(f"--params names unknown algorithms: {', '.join(unknown)}")
    return value


#: Short names of the algorithms in the table's headers (a legend under it names them).
HEADER_NAMES = {
    "trueskill": "TS",
    "plackett_luce": "PL",
    "bradley_terry_full": "BT-f",
    "bradley_terry_part": "BT-p",
    "thurstone_mosteller_full": "TM-f",
    "thurstone_mosteller_part": "TM-p",
    "elo": "Elo",
    "glicko2": "G2",
}


def _table(rows: list[dict[str, Any]], markdown: bool) -> str:
    names = list(dict.fromkeys(row["algorithm"] for row in rows))
    short = {n: HEADER_NAMES.get(n, n) for n in names}
    header = [
        "file",
        "algorithm",
        "matches",
        "error",
        "log loss",
        "brier",
        *[f"@{short[n]}" for n in names],
        "seconds",
    ]
    legend = (
        "@X: the error on the matches X found tightest (its most even predictions), "
        "where " + ", ".join(f"{short[n]} = {n}" for n in names if short[n] != n)
    ).removesuffix(", where ")
    body: list[list[str]] = []
    for row in rows:
        challenged = dict(row["challenged"])
        challenged[row["algorithm"]] = row["tightest_error"]
        body.append(
            [
                row["file"].rsplit("/", 1)[-1],
                row["algorithm"],
                str(row["matches"]),
                _percent(row["prediction_error"]),
                _number(row["log_loss"]),
                _number(row["brier"]),
                *[_percent(challenged.get(n, math.nan)) for n in names],
                f"{row['seconds']:.2f}",
            ]
        )
    if markdown:
        lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
        lines += ["| " + " | ".join(cells) + " |" for cells in body]
        return "\n".join([*lines, "", legend])
    widths = [max(len(r[i]) for r in [header, *body]) for i in range(len(header))]
    table = [
        "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip()
        for r in [header, *body]
    ]
    return "\n".join([*table, legend])


def cmd_evaluate(args: argparse.Namespace) -> int:
    """Replay each file with each algorithm, predicting before every match; print metrics."""
    from app.evaluation.metrics import json_safe
    from app.evaluation.runner import evaluate_file

    names = [n.strip() for n in args.algorithms.split(",") if n.strip()]
    unknown = [n for n in names if n not in NAMES]
    if not names or unknown:
        return _fail(f"unknown algorithms {unknown}: choose from {', '.join(NAMES)}")
    try:
        params = _parse_params(args.params)
    except ValueError as exc:
        return _fail(str(exc))
    if args.plots and (status := _not_installed("--plots", "matplotlib")) is not None:
        return status
    rows: list[dict[str, Any]] = []
    notes: list[str] = []
    for path in args.files:
        try:
            match_file = read_matches(path)
            with Bars(unit=" matches", shown=wanted(args.progress)) as bars:
                evaluation = evaluate_file(
                    match_file,
                    names,
                    params,
                    on_progress=bars,
                    track=6 if args.plots else 0,
                    tie_weight=1.0 if args.prediction_ties == "wrong" else 0.5,
                )
        except DataError as exc:
            return _fail(str(exc))
        except RatingInputError as exc:
            return _fail(f"{path}: {exc}")
        rows.extend(evaluation.results)
        notes.append(
            f"{path}: {len(match_file.matches)} matches, {len(match_file.players)} players, "
            f"empirical draw probability {evaluation.draw_probability:.4f}, "
            f"{match_file.skipped} skipped (a player twice in one match)"
        )
        if args.plots:
            from app.evaluation.plots import write_plots

            try:
                written = write_plots(evaluation, args.plots)
            except (RuntimeError, OSError) as exc:
                return _fail(str(exc))
            notes.extend(f"wrote {path}" for path in written)
    if args.format == "json":
        print(json.dumps({"results": json_safe(rows)}, indent=2))
    else:
        print(_table(rows, markdown=args.format == "markdown"))
        for note in notes:
            print(note, file=sys.stderr)
    return 0


def _fit_misuse(args: argparse.Namespace) -> str | None:
    """What is wrong with the options of ``fit`` taken together, if anything."""
    if (args.file is None) == (args.ladder is None):
        return "fit: give a match FILE or --ladder ID (one of them)"
    if args.apply and args.ladder is None:
        return "fit: --apply changes a ladder: it needs --ladder ID"
    if args.jobs is not None and args.jobs < 1:
        return f"fit: --jobs must be at least 1, got {args.jobs}"
    return None


def cmd_fit(args: argparse.Namespace) -> int:
    """Fit an algorithm's parameters on the earlier part of a file (or a ladder's matches);
    compare on the rest. ``--algorithm auto`` fits every candidate and chooses."""
    if (status := _not_installed("fit", "scipy")) is not None:
        return status
    if (misuse := _fit_misuse(args)) is not None:
        return _fail(misuse)
    if args.ladder is not None:
        from app.cli.fitting import cmd_fit_ladder

        return cmd_fit_ladder(args)
    if args.algorithm is None:
        return _fail("fit: --algorithm is needed with a FILE (a name, or auto)")
    if args.algorithm == AUTO:
        return _fit_auto(args)
    from app.evaluation.fit import fit

    if args.algorithm not in NAMES:
        return _fail(
            f"unknown algorithm {args.algorithm!r}: choose from {', '.join(NAMES)} or {AUTO}"
        )
    reporter = evaluation_reporter(wanted(args.progress))

    def report(count: int, values: dict[str, float], loss: float) -> None:
        if reporter is not None:
            reporter("", count, values, loss)

    started = time.perf_counter()
    try:
        match_file = read_matches(args.file)
        result = fit(
            match_file,
            args.algorithm,
            train_fraction=args.train_fraction,
            max_evaluations=args.max_evaluations,
            on_evaluation=report,
        )
    except DataError as exc:
        return _fail(str(exc))
    except (RatingInputError, ValueError) as exc:
        return _fail(f"{args.file}: {exc}")
    _show_fit(args, result, time.perf_counter() - started)
    return 0


def _show_fit(args: argparse.Namespace, result: FitResult, seconds: float) -> None:
    """A file's fit: its JSON, or the table of the later part and the ladder params."""
    from app.evaluation.metrics import json_safe

    ladder = {"algorithm": result.algorithm, "params": result.params}
    if args.format == "json":
        out = {
            "file": args.file,
            "name": result.name,
            "algorithm": result.algorithm,
            "params": result.params,
            "default_params": result.default_params,
            "train_matches": result.train_matches,
            "test_matches": result.test_matches,
            "train_log_loss_default": result.train_loss_default,
            "train_log_loss": result.train_loss,
            "evaluations": result.evaluations,
            "widenings": result.widenings,
            "on_bound": [b.as_dict() for b in result.on_bound],
            "test": result.test,
            "seconds": seconds,
        }
        print(json.dumps(json_safe(out), indent=2))
        return
    d, f = result.test["default"], result.test["fitted"]
    print(
        f"{args.file}: {result.name} fitted on the first {result.train_matches} matches "
        f"({result.evaluations} replays, {seconds:.1f} s)"
    )
    print(
        f"  train pair log loss: default {result.train_loss_default:.5f}, "
        f"fitted {result.train_loss:.5f}"
    )
    print(f"  on the later {result.test_matches} matches:")
    print(f"    {'':8} {'error':>8} {'log loss':>9} {'pair ll':>8} {'brier':>7}")
    for label, row in (("default", d), ("fitted", f)):
        print(
            f"    {label:8} {_percent(row['prediction_error']):>8} "
            f"{_number(row['log_loss']):>9} {_number(row['pair_log_loss']):>8} "
            f"{_number(row['brier']):>7}"
        )
    for b in result.on_bound:
        edge = "its documented limit" if b.limit else "the widest searched range"
        print(f"  {b.parameter} ended on its {b.side} bound {b.bound:.6g} ({edge})")
    print("ladder params:")
    print(json.dumps(ladder))


def _candidates(text: str | None) -> list[str]:
    """``--candidates``: comma-separated names (default: every ladder algorithm)."""
    if text is None:
        return list(ALGORITHMS)
    names = [n.strip() for n in text.split(",") if n.strip()]
    unknown = [n for n in names if n not in NAMES]
    if not names or unknown:
        raise ValueError(f"--candidates: unknown {unknown}: choose from {', '.join(NAMES)}")
    return names


def _fit_auto(args: argparse.Namespace) -> int:
    """``fit FILE --algorithm auto``: fit every candidate, choose the lowest training loss."""
    from app.evaluation.auto import fit_auto
    from app.evaluation.metrics import json_safe

    try:
        names = _candidates(args.candidates)
    except ValueError as exc:
        return _fail(str(exc))
    started = time.perf_counter()
    try:
        match_file = read_matches(args.file)
        found = fit_auto(
            match_file,
            names,
            train_fraction=args.train_fraction,
            max_evaluations=args.max_evaluations,
            short=args.screening,
            shortlist=args.shortlist,
            jobs=args.jobs or os.cpu_count() or 1,
            on_evaluation=evaluation_reporter(wanted(args.progress)),
        )
    except DataError as exc:
        return _fail(str(exc))
    except (RatingInputError, ValueError) as exc:
        return _fail(f"{args.file}: {exc}")
    seconds = time.perf_counter() - started
    result = found.result
    if args.format == "json":
        out = {
            "file": args.file,
            "algorithm": AUTO,
            "chosen": found.chosen,
            "ladder_algorithm": result.algorithm,
            "params": result.params,
            "train_matches": found.train_matches,
            "test_matches": found.test_matches,
            "train_log_loss": result.train_loss,
            "best_default": found.best_start,
            "candidates": [c.as_dict() for c in found.candidates],
            "on_bound": [b.as_dict() for b in result.on_bound],
            "test": found.test,
            "seconds": seconds,
        }
        print(json.dumps(json_safe(out), indent=2))
        return 0
    print_auto(args.file, found, seconds)
    print("ladder params:")
    print(json.dumps({"algorithm": result.algorithm, "params": result.params}))
    return 0


def print_auto(source: str, found: AutoResult, seconds: float, *, start: str = "default") -> None:
    """The text report of ``fit_auto``: every candidate, the choice, the later part."""
    replays = sum(c.replays for c in found.candidates)
    full = sum(c.stage == "full" for c in found.candidates)
    print(
        f"{source}: {len(found.candidates)} candidates fitted on the first "
        f"{found.train_matches} matches, {full} of them fully ({replays} replays, "
        f"{seconds:.1f} s)"
    )
    wide = max(len("candidate"), *(len(c.name) for c in found.candidates))
    print(f"  {'candidate':{wide}} {'stage':7} {'train pair ll':>13} {'fitted':>9}  parameters")
    for c in found.candidates:
        shown = ", ".join(
            f"{k}={c.params[k]:.4g}" for k in c.params if c.params[k] != c.start_params.get(k)
        )
        print(
            f"  {c.name:{wide}} {c.stage:7} {_number(c.train_loss_start, 5):>13} "
            f"{_number(c.train_loss, 5):>9}  {shown or '(' + start + 's)'}"
        )
    print(f"  chosen: {found.chosen} (the lowest training loss)")
    print(f"  on the later {found.test_matches} matches:")
    rows = [
        (f"{row['name']} {label.replace('_', ' ')}", row)
        for label, row in found.test.items()
        if not (label == "best_default" and row["name"] == found.chosen)  # shown above
    ]
    named = max(len(name) for name, _ in rows)
    print(f"    {'':{named}} {'error':>8} {'log loss':>9} {'pair ll':>8} {'brier':>7}")
    for name, row in rows:
        print(
            f"    {name:{named}} {_percent(row['prediction_error']):>8} "
            f"{_number(row['log_loss']):>9} {_number(row['pair_log_loss']):>8} "
            f"{_number(row['brier']):>7}"
        )
    fitted = found.test["fitted"]["prediction_error"]
    better = [name for name, row in rows if row["prediction_error"] < fitted]
    if better:
        print(
            f"  {', '.join(better)} erred less on the later part, but the choice is made on "
            "the earlier part alone (the training loss), as it would be before the later "
            "matches were played: choosing by the later part would make its figures "
            "flatter the choice."
        )
    for b in found.result.on_bound:
        edge = "its documented limit" if b.limit else "the widest searched range"
        print(f"  {b.parameter} ended on its {b.side} bound {b.bound:.6g} ({edge})")


def add_parsers(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Register ``evaluate`` and ``fit`` on the ``ratings`` command's subparsers."""
    evaluate = subparsers.add_parser(
        "evaluate",
        help="replay match files, predicting before every match; report prediction error",
        description="Replay JSON Lines match files (plain or .gz) in time order with each "
        "algorithm, predicting every match before rating it (the TrueSkill paper's "
        "section 4.1).",
    )
    evaluate.add_argument("files", nargs="+", metavar="FILE")
    evaluate.add_argument(
        "--algorithms",
        default=",".join(DEFAULT_ALGORITHMS),
        help=f"comma-separated, from {', '.join(NAMES)} (default: %(default)s)",
    )
    evaluate.add_argument(
        "--params", help='JSON object of per-algorithm parameters, e.g. {"trueskill": {"beta": 4}}'
    )
    evaluate.add_argument("--format", choices=("table", "json", "markdown"), default="table")
    evaluate.add_argument("--plots", metavar="DIR", help="write PNG figures there (matplotlib)")
    evaluate.add_argument(
        "--prediction-ties",
        choices=("half", "wrong"),
        default="half",
        help="how a pair predicted exactly even counts in the prediction error "
        "(default: half; the paper's published numbers match 'wrong')",
    )
    evaluate.add_argument("--progress", action="store_true", help="progress bars on stderr")
    evaluate.set_defaults(func=cmd_evaluate, handler=cmd_evaluate)

    fit = subparsers.add_parser(
        "fit",
        help="fit an algorithm's parameters on the earlier part of a match file",
        description="Choose parameters minimising log loss on the earlier part of FILE, "
        "report the later part against the defaults, print the ladder params.",
    )
    fit.add_argument("file", metavar="FILE", nargs="?", help="a match file (or --ladder)")
    fit.add_argument(
        "--ladder",
        metavar="ID",
        help="fit on this ladder's own matches (the database of --database-url)",
    )
    fit.add_argument(
        "--algorithm",
        help=f"one of {', '.join(NAMES)}, or {AUTO} (every ladder algorithm, the lowest "
        "training loss chosen); with --ladder the default is the ladder's own",
    )
    fit.add_argument("--train-fraction", type=float, default=0.5)
    fit.add_argument(
        "--max-evaluations", type=int, default=40, help="most replays of the training part"
    )
    fit.add_argument(
        "--apply",
        action="store_true",
        help="with --ladder: change the ladder's parameters to the fitted ones and rebuild it",
    )
    fit.add_argument(
        "--jobs",
        type=int,
        help="auto: candidates fitted at once, each in a process (default: the CPU count)",
    )
    fit.add_argument(
        "--candidates",
        metavar="A,B,...",
        help="auto: the names to choose from (default: every ladder algorithm)",
    )
    fit.add_argument(
        "--screening",
        type=int,
        default=SHORT,
        help="auto: replays of each candidate before the shortlist (default: %(default)s)",
    )
    fit.add_argument(
        "--shortlist",
        type=int,
        default=SHORTLIST,
        help="auto: candidates fitted fully after the screening (default: %(default)s)",
    )
    fit.add_argument("--format", choices=("text", "json"), default="text")
    fit.add_argument("--progress", action="store_true", help="each replay's loss on stderr")
    fit.set_defaults(func=cmd_fit, handler=cmd_fit)


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``evaluate`` or ``fit`` standalone: ``python -m app.cli.evaluate evaluate ...``."""
    parser = argparse.ArgumentParser(prog="ratings")
    add_parsers(parser.add_subparsers(dest="command", required=True, metavar="COMMAND"))
    args = parser.parse_args(argv)
    status: int = args.handler(args)
    return status


if __name__ == "__main__":
    sys.exit(main())
