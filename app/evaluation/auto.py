"""Choosing the algorithm as well as its parameters: fit every candidate, keep the one with
the lowest training loss.

The loss is ``fit``'s (the pair log loss on the training part, ``app.evaluation.loss``);
the later part is never looked at to choose. A full search of every candidate costs
``max_evaluations`` replays each, so the search has two stages:

1. **Screening.** Every candidate's fit starts exactly as ``fit`` fits it (``ratings fit
   --algorithm NAME``: the same search from the same start with ``max_evaluations``) and
   is stopped after ``short`` replays of the training part: the start, then the first
   steps of the line searches along each parameter. The candidates are ranked by the best
   loss found so far.
2. **Full fits.** The fits of the ``shortlist`` best of them go on to the end, so the
   chosen candidate's parameters are those ``fit`` gives it. The search is deterministic,
   so it takes again the very steps of the screening, whose losses are passed on rather
   than replayed: the screening costs the shortlisted candidates nothing.

The choice is the candidate with the lowest training loss after both stages. With no more
candidates than ``shortlist`` there is no screening: every candidate is fitted fully.
Then the later part is replayed for the choice at its fitted parameters ("fitted") and at
its start ("default"), and for the candidate whose start had the lowest training loss
("best_default"); ``compare_with`` adds others (a ladder's own algorithm at its current
parameters, "current").

The candidates run side by side in ``jobs`` worker processes (spawned: safe from a
threaded server), each holding one copy of the matches, so memory grows with ``jobs``
times the file; ``jobs`` = 1 runs everything in this process. A worker process whose
parent is killed ends at once on Linux (the kernel's parent-death signal), elsewhere
before its next replay.
"""

from __future__ import annotations

import ctypes
import math
import multiprocessing
import os
import pickle
import signal
import sys
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import FIRST_COMPLETED, Executor, Future, ProcessPoolExecutor, wait
from dataclasses import dataclass, field
from typing import Any

from app.evaluation.data import Match, MatchFile
from app.evaluation.fit import (
    FitResult,
    OnBound,
    Problem,
    Search,
    fit_result,
    objective,
    problem,
    search,
)
from app.evaluation.loss import PairLoss
from app.evaluation.metrics import predict, summarize
from app.evaluation.presets import build

#: Replays of each candidate in the screening stage.
SHORT = 8
#: Candidates fitted fully after the screening.
SHORTLIST = 3

#: What is told after each replay: (candidate, its replays so far, the values, the loss).
OnEvaluation = Callable[[str, int, dict[str, float], float], None]


@dataclass(slots=True)
class Candidate:
    """One candidate's search: its loss at the start and at the best point found."""

    name: str
    algorithm: str
    #: The full parameters at the best point found.
    params: dict[str, float | str]
    start_params: dict[str, float | str]
    train_loss_start: float
    train_loss: float
    #: "full" when fitted as ``fit`` does, "short" when only screened.
    stage: str
    #: The search's evaluations (``fit``'s count for a full fit).
    evaluations: int
    #: Replays of the training part run for this candidate, both stages together.
    replays: int
    widenings: int = 0
    on_bound: list[OnBound] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {
            "algorithm": self.name,
            "params": self.params,
            "start_params": self.start_params,
            "train_log_loss_start": self.train_loss_start,
            "train_log_loss": self.train_loss,
            "stage": self.stage,
            "evaluations": self.evaluations,
            "replays": self.replays,
            "widenings": self.widenings,
            "on_bound": [b.as_dict() for b in self.on_bound],
        }


@dataclass(slots=True)
class AutoResult:
    """What ``fit_auto`` found: every candidate, the choice, and the later part."""

    candidates: list[Candidate]
    #: The candidate with the lowest training loss.
    chosen: str
    #: The candidate whose start had the lowest training loss.
    best_start: str
    #: The chosen candidate as ``fit`` reports it (test rows "default" and "fitted").
    result: FitResult
    train_matches: int
    test_matches: int
    #: The later part's measures: "fitted", "default", "best_default" and those asked for
    #: with ``compare_with`` -> a result row of ``summarize`` (with "name" added).
    test: dict[str, dict[str, Any]]
    #: The names of the chosen candidate's fitted parameters.
    fitted: list[str] = field(default_factory=list)

    def candidate(self, name: str) -> Candidate:
        return next(c for c in self.candidates if c.name == name)


# -- the work, in a worker process or in this one -----------------------------------------------


