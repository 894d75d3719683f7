"""A ladder's prediction accuracy.

Every match is stored with the win probabilities the ladder's model gave on the ratings
its update started from: they must equal an independent replay with the rating core
(``oracle.core_replay``, ``model.win_probabilities`` on the aged ratings) on every path a
match is rated by: single POSTs, batches, ``ratings import``, and the re-ratings of a void
and a rebuild. The figures of ``GET .../accuracy`` must equal an independent computation
from the stored match documents (their ``win_probabilities`` and ranks), and the running
tally must equal, to the last unit, one summed afresh from the stored matches after every
recording, void and rebuild.
"""

from __future__ import annotations

import itertools
import json
import math
import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import text

from app.cli.main import main
from app.domain.accuracy import Tally
from app.domain.accuracy import win_probabilities as stored_prediction
from app.rating.base import Rating
from app.rating.registry import make_model
from app.services import accuracy
from app.storage.engine import downgrade, get_engine, session_factory, upgrade
from tests.service.helpers import all_pages, assert_problem, create_ladder, post_match
from tests.service.oracle import core_replay, random_matches

DATA = Path(__file__).parent / "data"
FOOTBALL = DATA / "intl_football_sample.jsonl"

ALGORITHMS = [
    ("trueskill", {"tau_per_day": 0.3, "draw_probability": 0.2}),
    ("plackett_luce", {"tau_per_day": 0.1}),
    ("elo", {"k_factor": 24}),
    ("glicko2", {"deviation_per_day": 3.0}),
    ("thurstone_mosteller_full", {"tau_per_day": 0.2}),
]
SEEDS = {"elo": {"mu": 1620.0}, "glicko2": {"mu": 1620.0, "sigma": 80.0}}


# -- what the stored matches say, computed here ------------------------------------------------


def _documents(client: TestClient, ladder: str) -> list[dict[str, Any]]:
    """Every stored match of the ladder, oldest first, voided ones included."""
    return all_pages(client, f"/v1/ladders/{ladder}/matches", limit=1000)[::-1]


def _scored(documents: list[dict[str, Any]]) -> list[tuple[list[float], list[int]]]:
    """(win probabilities, dense ranks) of the matches that count and have probabilities."""
    return [
        (doc["win_probabilities"], [team["rank"] for team in doc["teams"]])
        for doc in documents
        if not doc["voided"] and doc.get("win_probabilities") is not None
    ]


def _figures(scored: list[tuple[list[float], list[int]]]) -> dict[str, Any]:
    """The accuracy figures of ``scored`` in plain floating point, by their definitions."""
    pairs = 0
    wrong = 0.0
    losses: list[float] = []
    briers: list[float] = []
    bins: list[list[float]] = [[0, 0.0, 0] for _ in range(10)]
    for p, ranks in scored:
        for a, b in itertools.combinations(range(len(p)), 2):
            if ranks[a] == ranks[b]:
                continue
            pairs += 1
            if p[a] == p[b]:
                wrong += 0.5
            elif (p[a] > p[b]) != (ranks[a] < ranks[b]):
                wrong += 1.0
        firsts = [j for j, rank in enumerate(ranks) if rank == 1]
        if len(firsts) != 1:
            continue
        winner = firsts[0]
        losses.append(-math.log(min(max(p[winner], 1e-15), 1.0 - 1e-15)))
        outcome = [1.0 if j == winner else 0.0 for j in range(len(p))]
        briers.append(0.5 * sum((q - y) ** 2 for q, y in zip(p, outcome, strict=True)))
        for q, y in zip(p, outcome, strict=True):
            row = bins[min(int(q * 10), 9)]
            row[0] += 1
            row[1] += q
            row[2] += y
    return {
        "matches": len(scored),
        "pairs": pairs,
        "prediction_error": wrong / pairs if pairs else None,
        "decided": len(losses),
        "log_loss": sum(losses) / len(losses) if losses else None,
        "brier": sum(briers) / len(briers) if briers else None,
        "calibration": [
            (int(n), total / n if n else None, won / n if n else None) for n, total, won in bins
        ],
    }


