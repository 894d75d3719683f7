"""Fitting a ladder on its own matches: its algorithm's parameters, or the algorithm that
predicts them best (``auto``); applying the fitted parameters with a rebuild.

The matches are those a rebuild replays: the ladder's counted ones (voided ones left out),
in the order the ladder rates them (``seq``), each made into the evaluation's ``Match``
from its stored request (ranks, or scores negated, or the listed order; partial-play
weights; the scores; the advantage shares when the request has them). The fit then runs
exactly as ``ratings fit`` runs on a file in that order (``app.evaluation.auto``): every
player from the prior, no time away (``tau_per_day``, ``deviation_per_day``) and no seeds
(``PUT .../players/{id}``) on the way, which the ladder itself applies. The ladder's own
algorithm is searched from its current parameters and the later part compares with them
("current"); another algorithm starts from its defaults.

Applying changes the fitted parameters (the others keep their values) and rebuilds the
ladder through the PATCH-with-rebuild path (``rerate.update_ladder``), in the caller's one
transaction. Only the ladder's own algorithm can be applied: a ladder keeps its algorithm
(its ratings are in that algorithm's units).

Fitting needs scipy (the optional ``eval`` extra); without it a fit is refused with 501.
"""

from __future__ import annotations

import importlib.util
import math
import os
import threading
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Any

from sqlalchemy.orm import Session

from app.domain.documents.fitting import (
    FitCandidate,
    FitMeasures,
    FitOnBound,
    FitOutcome,
    FitRequest,
)
from app.domain.documents.ladders import LadderUpdate
from app.domain.ladders import full_params
from app.domain.outcomes import outcome_of
from app.domain.times import utc
from app.errors import InvalidInput, NotInstalled
from app.evaluation.data import Match, MatchFile, player_scores_of
from app.rating.registry import ALGORITHMS, parameters
from app.services import ladders, rerate
from app.services.rerate import Progress, Rerating
from app.storage.models import Ladder
from app.storage.repositories import ladders as ladder_repo
from app.storage.repositories import rerating as rerating_repo
from app.storage.repositories.rerating import MatchRow
from app.storage.unit_of_work import Transact

if TYPE_CHECKING:
    from app.evaluation.auto import AutoResult

#: Matches read from the database per query.
PAGE = 10_000
#: Fits run one at a time in a server process, each on every core (a second one waits).
_one_fit_at_a_time = threading.Semaphore(1)
_SECONDS_PER_DAY = 86400.0

#: What applying a fit takes: the session and the time, in the job's one transaction.
Apply = Callable[[Session, datetime], FitOutcome]


def needs_scipy() -> None:
    """Refuse a fit (501) when scipy, which the parameter search uses, is not installed."""
    # Looked for, not imported: the server process never loads it (its worker processes do).
    if importlib.util.find_spec("scipy") is None:
        raise NotInstalled(
            "fit: fitting needs scipy, which is not installed on this server "
            "(pip install 'ratings[eval]')"
        )


# -- the ladder's matches --------------------------------------------------------------------


def ladder_matches(*, session: Session, ladder: Ladder) -> MatchFile:
    """The matches a rebuild of ``ladder`` replays, in its order, as a match file."""
    index: dict[str, int] = {}
    players: list[str] = []
    matches: list[Match] = []
    after = 0
    while True:
        rows = rerating_repo.matches_page(
            session=session, ladder_id=ladder.id, after_seq=after, limit=PAGE
        )
        matches.extend(_match(row, index, players) for row in rows)
        if len(rows) < PAGE:
            return MatchFile(f"ladder {ladder.id}", matches, players)
        after = rows[-1].seq


def _match(row: MatchRow, index: dict[str, int], players: list[str]) -> Match:
    request = row.request
    teams: list[list[str]] = request["teams"]
    idx = []
    for team in teams:
        members = []
        for player in team:
            i = index.get(player)
            if i is None:
                i = index[player] = len(players)
                players.append(player)
            members.append(i)
        idx.append(tuple(members))
    scores = request.get("scores")
    weights = request.get("weights")
    if weights is not None and all(w == 1.0 for team in weights for w in team):
        weights = None
    advantage = request.get("advantage")
    if advantage is not None and not any(advantage):
        advantage = None
    return Match(
        line=row.seq,
        match_id=row.match_id,
        day=utc(row.played_at).timestamp() / _SECONDS_PER_DAY,
        teams=tuple(idx),
        ranks=tuple(float(r) for r in outcome_of(request.get("ranks"), scores, len(teams))),
        weights=None if weights is None else tuple(tuple(map(float, w)) for w in weights),
        scores=None if scores is None else tuple(float(s) for s in scores),
        advantage=None if advantage is None else tuple(float(a) for a in advantage),
        player_scores=player_scores_of(request.get("player_scores")),
    )


