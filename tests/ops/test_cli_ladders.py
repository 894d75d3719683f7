"""``ratings ladders create | list``: the same ladders, checks and messages as
``POST /v1/ladders`` and ``GET /v1/ladders``; ``ratings import`` into a ladder that does
not exist says how to make it."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from app.cli import ladders as ladders_cli
from app.services import auth
from tests.ops.conftest import assert_problem, bearer
from tests.ops.test_cli import run

#: Bad ladders, each as the API's body: the command must refuse them as the API does.
BAD: list[dict[str, Any]] = [
    {"id": "duel", "algorithm": "trueskil"},
    {"id": "Duel", "algorithm": "elo"},
    {"id": "x" * 65, "algorithm": "elo"},
    {"id": "duel", "algorithm": "trueskill", "params": {"sigma": -1}},
    {"id": "duel", "algorithm": "trueskill", "params": {"foo": 1}},
    {"id": "duel", "algorithm": "trueskill", "params": {"draw_probability": 1.5}},
    {"id": "duel", "algorithm": "elo", "params": {"model": "cauchy"}},
    {"id": "duel", "algorithm": "elo", "params": {"k_factor": 1e12}},
    {"id": "duel", "algorithm": "plackett_luce", "params": {"beta": 1e-300}},
    {"id": "duel", "algorithm": "elo", "params": [1, 2]},
    {"id": "duel", "algorithm": "elo", "description": "a\x00b"},
]


def argv(body: dict[str, Any]) -> list[str]:
    """``ratings ladders create`` with the body's fields as arguments."""
    args = ["ladders", "create", body["id"], "--algorithm", body["algorithm"]]
    if "params" in body:
        args += ["--params", json.dumps(body["params"])]
    if "description" in body:
        args += ["--description", body["description"]]
    return args


@pytest.fixture
def admin(db_url: str, make_key: Callable[[str, str], auth.NewKey]) -> dict[str, str]:
    return bearer(make_key("admin", "ladders-test").key)


class TestCreate:
    def test_made_as_the_api_makes_it(
        self,
        client: TestClient,
        admin: dict[str, str],
        capsys: pytest.CaptureFixture[str],
    ) -> None:
        status, out, err = run(
            capsys,
            "ladders",
            "create",
            "arena-ffa",
            "--algorithm",
            "trueskill",
            "--params",
            '{"draw_probability": 0.05, "tau_per_day": 0.01}',
            "--description",
            "Arena free-for-all",
        )
        assert status == 0
        assert err == "made ladder 'arena-ffa' (trueskill)\n"
        made = json.loads(out)
        assert made == client.get("/v1/ladders/arena-ffa").json()
        assert made["params"] == {
            "mu": 25.0,
            "sigma": 8.333333333333334,
            "beta": 4.166666666666667,
            "tau": 0.08333333333333334,
            "draw_probability": 0.05,
            "advantage": 0.0,
            "margin": 0.0,
            "stat_scale": 0.0,
            "stat_noise": 1.0,
            "stat_spread": 0.0,
            "tau_per_day": 0.01,
            "conservative_k": 3.0,
        }
        assert (made["description"], made["players"], made["matches"]) == (
            "Arena free-for-all",
            0,
            0,
        )

    def test_the_same_again_changes_nothing_another_is_refused(
        self, client: TestClient, capsys: pytest.CaptureFixture[str]
    ) -> None:
        first = run(capsys, "ladders", "create", "duel", "--algorithm", "elo")
        again = run(capsys, "ladders", "create", "duel", "--algorithm", "elo")
        assert first[0] == again[0] == 0
        assert again[2] == "ladder 'duel' exists with this configuration already\n"
        assert json.loads(again[1]) == json.loads(first[1])
        status, out, err = run(
            capsys,
            "ladders",
            "create",
            "duel",
            "--algorithm",
            "elo",
            "--params",
            '{"k_factor": 16}',
        )
        assert (status, out) == (1, "")
        assert err == "ratings: id: ladder 'duel' exists with a different configuration\n"
        assert client.get("/v1/ladders/duel").json()["params"]["k_factor"] == 32.0

    @pytest.mark.parametrize("body", BAD, ids=lambda body: json.dumps(body)[:60])
    def test_refused_with_the_apis_message(
        self,
        body: dict[str, Any],
        client: TestClient,
        admin: dict[str, str],
        capsys: pytest.CaptureFixture[str],
    ) -> None:
        detail = assert_problem(client.post("/v1/ladders", json=body, headers=admin), 422)["detail"]
        status, out, err = run(capsys, *argv(body))
        assert (status, out) == (1, "")
        # The API names a body field "body.<field>"; the command has no body to name.
        assert err == f"ratings: {detail.removeprefix('body.')}\n"
        assert "Traceback" not in err
        assert client.get("/v1/ladders").json()["entries"] == []

    def test_params_json_is_read_as_the_api_reads_a_body(
        self, client: TestClient, admin: dict[str, str], capsys: pytest.CaptureFixture[str]
    ) -> None:
        def api(params: str) -> str:
            response = client.post(
                "/v1/ladders",
                content=f'{{"id": "duel", "algorithm": "trueskill", "params": {params}}}',
                headers={**admin, "Content-Type": "application/json"},
            )
            detail: str = assert_problem(response, 422)["detail"]
            return detail

        twice, nan = '{"mu": 30, "mu": 20}', '{"mu": NaN}'
        assert api(twice) == "body: the key 'mu' appears twice in one object"
        cases = {
            twice: "params: the key 'mu' appears twice in one object",
            nan: api(nan).replace("body.", ""),
            "{mu: 1}": "params: not valid JSON (Expecting property name enclosed in double "
            "quotes: line 1 column 2 (char 1))",
        }
        assert cases[nan].startswith("params.mu.int: Input should be a valid integer; ")
        for params, message in cases.items():
            status, _, err = run(
                capsys, "ladders", "create", "duel", "--algorithm", "trueskill", "--params", params
            )
            assert (status, err) == (1, f"ratings: {message}\n")
        assert client.get("/v1/ladders").json()["entries"] == []