def _assert_figures(answer: dict[str, Any], expected: dict[str, Any]) -> None:
    for name in ("matches", "pairs", "decided"):
        assert answer[name] == expected[name], name
    for name in ("prediction_error", "log_loss", "brier"):
        if expected[name] is None:
            assert answer[name] is None, name
        else:
            # Sums are kept in units of 1e-9, each match's share rounded once.
            assert answer[name] == pytest.approx(expected[name], rel=1e-12, abs=1e-8), name
    got = [(b["count"], b["mean_predicted"], b["observed"]) for b in answer["calibration"]]
    assert [b["low"] for b in answer["calibration"]] == [b / 10 for b in range(10)]
    for (count, mean, observed), (n, want_mean, want_observed) in zip(
        got, expected["calibration"], strict=True
    ):
        assert count == n
        assert mean == (None if want_mean is None else pytest.approx(want_mean, abs=1e-9))
        assert observed == (None if want_observed is None else pytest.approx(want_observed))


def _stored_tally(documents: list[dict[str, Any]]) -> Tally:
    """The tally summed afresh from the stored matches (dense ranks as the outcome)."""
    tally = Tally.zero()
    for p, ranks in _scored(documents):
        tally.add_match(p, ranks)
    return tally


def _kept_tally(url: str, ladder: str) -> Tally:
    session = session_factory(get_engine(url))()
    try:
        return accuracy.tally_of(session=session, ladder_id=ladder)
    finally:
        session.close()


def _check(client: TestClient, url: str, ladder: str) -> list[dict[str, Any]]:
    """The running tally equals a recomputation from the stored matches to the unit, and the
    figures (running and scanned) equal the independent ones; returns the documents."""
    documents = _documents(client, ladder)
    assert _kept_tally(url, ladder).values == _stored_tally(documents).values
    expected = _figures(_scored(documents))
    running = client.get(f"/v1/ladders/{ladder}/accuracy")
    assert running.status_code == 200, running.text
    assert running.json()["scope"] == "all"
    _assert_figures(running.json(), expected)
    scanned = client.get(f"/v1/ladders/{ladder}/accuracy", params={"window": 10_000})
    assert scanned.status_code == 200, scanned.text
    assert scanned.json()["scope"] == "window"
    _assert_figures(scanned.json(), expected)
    return documents


def _assert_predictions(
    documents: list[dict[str, Any]], expected: dict[str, list[float]], *, rel: float = 1e-12
) -> None:
    """Every counted match stored the probabilities of the independent replay."""
    counted = [doc for doc in documents if not doc["voided"]]
    assert {doc["match_id"] for doc in counted} == set(expected)
    for doc in counted:
        got = doc["win_probabilities"]
        assert got == pytest.approx(expected[doc["match_id"]], rel=rel, abs=1e-15), doc["match_id"]
        assert sum(got) == pytest.approx(1.0, abs=1e-12)


def _import(capsys: pytest.CaptureFixture[str], path: Path, ladder: str) -> None:
    status = main(["import", str(path), "--ladder", ladder, "--chunk", "7"])
    _, err = capsys.readouterr()
    assert status == 0, err


# -- the paths a match is rated by -------------------------------------------------------------