# -- asking for a fit ------------------------------------------------------------------------


def model_params(algorithm: str, params: Mapping[str, Any]) -> dict[str, Any]:
    """A ladder's parameters of the model itself (without ``tau_per_day`` and
    ``conservative_k``, which the ladder adds and the fit keeps)."""
    names = {spec.name for spec in parameters(algorithm)}
    return {k: v for k, v in params.items() if k in names}


def check_request(*, algorithm: str, body: FitRequest, matches: int) -> None:
    """Refuse at once what cannot be fitted on a ladder of ``algorithm`` with ``matches``
    matches, or applied (422), or fitting at all (501)."""
    needs_scipy()
    fitted = body.algorithm or algorithm
    if body.apply and fitted != algorithm:
        raise InvalidInput(
            f"apply: only the ladder's own algorithm ({algorithm}) can be applied, "
            f"not {fitted!r}: a ladder keeps its algorithm (its ratings are in its units); "
            "fit without apply to compare, and make a new ladder to change algorithm"
        )
    split = int(matches * body.train_fraction)
    if split < 1 or split >= matches:
        raise InvalidInput(
            f"train_fraction: the ladder's {matches} matches cannot be split at "
            f"{body.train_fraction} into a training part and a later part, both not empty"
        )


def plan_fit(*, session: Session, ladder: Ladder, body: FitRequest) -> Rerating:
    """The fit as a job (checked now: a bad request is answered at once)."""
    count = ladder_repo.count_matches(session=session, ladder_ids=[ladder.id]).get(ladder.id, 0)
    check_request(algorithm=ladder.algorithm, body=body, matches=count)
    return Rerating(
        kind="fit", ladder_id=ladder.id, request=body.model_dump(mode="json"), size=count
    )


# -- fitting ---------------------------------------------------------------------------------


def fit_ladder(
    *,
    ladder_id: str,
    algorithm: str,
    params: Mapping[str, Any],
    match_file: MatchFile,
    body: FitRequest,
    jobs: int = 1,
    processes: bool | None = None,
    on_evaluation: Callable[[str, int, dict[str, float], float], None] | None = None,
) -> FitOutcome:
    """Fit on ``match_file`` (the matches of a ladder of ``algorithm`` with ``params``) as
    ``body`` asks; nothing is applied. ``jobs`` and ``processes``: see ``fit_auto``."""
    needs_scipy()
    from app.evaluation.auto import fit_auto

    own = model_params(algorithm, params)
    names = list(ALGORITHMS) if body.algorithm == "auto" else [body.algorithm or algorithm]
    try:
        found = fit_auto(
            match_file,
            names,
            train_fraction=body.train_fraction,
            max_evaluations=body.max_evaluations,
            params={algorithm: own},
            compare_with={"current": (algorithm, own)},
            jobs=jobs,
            processes=processes,
            on_evaluation=on_evaluation,
        )
    except ValueError as exc:  # a split that leaves a part empty (the ladder changed)
        raise InvalidInput(f"train_fraction: {exc}") from None
    return _outcome(ladder_id, algorithm, params, match_file, body, found)


