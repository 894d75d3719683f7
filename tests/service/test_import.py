"""``ratings import``: JSON Lines (and .gz) through the batch path, in chunks, resumable; a bad
line stops it, naming the line, with nothing of its chunk written."""

from __future__ import annotations

import gzip
import json
import re
import sys
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from app.cli.main import main
from tests.service.helpers import all_pages, create_ladder, table_counts
from tests.service.oracle import core_replay

DATA = Path(__file__).parent / "data"
FOOTBALL = DATA / "intl_football_sample.jsonl"
F1 = DATA / "f1_races_sample.jsonl"


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    status = main(list(argv))
    out, err = capsys.readouterr()
    return status, out, err


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def _summary(out: str) -> tuple[int, int, int]:
    found = re.search(
        r"read ([\d,]+), recorded ([\d,]+), skipped \(already recorded\) ([\d,]+)", out
    )
    assert found, out
    read, recorded, skipped = (int(x.replace(",", "")) for x in found.groups())
    return read, recorded, skipped


def test_import_equals_a_replay_and_resumes(
    client: TestClient, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    params = {"tau_per_day": 0.01}
    create_ladder(client, "football", params=params)
    packed = tmp_path / "football.jsonl.gz"
    packed.write_bytes(gzip.compress(FOOTBALL.read_bytes()))
    status, out, err = run(capsys, "import", str(packed), "--ladder", "football", "--chunk", "40")
    assert status == 0, err
    assert _summary(out) == (150, 150, 0)
    assert "matches/s" in out
    assert err == ""  # no progress bar when stderr is not a terminal

    expected = core_replay("trueskill", params, _lines(FOOTBALL))
    board = all_pages(client, "/v1/ladders/football/leaderboard", limit=1000)
    assert len(board) == len(expected.ratings)
    for entry in board:
        rating = expected.ratings[entry["player_id"]]
        assert (entry["mu"], entry["sigma"]) == pytest.approx(tuple(rating), rel=1e-12)
        assert entry["matches"] == expected.played[entry["player_id"]]

    # Again, uncompressed: every match is already recorded and nothing changes.
    status, out, err = run(capsys, "import", str(FOOTBALL), "--ladder", "football", "--progress")
    assert status == 0, err
    assert _summary(out) == (150, 0, 150)
    assert out.count("\n") == 1  # the summary alone: the bar goes to stderr
    final = err.split("\r")[-1]  # the progress bar, asked for: every byte read
    size = FOOTBALL.stat().st_size
    assert "100%" in final and f"{size / 1024:.1f}k/{size / 1024:.1f}k" in final, final
    assert "150 matches" in final, final
    assert all_pages(client, "/v1/ladders/football/leaderboard", limit=1000) == board


def test_a_bad_line_stops_the_import_and_keeps_earlier_chunks(
    client: TestClient, database_url: str, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    create_ladder(client, "football")
    lines = FOOTBALL.read_text(encoding="utf-8").splitlines()[:100]
    broken = tmp_path / "broken.jsonl"
    broken.write_text("\n".join([*lines[:56], '{"teams": [["a"], ["b"]', *lines[57:]]) + "\n")
    status, out, err = run(capsys, "import", str(broken), "--ladder", "football", "--chunk", "20")
    assert status == 1 and out == ""
    assert "line 57" in err and "JSON" in err
    # Lines 1-40 (two chunks) stay; nothing of the chunk of lines 41-60.
    assert client.get("/v1/ladders/football").json()["matches"] == 40

    # Fixed, the import resumes where it stopped.
    fixed = tmp_path / "fixed.jsonl"
    fixed.write_text("\n".join(lines) + "\n")
    status, out, err = run(capsys, "import", str(fixed), "--ladder", "football", "--chunk", "20")
    assert status == 0, err
    assert _summary(out) == (100, 60, 40)
    expected = core_replay("trueskill", {}, [json.loads(line) for line in lines])
    for entry in all_pages(client, "/v1/ladders/football/leaderboard", limit=1000):
        assert entry["mu"] == pytest.approx(expected.ratings[entry["player_id"]].mu, rel=1e-12)

    # A line the service refuses (Formula 1's shared drives: one driver twice) names it too.
    create_ladder(client, "f1", algorithm="plackett_luce")
    before = table_counts(database_url)
    status, out, err = run(capsys, "import", str(F1), "--ladder", "f1", "--chunk", "1000")
    shared = next(
        n
        for n, body in enumerate(_lines(F1), start=1)
        if len({p for t in body["teams"] for p in t}) < sum(len(t) for t in body["teams"])
    )
    assert status == 1
    assert f"line {shared}" in err and "appears twice" in err
    assert table_counts(database_url) == before


def test_a_match_the_model_refuses_names_its_line(
    client: TestClient, database_url: str, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    create_ladder(client)
    bodies = [{"match_id": f"m{n}", "teams": [[f"a{n}"], [f"b{n}"]]} for n in range(5)]
    bodies[3] = {"match_id": "m3", "teams": [["x", "y"], ["z"]], "weights": [[0, 0], [1]]}
    path = tmp_path / "refused.jsonl"
    path.write_text("\n".join(json.dumps(body) for body in bodies) + "\n")
    before = table_counts(database_url)
    status, _, err = run(capsys, "import", str(path), "--ladder", "test")
    assert status == 1
    assert "line 4: weights" in err
    assert table_counts(database_url) == before


def test_a_refused_chunk_stops_the_chunks_behind_it(
    client: TestClient, database_url: str, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """Chunks are written by a thread of their own while the next ones are rated: when one
    is refused, the chunks before it stay and none after it is written, even one already
    handed to the writer."""
    create_ladder(client)
    bodies = [{"match_id": f"m{n}", "teams": [[f"a{n % 7}"], [f"b{n % 5}"]]} for n in range(40)]
    bodies[17] = {"match_id": "m17", "teams": [["x", "y"], ["z"]], "weights": [[0, 0], [1]]}
    path = tmp_path / "refused.jsonl"
    path.write_text("\n".join(json.dumps(body) for body in bodies) + "\n")
    status, _, err = run(capsys, "import", str(path), "--ladder", "test", "--chunk", "5")
    assert status == 1
    assert "line 18: weights" in err
    recorded = {m["match_id"] for m in all_pages(client, "/v1/ladders/test/matches", limit=100)}
    assert recorded == {f"m{n}" for n in range(15)}


def test_the_interpreter_switch_interval_is_given_back(
    client: TestClient, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """An import shortens the interpreter's thread switch interval while it runs (its
    writing thread waits on the database) and restores it however it ends."""
    create_ladder(client)
    before = sys.getswitchinterval()
    good = tmp_path / "good.jsonl"
    good.write_text(json.dumps({"teams": [["a"], ["b"]]}) + "\n")
    assert run(capsys, "import", str(good), "--ladder", "test")[0] == 0
    assert sys.getswitchinterval() == before
    bad = tmp_path / "bad.jsonl"
    bad.write_text("{\n")
    assert run(capsys, "import", str(bad), "--ladder", "test")[0] == 1
    assert sys.getswitchinterval() == before


def test_import_errors(
    client: TestClient, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    status, _, err = run(capsys, "import", str(tmp_path / "none.jsonl"), "--ladder", "x")
    assert status == 1 and "no such file" in err
    status, _, err = run(capsys, "import", str(FOOTBALL), "--ladder", "missing")
    assert status == 1 and "ladder" in err
    create_ladder(client)
    status, _, err = run(capsys, "import", str(FOOTBALL), "--ladder", "test", "--chunk", "0")
    assert status == 1 and "--chunk" in err


@pytest.mark.parametrize(
    "line",
    [
        {"teams": [["a"], [7]]},  # an id that is not text
        {"teams": [["a"], ["b"]], "colour": "red"},  # a field the API does not know
        {"teams": [["a"], ["b"]], "meta": {"note": "x" * 5000}},  # meta past 4 KB
        {"teams": [["a"], ["b"]], "played_at": "2024-13-01"},
    ],
    ids=["number id", "unknown field", "large meta", "bad date"],
)
def test_import_evaluate_and_the_api_refuse_a_line_alike(
    client: TestClient, capsys: pytest.CaptureFixture[str], tmp_path: Path, line: dict[str, Any]
) -> None:
    """One reader of match files: a line the API refuses stops the import, ``evaluate``
    and ``fit``, each naming the line with the API's own reason."""
    create_ladder(client, "refused")
    path = tmp_path / "matches.jsonl"
    path.write_text(json.dumps({"teams": [["a"], ["b"]]}) + "\n" + json.dumps(line) + "\n")
    response = client.post("/v1/ladders/refused/matches", json=line)
    assert response.status_code == 422
    reason = response.json()["detail"].removeprefix("body.")
    status, _, err = run(capsys, "import", str(path), "--ladder", "refused")
    assert status != 0 and f"line 2: {reason}" in err, err
    for command in (["evaluate", str(path)], ["fit", str(path), "--algorithm", "elo"]):
        status, _, err = run(capsys, *command)
        assert status == 2 and f"{path}:2: {reason}" in err, err