@pytest.mark.parametrize(("algorithm", "params"), ALGORITHMS, ids=[a for a, _ in ALGORITHMS])
def test_every_path_stores_the_models_prediction_and_keeps_the_tally(
    client: TestClient,
    database_url: str,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    algorithm: str,
    params: dict[str, Any],
) -> None:
    bodies = random_matches(seed=5, count=45)
    seed = SEEDS.get(algorithm, {"mu": 31.0, "sigma": 2.0})
    create_ladder(client, "acc", algorithm=algorithm, params=params)
    for body in bodies[:10]:  # single POSTs (the group writer)
        post_match(client, "acc", body)
    response = client.put("/v1/ladders/acc/players/p03", json=seed)
    assert response.status_code == 200, response.text
    response = client.post("/v1/ladders/acc/matches/batch", json={"matches": bodies[10:25]})
    assert response.status_code == 201, response.text
    lines = tmp_path / "rest.jsonl"
    lines.write_text("".join(json.dumps(body) + "\n" for body in bodies[25:]))
    _import(capsys, lines, "acc")

    events = [*bodies[:10], {"seed": "p03", **seed}, *bodies[10:]]
    documents = _check(client, database_url, "acc")
    _assert_predictions(documents, core_replay(algorithm, params, events).win_probabilities)
    # The stored documents answer GET of one match too.
    one = client.get(f"/v1/ladders/acc/matches/{bodies[3]['match_id']}").json()
    assert one["win_probabilities"] == documents[3]["win_probabilities"]

    # A void re-rates the later matches: their predictions are replaced, the voided
    # match's share leaves the tally, its document keeps what it predicted.
    voided = bodies[12]["match_id"]
    before = documents[12]["win_probabilities"]
    assert client.delete(f"/v1/ladders/acc/matches/{voided}").status_code == 200
    documents = _check(client, database_url, "acc")
    assert documents[12]["voided"] and documents[12]["win_probabilities"] == before
    remaining = [event for event in events if event.get("match_id") != voided]
    _assert_predictions(documents, core_replay(algorithm, params, remaining).win_probabilities)

    # A rebuild with new parameters replaces every prediction and the whole tally.
    changed = {**params, "tau_per_day": 0.05} if algorithm not in ("elo", "glicko2") else params
    response = client.patch("/v1/ladders/acc", params={"rebuild": "true"}, json={"params": changed})
    assert response.status_code == 200, response.text
    documents = _check(client, database_url, "acc")
    _assert_predictions(documents, core_replay(algorithm, changed, remaining).win_probabilities)


