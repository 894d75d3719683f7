"""What ``ratings serve`` does to keep a worker's memory small: the migration runs in a
child process, glibc's malloc arenas are capped for the workers, their garbage collector
is tuned when they start, and scipy is never imported."""

from __future__ import annotations

import gc
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from app.cli import server
from app.cli.base import CommandError
from app.cli.main import main
from app.config import GC_TUNING_ENV, get_settings
from tests.ops.test_cli import serve, stop, wait_until_up

ROOT = Path(__file__).resolve().parents[2]


def _mark_environment() -> int:
    os.environ["RATINGS_TEST_CHILD_MARK"] = "set in the child"
    return 3


def _refuse() -> int:
    raise CommandError("refused in the child")


class TestChildProcess:
    def test_status_comes_back_and_the_parent_is_untouched(self) -> None:
        assert server._in_child_process(_mark_environment) == 3
        assert "RATINGS_TEST_CHILD_MARK" not in os.environ

    def test_an_operator_error_is_one_line_and_status_1(
        self, capfd: pytest.CaptureFixture[str]
    ) -> None:
        assert server._in_child_process(_refuse) == 1
        assert capfd.readouterr().err == "ratings: refused in the child\n"

    def test_serve_on_an_unreachable_database_says_so(
        self, tmp_path: Path, capfd: pytest.CaptureFixture[str]
    ) -> None:
        url = f"sqlite:///{tmp_path / 'no-such-folder' / 'ratings.db'}"
        assert main(["--database-url", url, "serve", "--port", "1"]) == 1
        err = capfd.readouterr().err
        assert err.startswith(f"ratings: the database {url} is unreachable or refused: ")
        assert "Traceback" not in err


def _environment(pid: int) -> dict[str, str]:
    with open(f"/proc/{pid}/environ", "rb") as handle:
        pairs = [item.split(b"=", 1) for item in handle.read().split(b"\0") if b"=" in item]
    return {key.decode(): value.decode() for key, value in pairs}


def _children(pid: int) -> list[int]:
    found: list[int] = []
    for task in os.listdir(f"/proc/{pid}/task"):
        with open(f"/proc/{pid}/task/{task}/children") as handle:
            found.extend(int(child) for child in handle.read().split())
    return found


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_workers_start_with_two_malloc_arenas(tmp_path: Path) -> None:
    process, base = serve(tmp_path, "--workers", "2")
    try:
        wait_until_up(base, process)
        environments = [_environment(pid) for pid in _children(process.pid)]
    finally:
        stop(process)
    assert process.returncode == 0
    assert len(environments) >= 2  # the two workers (and the resource tracker)
    assert {env.get("MALLOC_ARENA_MAX") for env in environments} == {"2"}
    assert {env.get(GC_TUNING_ENV) for env in environments} == {"1"}


@pytest.fixture
def restored_gc() -> Iterator[None]:
    threshold = gc.get_threshold()
    yield
    gc.unfreeze()
    gc.set_threshold(*threshold)
    get_settings.cache_clear()  # the environment's settings again


def test_a_worker_started_by_serve_tunes_its_garbage_collector(
    restored_gc: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    from app.main import GC_YOUNG_THRESHOLD, create_app

    monkeypatch.delenv(GC_TUNING_ENV, raising=False)
    get_settings.cache_clear()
    with TestClient(create_app()):  # not started by serve: Python's defaults stay
        assert gc.get_threshold()[0] != GC_YOUNG_THRESHOLD
    monkeypatch.setenv(GC_TUNING_ENV, "1")
    get_settings.cache_clear()
    with TestClient(create_app()):
        assert gc.get_threshold() == (GC_YOUNG_THRESHOLD, 20, 20)
        assert gc.get_freeze_count() > 100_000  # the modules and the app, frozen


def test_an_operators_arena_setting_wins(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MALLOC_ARENA_MAX", "4")
    server._limit_malloc_arenas()
    assert os.environ["MALLOC_ARENA_MAX"] == "4"
    monkeypatch.delenv("MALLOC_ARENA_MAX")
    server._limit_malloc_arenas()
    assert os.environ["MALLOC_ARENA_MAX"] == str(server.DEFAULT_MALLOC_ARENAS) == "2"


def test_serving_imports_no_scipy() -> None:
    code = (
        "import sys, app.main\n"
        "from app.rating import _special\n"
        "_special.erfc(0.5), _special.log_ndtr(-3.0), _special.logsumexp([1.0, 2.0])\n"
        "print('scipy' in sys.modules)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert done.stdout.split() == ["False"]
