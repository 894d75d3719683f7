"""``ratings fit --ladder ID``: fit a ladder's parameters (or choose its algorithm) on its own
matches, and with ``--apply`` change them and rebuild the ladder, as
``POST /v1/ladders/{ladder}/fit`` does in a job (``app.services.fitting``)."""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from datetime import UTC, datetime
from functools import partial
from typing import Any

from pydantic import ValidationError
from sqlalchemy.orm import Session

from app.cli.base import report_errors, transaction
from app.cli.progress import evaluation_reporter, wanted
from app.domain.documents.fitting import FitMeasures, FitOutcome, FitRequest
from app.errors import InvalidInput, validation_detail
from app.evaluation.data import MatchFile
from app.services import fitting, ladders


def cmd_fit_ladder(args: argparse.Namespace) -> int:
    """Fit on the ladder's matches; print what was found (and applied)."""
    return report_errors(partial(_fit_ladder, args))


def _request(args: argparse.Namespace) -> FitRequest:
    """The body ``POST /v1/ladders/{ladder}/fit`` would take, checked by its own schema."""
    body: dict[str, Any] = {
        "algorithm": args.algorithm,
        "train_fraction": args.train_fraction,
        "apply": args.apply,
        "max_evaluations": args.max_evaluations,
    }
    try:
        return FitRequest.model_validate(body)
    except ValidationError as exc:
        raise InvalidInput(validation_detail(exc.errors(include_input=False))) from None


def _fit_ladder(args: argparse.Namespace) -> int:
    body = _request(args)

    def read(session: Session) -> tuple[str, dict[str, Any], MatchFile]:
        ladder = ladders.get_ladder(session=session, ladder_id=args.ladder, detached=True)
        return (
            ladder.algorithm,
            dict(ladder.params),
            fitting.ladder_matches(session=session, ladder=ladder),
        )

    started = time.perf_counter()
    algorithm, params, match_file = transaction(read, read_only=True)
    fitting.check_request(algorithm=algorithm, body=body, matches=len(match_file.matches))
    outcome = fitting.fit_ladder(
        ladder_id=args.ladder,
        algorithm=algorithm,
        params=params,
        match_file=match_file,
        body=body,
        jobs=args.jobs or os.cpu_count() or 1,
        on_evaluation=evaluation_reporter(wanted(args.progress)),
    )
    seconds = time.perf_counter() - started
    if body.apply:
        now = datetime.now(UTC)
        outcome = transaction(
            lambda session: fitting.apply_fit(session=session, outcome=outcome, now=now)
        )
    if args.format == "json":
        print(json.dumps({**outcome.model_dump(mode="json"), "seconds": seconds}, indent=2))
        return 0
    _print(outcome, algorithm, seconds)
    return 0


def _percent(x: float | None) -> str:
    return "-" if x is None else f"{100.0 * x:.2f}%"


def _number(x: float | None, digits: int = 4) -> str:
    return "-" if x is None or not math.isfinite(x) else f"{x:.{digits}f}"


def _print(outcome: FitOutcome, own: str, seconds: float) -> None:
    replays = sum(c.replays for c in outcome.candidates)
    what: str = outcome.algorithm
    if len(outcome.candidates) > 1:
        what = f"{len(outcome.candidates)} algorithms, {outcome.algorithm} chosen,"
    print(
        f"ladder {outcome.ladder}: {what} fitted on the first {outcome.train_matches} of its "
        f"{outcome.matches} matches ({replays} replays, {seconds:.1f} s)"
    )
    if len(outcome.candidates) > 1:
        print(f"  {'candidate':26} {'stage':5} {'train pair ll':>13} {'fitted':>8}")
        for c in outcome.candidates:
            print(
                f"  {c.algorithm:26} {c.stage:5} {_number(c.train_log_loss_start, 5):>13} "
                f"{_number(c.train_log_loss, 5):>8}"
            )
    start = "current" if outcome.algorithm == own else "default"
    print(
        f"  train pair log loss: {start} {_number(outcome.train_log_loss_start, 5)}, "
        f"fitted {_number(outcome.train_log_loss, 5)}"
    )
    print(f"  on the later {outcome.test_matches} matches:")
    print(f"    {'':30} {'error':>8} {'log loss':>9} {'pair ll':>8} {'brier':>7}")
    labels = {
        "current": f"{own} current",
        "fitted": f"{outcome.algorithm} fitted",
        "best_default": "best default",
    }
    for label, row in outcome.later.items():
        _print_row(labels[label], row)
    for b in outcome.on_bound:
        edge = "its documented limit" if b.limit else "the widest searched range"
        print(f"  {b.parameter} ended on its {b.side} bound {b.bound:.6g} ({edge})")
    print("ladder params:")
    print(json.dumps({"algorithm": outcome.algorithm, "params": outcome.params}))
    if outcome.update is not None and outcome.update.rebuild is not None:
        rebuild = outcome.update.rebuild
        print(
            f"applied: ladder {rebuild.ladder} has the fitted parameters, "
            f"{rebuild.matches_rerated:,} matches replayed, {rebuild.players:,} players rated",
            file=sys.stderr,
        )


def _print_row(label: str, row: FitMeasures) -> None:
    print(
        f"    {label:30} {_percent(row.prediction_error):>8} {_number(row.log_loss):>9} "
        f"{_number(row.pair_log_loss):>8} {_number(row.brier):>7}"
    )