def test_the_vectorised_replay_predicts_on_the_widened_ratings(
    client: TestClient, database_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """150 two-team matches in one chunk go through the grouped, vectorised replay; with
    time away widening sigma, the probabilities are those of the widened ratings."""
    params = {"tau_per_day": 0.5}
    create_ladder(client, "football", params=params)
    status = main(["import", str(FOOTBALL), "--ladder", "football"])
    assert status == 0, capsys.readouterr().err
    lines = [json.loads(line) for line in FOOTBALL.read_text(encoding="utf-8").splitlines()]
    documents = _check(client, database_url, "football")
    replayed = core_replay("trueskill", params, lines)
    _assert_predictions(documents, replayed.win_probabilities, rel=1e-9)
    # Not the stored ratings: with them the probabilities differ.
    no_widening = core_replay("trueskill", {"tau_per_day": 0.0}, lines).win_probabilities
    assert any(
        abs(doc["win_probabilities"][0] - no_widening[doc["match_id"]][0]) > 1e-3
        for doc in documents
    )


def test_draws_ties_for_first_and_free_for_alls_are_scored_by_their_rules(
    client: TestClient, database_url: str
) -> None:
    """Known matches on a fresh Elo ladder: every number computed by hand here."""
    create_ladder(client, "hand", algorithm="elo", params={"k_factor": 32})
    model = make_model("elo", {"k_factor": 32})
    post_match(client, "hand", {"match_id": "a", "teams": [["x"], ["y"]]})  # even: 1/2
    post_match(client, "hand", {"match_id": "b", "teams": [["x"], ["y"]], "ranks": [1, 1]})
    post_match(
        client, "hand", {"match_id": "c", "teams": [["z"], ["x"], ["y"]], "ranks": [2, 1, 2]}
    )
    post_match(
        client, "hand", {"match_id": "d", "teams": [["z"], ["x"], ["y"]], "ranks": [1, 1, 3]}
    )
    documents = _documents(client, "hand")
    p = {doc["match_id"]: doc["win_probabilities"] for doc in documents}
    assert p["a"] == [0.5, 0.5]
    # x won a: its rating went up, so in b it is favoured; b is a draw: no pair, no winner.
    after_a = 1500 + 32 * 0.5
    assert p["b"] == pytest.approx(
        model.win_probabilities([[Rating(after_a, 0.0)], [Rating(3000 - after_a, 0.0)]])
    )
    answer = client.get("/v1/ladders/hand/accuracy").json()
    assert answer["matches"] == 4
    # a: one pair, even (a half); c: x first of three, pairs (z,x) and (x,y); d: (z,y), (x,y).
    assert answer["pairs"] == 5
    wrong = 0.5
    for match, pairs in (("c", [(1, 0), (1, 2)]), ("d", [(0, 2), (1, 2)])):
        for ahead, behind in pairs:
            q = p[match]
            wrong += 1.0 if q[ahead] < q[behind] else 0.5 if q[ahead] == q[behind] else 0.0
    assert answer["prediction_error"] == pytest.approx(wrong / 5)
    # Single winners: a (x) and c (x); b is a draw and d a tie for first.
    assert answer["decided"] == 2
    losses = [-math.log(p["a"][0]), -math.log(p["c"][1])]
    assert answer["log_loss"] == pytest.approx(sum(losses) / 2, abs=1e-9)
    briers = [0.25, 0.5 * (p["c"][0] ** 2 + (1 - p["c"][1]) ** 2 + p["c"][2] ** 2)]
    assert answer["brier"] == pytest.approx(sum(briers) / 2, abs=1e-9)
    assert sum(b["count"] for b in answer["calibration"]) == 2 + 3
    _check(client, database_url, "hand")


# -- windows ----------------------------------------------------------------------------------


def test_a_window_scans_the_newest_matches_that_count(client: TestClient) -> None:
    create_ladder(client, "win")
    start = datetime(2026, 3, 1, tzinfo=UTC)
    bodies = [
        {
            "match_id": f"w{n}",
            "teams": [[f"a{n % 3}"], [f"b{n % 4}"]],
            "ranks": [1, 2] if n % 3 else [2, 1],
            "played_at": (start + timedelta(days=n)).isoformat(),
        }
        for n in range(12)
    ]
    for body in bodies:
        post_match(client, "win", body)
    assert client.delete("/v1/ladders/win/matches/w10").status_code == 200
    documents = _documents(client, "win")
    counted = [doc for doc in documents if not doc["voided"]]

    answer = client.get("/v1/ladders/win/accuracy", params={"window": 4}).json()
    assert (answer["scope"], answer["window"], answer["since"]) == ("window", 4, None)
    _assert_figures(answer, _figures(_scored(counted[-4:])))  # w7, w8, w9, w11

    since = (start + timedelta(days=9)).isoformat()
    answer = client.get("/v1/ladders/win/accuracy", params={"since": since}).json()
    assert (answer["window"], answer["since"]) == (10_000, "2026-03-10T00:00:00Z")
    _assert_figures(answer, _figures(_scored([d for d in counted if int(d["match_id"][1:]) >= 9])))
    assert answer["matches"] == 2  # w9 and w11

    # Both: among the newest 3 (w8, w9, w11), those since day 9; a zone-less time is UTC.
    answer = client.get(
        "/v1/ladders/win/accuracy", params={"window": 3, "since": "2026-03-10T00:00:00"}
    ).json()
    assert answer["matches"] == 2 and answer["since"] == "2026-03-10T00:00:00Z"
    # A window over every match is the running figure.
    whole = client.get("/v1/ladders/win/accuracy", params={"window": 100}).json()
    running = client.get("/v1/ladders/win/accuracy").json()
    assert {k: v for k, v in whole.items() if k not in ("scope", "window")} == {
        k: v for k, v in running.items() if k not in ("scope", "window")
    }


def test_an_empty_ladder_has_no_figures(client: TestClient) -> None:
    create_ladder(client, "empty")
    for params in ({}, {"window": 5}):
        answer = client.get("/v1/ladders/empty/accuracy", params=params).json()
        assert (answer["matches"], answer["pairs"], answer["decided"]) == (0, 0, 0)
        assert answer["prediction_error"] is None and answer["log_loss"] is None
        assert answer["brier"] is None
        assert [b["count"] for b in answer["calibration"]] == [0] * 10
        assert {b["mean_predicted"] for b in answer["calibration"]} == {None}


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"window": 0}, "window"),
        ({"window": 10_001}, "window"),
        ({"window": "many"}, "window"),
        ({"since": "yesterday"}, "since"),
        ({"since": "2026-13-01T00:00:00Z"}, "since"),
        ({"since": "0001-01-01T00:00:00+14:00"}, "since"),
        ({"since": "2026-01-01T00:00:00Z" + " " * 60}, "since"),
    ],
)
def test_bad_parameters_are_refused(client: TestClient, params: dict[str, Any], field: str) -> None:
    create_ladder(client, "bad")
    assert_problem(client.get("/v1/ladders/bad/accuracy", params=params), 422, field)


