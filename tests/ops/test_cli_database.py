"""Which database the ``ratings`` command works on: the default is the same wherever the
command runs (the checkout's ``ratings.db``, or the user's data folder for an installed
package), only ``migrate`` and ``serve`` create a database, and every message about it
names the database it looked for."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text

from app import config
from app.config import get_settings
from app.storage.engine import dispose_engines, migration_heads, upgrade
from tests.ops.test_cli import KEY, free_port, get, ratings_command, run, stop, wait_until_up

ROOT = Path(__file__).resolve().parents[2]
HEAD = ", ".join(sorted(migration_heads()))
MISSING = "; `ratings migrate` creates it (and `ratings serve` before it serves)\n"
DEFAULT = " (the default: RATINGS_DATABASE_URL is not set)"

#: Commands that need the database and must never create one, by what they do.
READS = [
    ["keys", "list"],
    ["keys", "list", "--json"],
    ["ladders", "list"],
    ["ladders", "list", "--json"],
]
WRITES = [
    ["keys", "create", "--scope", "read", "--name", "board"],
    ["keys", "revoke", "board"],
    ["ladders", "create", "duel", "--algorithm", "elo"],
    ["import", "matches.jsonl", "--ladder", "duel"],
    ["rebuild", "--ladder", "duel"],
]


def files(folder: Path) -> set[str]:
    return {path.relative_to(folder).as_posix() for path in folder.rglob("*")}


@pytest.fixture
def places(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Path, Path]]:
    """A source checkout (a folder with ``pyproject.toml``, standing for the one ``app/``
    is in) and another folder the command runs from; RATINGS_DATABASE_URL unset."""
    checkout, elsewhere = tmp_path / "checkout", tmp_path / "elsewhere"
    checkout.mkdir()
    elsewhere.mkdir()
    (checkout / "pyproject.toml").write_text("[project]\nname = 'ratings'\n")
    (elsewhere / "matches.jsonl").write_text('{"teams": [["a"], ["b"]]}\n')
    monkeypatch.setattr(config, "PACKAGE_PARENT", checkout)
    monkeypatch.delenv("RATINGS_DATABASE_URL", raising=False)
    monkeypatch.chdir(elsewhere)
    get_settings.cache_clear()
    yield checkout, elsewhere
    dispose_engines()
    get_settings.cache_clear()


class TestDefaultDatabase:
    def test_the_default_is_the_checkouts_file_wherever_the_command_runs(
        self, places: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
    ) -> None:
        checkout, _ = places
        assert get_settings().database_url == f"sqlite:///{checkout}/ratings.db"
        assert get_settings().database_url_is_default
        monkeypatch.chdir(checkout)
        get_settings.cache_clear()
        assert get_settings().database_url == f"sqlite:///{checkout}/ratings.db"

    def test_the_real_default_is_this_checkouts_ratings_db(self) -> None:
        assert config.default_database_path() == ROOT / "ratings.db"

    def test_an_installed_package_keeps_it_in_the_users_data_folder(
        self, places: tuple[Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.setattr(config, "PACKAGE_PARENT", tmp_path / "site-packages")
        monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
        assert config.default_database_path() == tmp_path / "data" / "ratings" / "ratings.db"
        # A relative XDG_DATA_HOME is ignored, as the XDG rules say.
        monkeypatch.setenv("XDG_DATA_HOME", "data")
        monkeypatch.setenv("HOME", str(tmp_path / "home"))
        expected = tmp_path / "home" / ".local" / "share" / "ratings" / "ratings.db"
        assert config.default_database_path() == expected

    def test_migrate_makes_the_data_folder_of_an_installed_package(
        self,
        places: tuple[Path, Path],
        tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str],
    ) -> None:
        monkeypatch.setattr(config, "PACKAGE_PARENT", tmp_path / "site-packages")
        monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
        get_settings.cache_clear()
        url = f"sqlite:///{tmp_path}/data/ratings/ratings.db"
        assert run(capsys, "ladders", "list") == (
            1,
            "",
            f"ratings: no database at {url}{DEFAULT}{MISSING}",
        )
        assert not (tmp_path / "data").exists()
        status, _, err = run(capsys, "migrate")
        assert status == 0
        assert err == f"database {url}{DEFAULT}: schema migrated from empty to {HEAD}\n"
        assert (tmp_path / "data" / "ratings" / "ratings.db").is_file()


class TestNoDatabaseIsMadeByAccident:
    @pytest.mark.parametrize("argv", READS + WRITES, ids=" ".join)
    def test_a_missing_database_is_named_and_not_made(
        self, argv: list[str], places: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
    ) -> None:
        checkout, elsewhere = places
        before = files(checkout), files(elsewhere)
        status, out, err = run(capsys, *argv)
        assert (status, out) == (1, "")
        assert err == f"ratings: no database at sqlite:///{checkout}/ratings.db{DEFAULT}{MISSING}"
        assert (files(checkout), files(elsewhere)) == before

    @pytest.mark.parametrize("argv", READS, ids=" ".join)
    def test_a_relative_url_is_named_by_its_absolute_path(
        self,
        argv: list[str],
        places: tuple[Path, Path],
        monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str],
    ) -> None:
        _, elsewhere = places
        monkeypatch.setenv("RATINGS_DATABASE_URL", "sqlite:///./mine.db")
        get_settings.cache_clear()
        status, _, err = run(capsys, *argv)
        assert status == 1
        assert err == f"ratings: no database at sqlite:///{elsewhere}/mine.db{MISSING}"
        assert files(elsewhere) == {"matches.jsonl"}

    def test_migrate_makes_it_where_every_command_finds_it(
        self,
        places: tuple[Path, Path],
        tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str],
    ) -> None:
        checkout, elsewhere = places
        status, _, err = run(capsys, "migrate")
        url = f"sqlite:///{checkout}/ratings.db"
        assert status == 0
        assert err == f"database {url}{DEFAULT}: schema migrated from empty to {HEAD}\n"
        assert files(elsewhere) == {"matches.jsonl"}
        assert files(checkout) == {"pyproject.toml", "ratings.db"}
        # Reads leave no file behind, not even the writers' lock file.
        for argv in READS:
            assert run(capsys, *argv)[0] == 0
        assert files(checkout) == {"pyproject.toml", "ratings.db"}

        key = run(capsys, "keys", "create", "--scope", "read", "--name", "board")[1].strip()
        third = tmp_path / "third"
        third.mkdir()
        monkeypatch.chdir(third)
        status, out, _ = run(capsys, "keys", "list")
        assert status == 0 and key[:11] in out
        assert files(third) == set()


class TestUnmigratedDatabase:
    def test_an_empty_file_has_no_schema(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
    ) -> None:
        url = f"sqlite:///{tmp_path}/empty.db"
        create_engine(url).connect().close()  # an empty SQLite file
        monkeypatch.setenv("RATINGS_DATABASE_URL", url)
        get_settings.cache_clear()
        try:
            status, _, err = run(capsys, "ladders", "list")
        finally:
            dispose_engines()
            get_settings.cache_clear()
        assert status == 1
        assert err == (
            f"ratings: the database {url} has no schema yet: run `ratings migrate` first\n"
        )

    def test_an_older_schema_is_named(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
    ) -> None:
        url = f"sqlite:///{tmp_path}/old.db"
        upgrade(url, "0005")
        monkeypatch.setenv("RATINGS_DATABASE_URL", url)
        get_settings.cache_clear()
        try:
            status, _, err = run(capsys, "keys", "list")
        finally:
            dispose_engines()
            get_settings.cache_clear()
        assert status == 1
        assert err == (
            f"ratings: the database {url} is at schema 0005, not the newest ({HEAD}): "
            "run `ratings migrate` first\n"
        )


POSTGRES_URL = os.environ.get("RATINGS_TEST_POSTGRES_URL")


@pytest.mark.postgres
@pytest.mark.skipif(POSTGRES_URL is None, reason="RATINGS_TEST_POSTGRES_URL is not set")
def test_an_empty_postgres_database_is_named_without_its_password(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import psycopg
    from psycopg import sql

    assert POSTGRES_URL is not None
    name = f"ratings_cli_empty_{os.getpid()}"
    server = POSTGRES_URL.rsplit("/", 1)[0]
    with psycopg.connect(POSTGRES_URL, autocommit=True) as connection:
        connection.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    # A password in the URL (the test server may not ask for one) must never be shown.
    user, host = server.split("://", 1)[1].split("@", 1)
    url = f"postgresql://{user.split(':')[0]}:hunter2@{host}/{name}"
    shown = f"postgresql://{user.split(':')[0]}:***@{host}/{name}"
    monkeypatch.setenv("RATINGS_DATABASE_URL", url)
    get_settings.cache_clear()
    try:
        for argv in READS + WRITES[:3]:
            status, out, err = run(capsys, *argv)
            assert (status, out) == (1, "")
            assert err == (
                f"ratings: the database {shown} has no schema yet: run `ratings migrate` first\n"
            )
        with create_engine(url.replace("postgresql://", "postgresql+psycopg://")).connect() as c:
            tables = c.scalars(text("SELECT tablename FROM pg_tables WHERE schemaname = 'public'"))
            assert list(tables) == []
        status, _, err = run(capsys, "migrate")
        assert status == 0
        assert err == f"database {shown}: schema migrated from empty to {HEAD}\n"
        assert run(capsys, "ladders", "list")[0] == 0
    finally:
        dispose_engines()
        get_settings.cache_clear()
        with psycopg.connect(POSTGRES_URL, autocommit=True) as connection:
            connection.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
            )


def _in_checkout(checkout: Path, *argv: str) -> list[str]:
    """The ``ratings`` command, as a process of its own, with ``checkout`` standing for the
    folder ``app/`` is in (so that its default database is ``checkout/ratings.db``)."""
    code = (
        "import pathlib, sys\n"
        "import app.config\n"
        f"app.config.PACKAGE_PARENT = pathlib.Path({str(checkout)!r})\n"
        "from app.cli.main import main\n"
        f"sys.exit(main({list(argv)!r}))\n"
    )
    return [sys.executable, "-c", code]


def _environment() -> dict[str, str]:
    env = {**os.environ, "RATINGS_LOG_LEVEL": "warning"}
    env.pop("RATINGS_DATABASE_URL", None)
    env.pop("PROMETHEUS_MULTIPROC_DIR", None)
    return env


def test_the_real_command_from_another_folder_makes_no_file(tmp_path: Path) -> None:
    """The installed ``ratings`` script, RATINGS_DATABASE_URL unset, run outside the
    checkout: it names the checkout's database and leaves the folder as it was."""
    if (ROOT / "ratings.db").exists():
        pytest.skip("this checkout has a ratings.db of its own: the command would read it")
    done = subprocess.run(
        [*ratings_command(), "ladders", "list"],
        cwd=tmp_path,
        env=_environment(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr == f"ratings: no database at sqlite:///{ROOT}/ratings.db{DEFAULT}{MISSING}"
    assert files(tmp_path) == set()
    assert not (ROOT / "ratings.db").exists()


def test_serve_and_the_command_share_the_default_database(tmp_path: Path) -> None:
    """``ratings serve`` started in one folder and ``ratings keys create`` run from another,
    neither told a database: the key made by the command is one the server accepts."""
    checkout, first, second = tmp_path / "checkout", tmp_path / "first", tmp_path / "second"
    for folder in (checkout, first, second):
        folder.mkdir()
    (checkout / "pyproject.toml").write_text("[project]\nname = 'ratings'\n")
    port = free_port()
    server = subprocess.Popen(
        _in_checkout(checkout, "serve", "--host", "127.0.0.1", "--port", str(port)),
        cwd=first,
        env=_environment(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        wait_until_up(base, server)
        made = subprocess.run(
            _in_checkout(checkout, "keys", "create", "--scope", "admin", "--name", "ops"),
            cwd=second,
            env=_environment(),
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert made.returncode == 0, made.stderr
        key = made.stdout.strip()
        assert KEY.fullmatch(key)
        status, body = get(f"{base}/v1/ladders", key)
    finally:
        _, err = stop(server)
    assert (status, body) == (200, '{"entries":[],"next_cursor":null}')
    # The server named its database, and made its first admin key there.
    url = f"sqlite:///{checkout}/ratings.db"
    assert f"database {url}{DEFAULT}: schema migrated from empty to {HEAD}\n" in err
    assert len(KEY.findall(err)) == 1
    assert files(first) == set() and files(second) == set()