@dataclass(slots=True)
class _Worker:
    """What a worker holds: the matches, the training loss of one split, and where each
    replay is told."""

    match_file: MatchFile
    tell: Callable[[tuple[str, int, dict[str, float], float]], None] | None
    losses: dict[int, PairLoss] = field(default_factory=dict)
    #: The process that started this worker process (None: this is that process).
    parent: int | None = None

    def check_parent(self) -> None:
        """End a worker process whose parent is gone (killed): nobody waits for it."""
        if self.parent is not None and os.getppid() != self.parent:
            os._exit(1)

    def loss(self, split: int) -> PairLoss:
        if split not in self.losses:
            self.losses.clear()
            self.losses[split] = PairLoss(
                self.match_file.matches[:split], len(self.match_file.players)
            )
        return self.losses[split]


_worker: _Worker | None = None


def _encode(match_file: MatchFile) -> bytes:
    """The matches as plain tuples (pickled several times faster than the dataclasses)."""
    rows = [
        (m.line, m.match_id, m.day, m.teams, m.ranks, m.weights, m.scores, m.advantage)
        for m in match_file.matches
    ]
    return pickle.dumps((match_file.path, rows, match_file.players), protocol=5)


#: ``prctl``'s option that sets the signal a process gets when its parent dies (Linux).
_PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    """Have the kernel kill this worker process when the process that started it dies
    (Linux): deep in a long replay of a large file, the worker would otherwise notice only
    at its next one (:meth:`_Worker.check_parent`), minutes later on a busy machine."""
    if not sys.platform.startswith("linux"):
        return
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
    except (OSError, AttributeError):  # no libc prctl: the check before each replay stays
        return


def _start_worker(payload: bytes, told: Any) -> None:
    global _worker
    _die_with_parent()
    path, rows, players = pickle.loads(payload)
    matches = [Match(*row) for row in rows]
    _worker = _Worker(
        MatchFile(path, matches, players),
        told.put if told is not None else None,
        parent=os.getppid(),
    )


@dataclass(frozen=True, slots=True)
class _Task:
    name: str
    train_fraction: float
    params: dict[str, Any] | None
    budget: int
    #: Losses already known, by the search's key of the values.
    known: dict[tuple[float, ...], float] = field(default_factory=dict)
    #: Replays of this candidate before this task (its replays are told counting on).
    replays_before: int = 0
    #: Stop the search when it needs a replay beyond this many (the screening).
    stop_after: int | None = None


@dataclass(slots=True)
class _Searched:
    found: Search
    replays: int
    #: Every point replayed: the search's key -> loss.
    seen: dict[tuple[float, ...], float]
    #: Whether the search ran to its end (not stopped by ``stop_after``).
    complete: bool


class _Screened(Exception):
    """The screening's replays are used up: the search stops where it is."""


def _key(fitting: Problem, values: Mapping[str, float]) -> tuple[float, ...]:
    """The exact point: a replay at the very same values gives the very same loss."""
    return tuple(values[k] for k in fitting.ranges)


def _search(task: _Task, worker: _Worker | None = None) -> _Searched:
    """``fit``'s search of one candidate with ``task.budget`` evaluations (``worker``: this
    process's, else the worker process's own)."""
    worker = worker or _worker
    assert worker is not None
    fitting = problem(
        worker.match_file, task.name, train_fraction=task.train_fraction, params=task.params
    )
    tell = worker.tell
    replays = 0

    def told(count: int, values: dict[str, float], loss: float) -> None:
        nonlocal replays
        replays = count
        if tell is not None:
            tell((task.name, task.replays_before + count, values, loss))

    replay = objective(fitting, worker.loss(fitting.split), told)
    seen: dict[tuple[float, ...], float] = {}

    def at(values: dict[str, float]) -> float:
        key = _key(fitting, values)
        if key in task.known:
            loss = task.known[key]
        elif task.stop_after is not None and replays >= task.stop_after:
            raise _Screened
        else:
            worker.check_parent()
            loss = replay(values)
        seen[key] = loss
        return loss

    try:
        found = search(at, fitting.ranges, fitting.start, task.budget)
    except _Screened:
        return _Searched(_so_far(fitting, seen), replays, seen, complete=False)
    return _Searched(found, replays, seen, complete=True)


def _so_far(fitting: Problem, seen: Mapping[tuple[float, ...], float]) -> Search:
    """What a stopped search found: its best point so far (a loss that is not finite
    counting as ``search`` counts it)."""

    def finite(loss: float) -> float:
        return loss if math.isfinite(loss) else 1e6

    keys = list(fitting.ranges)
    best = min(seen, key=lambda key: finite(seen[key]))
    return Search(
        values=dict(zip(keys, best, strict=True)),
        loss=finite(seen[best]),
        first_loss=finite(seen[_key(fitting, fitting.start)]),
        evaluations=len(seen),
        widenings=0,
        ranges=dict(fitting.ranges),
    )