def test_an_unknown_ladder_is_not_found(client: TestClient) -> None:
    assert_problem(client.get("/v1/ladders/nowhere/accuracy"), 404, "ladder")


# -- matches without stored predictions, and the ladder's end ---------------------------------


def test_matches_recorded_before_are_scored_once_the_ladder_is_rebuilt(
    client: TestClient, database_url: str
) -> None:
    """Migration 0013 leaves the matches before it without predictions and the tally
    empty, which is their tally; a rebuild predicts them all."""
    create_ladder(client, "old", algorithm="plackett_luce")
    for body in random_matches(seed=8, count=12):
        post_match(client, "old", body)
    downgrade(database_url, "0012")
    with get_engine(database_url).begin() as connection:  # documents of the time: no key
        for seq, result in connection.execute(text("SELECT seq, result FROM matches")).all():
            document = json.loads(result)
            del document["win_probabilities"]
            connection.execute(
                text("UPDATE matches SET result = :result WHERE seq = :seq"),
                {"seq": seq, "result": json.dumps(document, separators=(",", ":"))},
            )
    upgrade(database_url)
    assert all("win_probabilities" not in doc for doc in _documents(client, "old"))
    assert client.get("/v1/ladders/old/accuracy").json()["matches"] == 0
    assert client.get("/v1/ladders/old/accuracy", params={"window": 50}).json()["matches"] == 0
    post_match(client, "old", {"match_id": "new", "teams": [["p00"], ["p01"]]})
    assert _check(client, database_url, "old")[-1]["match_id"] == "new"
    assert client.get("/v1/ladders/old/accuracy").json()["matches"] == 1

    assert client.patch("/v1/ladders/old", params={"rebuild": "true"}, json={}).status_code == 200
    documents = _check(client, database_url, "old")
    assert client.get("/v1/ladders/old/accuracy").json()["matches"] == 13
    with get_engine(database_url).connect() as connection:
        stored = connection.execute(
            text(
                "SELECT count(*) FROM matches WHERE ladder_id = 'old' AND win_probabilities IS NULL"
            )
        ).scalar()
    assert stored == 0
    assert all(doc["win_probabilities"] is not None for doc in documents)


def test_deleting_a_ladder_deletes_its_tally(client: TestClient, database_url: str) -> None:
    create_ladder(client, "gone")
    post_match(client, "gone", {"teams": [["a"], ["b"]]})
    assert _kept_tally(database_url, "gone").matches == 1
    assert client.delete("/v1/ladders/gone", params={"confirm": "gone"}).status_code == 200
    with get_engine(database_url).connect() as connection:
        rows = connection.execute(text("SELECT count(*) FROM ladder_accuracy")).scalar()
    assert rows == 0


# -- concurrency and the metrics ---------------------------------------------------------------


def test_concurrent_batches_keep_the_tally_exact(client: TestClient, database_url: str) -> None:
    """Batches of different players at once (on PostgreSQL in parallel, each adding to a
    stripe chosen at random): the stripes add up to a recomputation."""
    create_ladder(client, "busy")
    errors: list[BaseException] = []
    barrier = threading.Barrier(6)

    def worker(n: int) -> None:
        try:
            barrier.wait(timeout=30)
            for round_ in range(4):
                bodies = [
                    {"teams": [[f"t{n}-{k}"], [f"t{n}-{(k + round_ + 1) % 6}"]]} for k in range(5)
                ]
                response = client.post("/v1/ladders/busy/matches/batch", json={"matches": bodies})
                if response.status_code != 201:
                    errors.append(AssertionError(response.text))
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert not errors, errors[:2]
    documents = _check(client, database_url, "busy")
    assert len(documents) == 6 * 4 * 5