class TestList:
    def test_table_and_json_match_the_api(
        self,
        client: TestClient,
        admin: dict[str, str],
        tmp_path: Path,
        capsys: pytest.CaptureFixture[str],
    ) -> None:
        status, out, _ = run(capsys, "ladders", "list")
        assert (status, out) == (0, "ID  ALGORITHM  PLAYERS  MATCHES  CREATED  DESCRIPTION\n")
        assert run(capsys, "ladders", "list", "--json")[1] == "[]\n"

        run(capsys, "ladders", "create", "solo", "--algorithm", "elo")
        run(
            capsys,
            *["ladders", "create", "arena", "--algorithm", "trueskill"],
            *["--description", "Arena free-for-all"],
        )
        matches = [
            {"match_id": "m1", "teams": [["alice"], ["bob"], ["carol"]]},
            {"match_id": "m2", "teams": [["bob"], ["alice"]]},
        ]
        url = "/v1/ladders/arena/matches/batch"
        assert client.post(url, json={"matches": matches}, headers=admin).status_code == 201
        assert client.delete("/v1/ladders/arena/matches/m2", headers=admin).status_code == 200

        status, out, _ = run(capsys, "ladders", "list", "--json")
        assert status == 0
        listed = json.loads(out)
        assert listed == client.get("/v1/ladders").json()["entries"]
        assert [(entry["id"], entry["players"], entry["matches"]) for entry in listed] == [
            ("arena", 3, 1),
            ("solo", 0, 0),
        ]

        status, out, _ = run(capsys, "ladders", "list")
        rows = [line.split(None, 5) for line in out.splitlines()]
        assert rows[0] == ["ID", "ALGORITHM", "PLAYERS", "MATCHES", "CREATED", "DESCRIPTION"]
        created = {entry["id"]: entry["created_at"][:19] + "Z" for entry in listed}
        assert rows[1:] == [
            ["arena", "trueskill", "3", "1", created["arena"], "Arena free-for-all"],
            ["solo", "elo", "0", "0", created["solo"], "-"],
        ]

    def test_every_page_is_listed(
        self,
        db_url: str,
        monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str],
    ) -> None:
        names = [f"l{n}" for n in range(7)]
        for name in reversed(names):
            assert run(capsys, "ladders", "create", name, "--algorithm", "elo")[0] == 0
        monkeypatch.setattr(ladders_cli, "MAX_PAGE", 3)
        listed = json.loads(run(capsys, "ladders", "list", "--json")[1])
        assert [entry["id"] for entry in listed] == names


class TestImportIntoAMissingLadder:
    def test_says_how_to_make_it_and_then_imports(
        self, client: TestClient, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        path = tmp_path / "matches.jsonl"
        path.write_text(
            '{"match_id": "m1", "teams": [["alice"], ["bob"]]}\n'
            '{"match_id": "m2", "teams": [["bob"], ["carol"]]}\n'
        )
        status, out, err = run(capsys, "import", str(path), "--ladder", "duel")
        assert (status, out) == (1, "")
        assert err == (
            "ratings: no ladder 'duel': make it first with `ratings ladders create duel "
            "--algorithm trueskill|plackett_luce|elo|glicko2|bradley_terry_full|bradley_terry_part|"
            "thurstone_mosteller_full|thurstone_mosteller_part`\n"
        )
        status, _, err = run(capsys, "import", str(path), "--ladder", "Duel")
        assert (status, err) == (
            1,
            "ratings: no ladder 'Duel': a ladder id is 1 to 64 of [a-z0-9_-]\n",
        )
        assert client.get("/v1/ladders").json()["entries"] == []

        assert run(capsys, "ladders", "create", "duel", "--algorithm", "elo")[0] == 0
        status, out, _ = run(capsys, "import", str(path), "--ladder", "duel")
        assert status == 0 and out.startswith("matches read 2, recorded 2, skipped (already")
        assert client.get("/v1/ladders/duel").json()["matches"] == 2