def _later(
    name: str,
    train_fraction: float,
    params: dict[str, Any] | None,
    label: str,
    worker: _Worker | None = None,
) -> Any:
    """The later part's measures of ``name`` at ``params`` (its start's when None)."""
    worker = worker or _worker
    assert worker is not None
    match_file = worker.match_file
    fitting = problem(match_file, name, train_fraction=train_fraction, params=params)
    run = predict(
        build(name, fitting.start_params),
        match_file.matches,
        len(match_file.players),
        algorithm=label,
        pair_loss=True,
    )
    row = summarize([run], start=fitting.split)[0]
    del row["challenged"]
    return row


# -- running the stages --------------------------------------------------------------------------


class _InProcess(Executor):
    """An executor that runs each call at once, in this process, on ``worker``."""

    def __init__(self, worker: _Worker) -> None:
        self.worker = worker

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        future: Future[Any] = Future()
        try:
            future.set_result(fn(*args, worker=self.worker, **kwargs))
        except BaseException as exc:
            future.set_exception(exc)
        return future


def _gather(
    futures: Sequence[Future[Any]], told: Any, on_evaluation: OnEvaluation | None
) -> list[Any]:
    """The results of ``futures`` in order, passing on every replay told meanwhile."""

    def drain() -> None:
        # A simple queue's put writes to its pipe before the worker returns: once a task is
        # done, everything it told can be read.
        while told is not None and not told.empty():
            message = told.get()
            if on_evaluation is not None:
                on_evaluation(*message)

    pending = set(futures)
    while pending:
        _, pending = wait(pending, timeout=0.2, return_when=FIRST_COMPLETED)
        drain()
    drain()
    return [future.result() for future in futures]


def fit_auto(
    match_file: MatchFile,
    names: Sequence[str],
    *,
    train_fraction: float = 0.5,
    max_evaluations: int = 40,
    short: int = SHORT,
    shortlist: int = SHORTLIST,
    params: Mapping[str, Mapping[str, Any]] | None = None,
    compare_with: Mapping[str, tuple[str, Mapping[str, Any] | None]] | None = None,
    jobs: int = 1,
    processes: bool | None = None,
    on_evaluation: OnEvaluation | None = None,
) -> AutoResult:
    """Fit each of ``names`` (algorithms or presets) on the earlier ``train_fraction`` of
    ``match_file`` and choose the one with the lowest training loss (see the module).

    ``params`` maps a name to the parameters its search starts from (the defaults where not
    given); ``compare_with`` maps a label to a name and its parameters (None: its defaults),
    replayed on the later part too. ``jobs``: at most this many candidates at once, in
    worker processes when more than one (``processes``: True to use a worker process even
    for one, False never).
    Raises ``ValueError`` (a bad split, budget or list) and ``RatingInputError``
    (an unknown name, a bad parameter) before any search.
    """
    names = list(dict.fromkeys(names))
    if not names:
        raise ValueError("no algorithms to choose from")
    if max_evaluations < 1 or short < 1 or shortlist < 1 or jobs < 1:
        raise ValueError("max evaluations, short, shortlist and jobs must be at least 1")
    params = dict(params or {})
    fittings = {
        name: problem(match_file, name, train_fraction=train_fraction, params=params.get(name))
        for name in names
    }
    executor, told = _executor(
        match_file, min(jobs, len(names)), processes=processes, on_evaluation=on_evaluation
    )
    try:
        candidates = _stages(
            executor,
            told,
            fittings,
            names,
            train_fraction,
            max_evaluations,
            short,
            shortlist,
            params,
            on_evaluation,
        )
        chosen = min(candidates, key=lambda c: _order(c.train_loss))
        best_start = min(candidates, key=lambda c: _order(c.train_loss_start))
        runs: dict[str, tuple[str, Mapping[str, Any] | None]] = {
            "fitted": (chosen.name, chosen.params),
            "default": (chosen.name, params.get(chosen.name)),
            "best_default": (best_start.name, params.get(best_start.name)),
            **(compare_with or {}),
        }
        test = _compare(executor, told, runs, train_fraction)
    finally:
        executor.shutdown(wait=True, cancel_futures=True)
    return _auto_result(match_file, fittings[chosen.name], candidates, chosen, best_start, test)


def _executor(
    match_file: MatchFile,
    workers: int,
    *,
    processes: bool | None,
    on_evaluation: OnEvaluation | None,
) -> tuple[Executor, Any]:
    """Where the candidates run: in this process, or in ``workers`` worker processes
    (``processes``: True even for one, False never; None: when more than one), each
    holding the match file; and the queue their evaluations are told on (None: told
    directly)."""
    if not (processes if processes is not None else workers > 1):
        told = (lambda message: on_evaluation(*message)) if on_evaluation else None
        return _InProcess(_Worker(match_file, told)), None
    context = multiprocessing.get_context("spawn")
    queue = context.SimpleQueue()
    pool = ProcessPoolExecutor(
        workers,
        mp_context=context,
        initializer=_start_worker,
        initargs=(_encode(match_file), queue),
    )
    return pool, queue