def _exposed(client: TestClient, name: str, ladder: str) -> float | None:
    prefix = f'{name}{{ladder="{ladder}"}} '
    for line in client.get("/metrics").text.splitlines():
        if line.startswith(prefix):
            return float(line[len(prefix) :])
    return None


def test_the_metrics_report_each_ladders_running_figures(client: TestClient) -> None:
    create_ladder(client, "m1")
    create_ladder(client, "m2", algorithm="elo")
    for n, body in enumerate(random_matches(seed=3, count=20)):
        post_match(client, "m1" if n % 2 else "m2", body)
    create_ladder(client, "quiet")
    for ladder in ("m1", "m2"):
        answer = client.get(f"/v1/ladders/{ladder}/accuracy").json()
        assert _exposed(client, "ratings_ladder_predicted_matches", ladder) == answer["matches"]
        for name in ("prediction_error", "log_loss", "brier"):
            assert _exposed(client, f"ratings_ladder_{name}", ladder) == pytest.approx(
                answer[name], rel=1e-12
            )
        assert _exposed(client, "ratings_ladder_decided_matches", ladder) == answer["decided"]
        assert _exposed(client, "ratings_ladder_decisive_pairs", ladder) == answer["pairs"]
        assert _exposed(client, "ratings_ladder_wrong_pairs", ladder) == pytest.approx(
            answer["prediction_error"] * answer["pairs"]
        )
        assert _exposed(client, "ratings_ladder_log_loss_sum", ladder) == pytest.approx(
            answer["log_loss"] * answer["decided"], rel=1e-12
        )
    # A ladder without a scored match has no series.
    assert _exposed(client, "ratings_ladder_predicted_matches", "quiet") is None
    text_ = client.get("/metrics").text
    assert "# TYPE ratings_ladder_log_loss gauge" in text_


# -- the rules, without a database -------------------------------------------------------------


class TestTally:
    def test_taking_a_match_away_undoes_adding_it(self) -> None:
        tally = Tally.zero()
        tally.add_match([0.2, 0.3, 0.5], [2, 1, 3])
        kept = list(tally.values)
        tally.add_match([1 / 3, 2 / 3], [1, 2])
        tally.add_match([1 / 3, 2 / 3], [1, 2], -1)
        assert tally.values == kept
        other = Tally.of(kept)
        tally.add(other, -1)
        assert tally.values == [0] * len(kept)

    def test_a_full_draw_has_no_pair_and_no_winner(self) -> None:
        tally = Tally.zero()
        tally.add_match([0.7, 0.3], [1, 1])
        assert (tally.matches, tally.pairs, tally.decided) == (1, 0, 0)
        assert tally.prediction_error() is None and tally.log_loss() is None

    def test_a_certain_loser_costs_the_clipped_log_loss(self) -> None:
        tally = Tally.zero()
        tally.add_match([1.0, 0.0], [2, 1])
        assert tally.log_loss() == pytest.approx(-math.log(1e-15), abs=1e-9)
        assert tally.brier() == pytest.approx(1.0)
        assert tally.prediction_error() == 1.0
        bins = tally.calibration()
        assert (bins[0].count, bins[0].observed) == (1, 1.0)
        assert (bins[9].count, bins[9].observed) == (1, 0.0)

    def test_a_model_that_refuses_gives_no_prediction(self) -> None:
        elo = make_model("elo", {})
        assert stored_prediction(elo, [[Rating(1500.0, 0.0)], [Rating(1e13, 0.0)]], None) is None
        assert stored_prediction(elo, [[Rating(1500.0, 0.0)], [Rating(1500.0, 0.0)]], None) == [
            0.5,
            0.5,
        ]