def _outcome(
    ladder_id: str,
    algorithm: str,
    params: Mapping[str, Any],
    match_file: MatchFile,
    body: FitRequest,
    found: AutoResult,
) -> FitOutcome:
    """What the fit found, as the job reports it (nothing applied yet)."""
    chosen = found.chosen
    result = found.result
    fitted = {k: float(result.params[k]) for k in found.fitted}
    if chosen == algorithm:
        ladder_params = full_params(chosen, {**params, **fitted})
    else:
        ladder_params = full_params(chosen, result.params)
    later = {
        label: _measures(found.test[label])
        for label in ("current", "fitted", "best_default")
        if label != "best_default" or body.algorithm == "auto"
    }
    current, after = later["current"], later["fitted"]
    return FitOutcome(
        ladder=ladder_id,
        algorithm=chosen,
        params=ladder_params,
        fitted=fitted,
        matches=len(match_file.matches),
        train_matches=found.train_matches,
        test_matches=found.test_matches,
        train_log_loss_start=_finite(result.train_loss_default),
        train_log_loss=_finite(result.train_loss),
        later=later,
        gain={
            "prediction_error": _difference(current.prediction_error, after.prediction_error),
            "log_loss": _difference(current.log_loss, after.log_loss),
        },
        candidates=[
            FitCandidate(
                algorithm=c.name,
                params=c.params,
                train_log_loss_start=_finite(c.train_loss_start),
                train_log_loss=_finite(c.train_loss),
                stage=c.stage,
                replays=c.replays,
            )
            for c in found.candidates
        ],
        on_bound=[FitOnBound.model_validate(b.as_dict()) for b in result.on_bound],
        applied=False,
        update=None,
    )


def _finite(x: float | None) -> float | None:
    return x if x is not None and math.isfinite(x) else None


def _difference(a: float | None, b: float | None) -> float | None:
    return a - b if a is not None and b is not None else None


def _measures(row: Mapping[str, Any]) -> FitMeasures:
    return FitMeasures(
        prediction_error=_finite(row["prediction_error"]),
        log_loss=_finite(row["log_loss"]),
        pair_log_loss=_finite(row.get("pair_log_loss")),
        brier=_finite(row["brier"]),
    )


# -- applying --------------------------------------------------------------------------------


def apply_fit(*, session: Session, outcome: FitOutcome, now: datetime) -> FitOutcome:
    """Change the ladder's fitted parameters and rebuild it, in this transaction."""
    ladder = ladders.get_ladder(session=session, ladder_id=outcome.ladder)
    if outcome.algorithm != ladder.algorithm:
        raise InvalidInput(
            f"apply: the fit is of {outcome.algorithm}, the ladder's algorithm is "
            f"{ladder.algorithm}; a ladder keeps its algorithm"
        )
    update = rerate.update_ladder(
        session=session,
        ladder=ladder,
        body=LadderUpdate.model_validate({"params": outcome.fitted}),
        rebuild_now=True,
        now=now,
        patient=True,  # a job's or the command line's: it waits its turn
    )
    return outcome.model_copy(
        update={"applied": True, "update": update, "params": dict(update.ladder.params)}
    )


# -- as a job --------------------------------------------------------------------------------


def fit_job(
    *, ladder_id: str, request: Mapping[str, Any], progress: Progress, transact: Transact
) -> Apply:
    """Run the fit a job asked for (outside any transaction: it reads the ladder's matches
    in one of its own, then fits in worker processes, one fit of this process at a time)
    and return what the job's transaction does with it: apply it, or only report it.
    ``progress`` is told the replays of the training part run, of at most how many."""
    from app.evaluation.auto import most_replays

    body = FitRequest.model_validate(request)

    def read(session: Session) -> tuple[str, dict[str, Any], MatchFile]:
        ladder = ladders.get_ladder(session=session, ladder_id=ladder_id, detached=True)
        return ladder.algorithm, dict(ladder.params), ladder_matches(session=session, ladder=ladder)

    algorithm, params, match_file = transact(read, read_only=True)
    check_request(algorithm=algorithm, body=body, matches=len(match_file.matches))
    candidates = len(ALGORITHMS) if body.algorithm == "auto" else 1
    total = most_replays(candidates, body.max_evaluations)
    done: dict[str, int] = {}

    def told(name: str, count: int, values: dict[str, float], loss: float) -> None:
        done[name] = count
        progress(sum(done.values()), total)

    with _one_fit_at_a_time:
        progress(0, total)
        outcome = fit_ladder(
            ladder_id=ladder_id,
            algorithm=algorithm,
            params=params,
            match_file=match_file,
            body=body,
            jobs=os.cpu_count() or 1,
            processes=True,
            on_evaluation=told,
        )

    def finish(session: Session, now: datetime) -> FitOutcome:
        if body.apply:
            return apply_fit(session=session, outcome=outcome, now=now)
        return outcome

    return finish