def _auto_result(
    match_file: MatchFile,
    fitting: Problem,
    candidates: list[Candidate],
    chosen: Candidate,
    best_start: Candidate,
    test: dict[str, dict[str, Any]],
) -> AutoResult:
    """What :func:`fit_auto` answers: the chosen candidate's search as a fit's result."""
    found = Search(
        values={k: float(chosen.params[k]) for k in fitting.ranges},
        loss=chosen.train_loss,
        first_loss=chosen.train_loss_start,
        evaluations=chosen.evaluations,
        widenings=chosen.widenings,
        ranges=fitting.ranges,
        on_bound=chosen.on_bound,
    )
    result = fit_result(
        match_file,
        fitting,
        found,
        chosen.evaluations,
        {"default": test["default"], "fitted": test["fitted"]},
    )
    return AutoResult(
        candidates=candidates,
        chosen=chosen.name,
        best_start=best_start.name,
        result=result,
        train_matches=fitting.split,
        test_matches=len(match_file.matches) - fitting.split,
        test=test,
        fitted=list(fitting.ranges),
    )


def _order(loss: float) -> float:
    """A loss to rank by: NaN (no decisive pair) and inf last."""
    return loss if math.isfinite(loss) else math.inf


def _stages(
    executor: Executor,
    told: Any,
    fittings: Mapping[str, Problem],
    names: list[str],
    train_fraction: float,
    max_evaluations: int,
    short: int,
    shortlist: int,
    params: Mapping[str, Mapping[str, Any]],
    on_evaluation: OnEvaluation | None,
) -> list[Candidate]:
    """Screen every candidate (when there are more than ``shortlist``), then fit the best."""

    def run(tasks: list[_Task]) -> list[_Searched]:
        futures = [executor.submit(_search, task) for task in tasks]
        return list(_gather(futures, told, on_evaluation))

    def task(name: str, stop_after: int | None = None) -> _Task:
        given = params.get(name)
        before = screened.get(name)
        return _Task(
            name,
            train_fraction,
            dict(given) if given else None,
            max_evaluations,
            before.seen if before else {},
            before.replays if before else 0,
            stop_after,
        )

    screened: dict[str, _Searched] = {}
    full_names = names
    if len(names) > shortlist and short < max_evaluations:
        for name, out in zip(names, run([task(name, short) for name in names]), strict=True):
            screened[name] = out
        ranked = sorted(names, key=lambda name: _order(screened[name].found.loss))
        full_names = [name for name in ranked[:shortlist] if not screened[name].complete]
    fitted = dict(zip(full_names, run([task(name) for name in full_names]), strict=True))
    candidates = []
    for name in names:
        fitting = fittings[name]
        first = screened.get(name)
        last = fitted.get(name, first)
        assert last is not None
        replays = (first.replays if first else 0) + (last.replays if name in fitted else 0)
        complete = name in fitted or last.complete
        found = last.found
        candidates.append(
            Candidate(
                name=name,
                algorithm=fitting.algorithm,
                params=dict(build(name, fitting.params(found.values)).params),
                start_params=dict(fitting.start_params),
                train_loss_start=found.first_loss,
                train_loss=found.loss,
                stage="full" if complete else "short",
                evaluations=found.evaluations,
                replays=replays,
                widenings=found.widenings,
                on_bound=found.on_bound,
            )
        )
    return candidates


def _compare(
    executor: Executor,
    told: Any,
    runs: Mapping[str, tuple[str, Mapping[str, Any] | None]],
    train_fraction: float,
) -> dict[str, dict[str, Any]]:
    """The later part's row of each run (label -> (name, its parameters, None for the
    defaults)); a run asked for twice is replayed once."""
    unique: dict[str, tuple[str, dict[str, Any] | None]] = {}
    for name, given in runs.values():
        unique.setdefault(_run_key(name, given), (name, dict(given) if given else None))
    futures = [
        executor.submit(_later, name, train_fraction, given, key)
        for key, (name, given) in unique.items()
    ]
    rows = dict(zip(unique, _gather(futures, told, None), strict=True))
    out = {}
    for label, (name, given) in runs.items():
        row = dict(rows[_run_key(name, given)])
        row["algorithm"] = label
        row["name"] = name
        out[label] = row
    return out


def _run_key(name: str, params: Mapping[str, Any] | None) -> str:
    return repr((name, sorted((params or {}).items())))


def most_replays(
    candidates: int, max_evaluations: int, short: int = SHORT, shortlist: int = SHORTLIST
) -> int:
    """At most how many replays of the training part ``fit_auto`` runs for ``candidates``
    (the later part's few replays not counted)."""
    if candidates > shortlist and short < max_evaluations:
        return candidates * short + shortlist * (max_evaluations - short)
    return candidates * max_evaluations
