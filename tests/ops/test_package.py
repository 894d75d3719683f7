"""The package as installed (a wheel, not the source tree) carries its migrations: what the
Docker image runs, ``pip install .`` without ``-e``."""

from __future__ import annotations

import shutil
import sqlite3
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from app.storage.engine import migration_heads

ROOT = Path(__file__).resolve().parents[2]
MIGRATIONS = ROOT / "app" / "migrations"


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A wheel built from a copy of what the image copies (the tree stays untouched)."""
    source = tmp_path_factory.mktemp("source")
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    shutil.copytree(ROOT / "app", source / "app", ignore=shutil.ignore_patterns("__pycache__"))
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "-w", str(out), "."],
        cwd=source,
        check=True,
        capture_output=True,
    )
    (built,) = out.glob("ratings-*.whl")
    return built


@pytest.mark.slow
def test_the_wheel_holds_every_migration_script(wheel: Path) -> None:
    scripts = {
        path.relative_to(ROOT).as_posix()
        for path in MIGRATIONS.rglob("*")
        if path.is_file() and "__pycache__" not in path.parts
    }
    assert {"app/migrations/env.py", "app/migrations/script.py.mako"} <= scripts
    assert any(name.startswith("app/migrations/versions/") for name in scripts)
    with zipfile.ZipFile(wheel) as archive:
        packed = {name for name in archive.namelist() if name.startswith("app/migrations/")}
    assert packed == scripts


@pytest.mark.slow
def test_the_installed_package_migrates_outside_the_source_tree(
    wheel: Path, tmp_path: Path
) -> None:
    site = tmp_path / "site"
    install = [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target"]
    subprocess.run(
        [*install, str(site), str(wheel)],
        check=True,
        capture_output=True,
    )
    database = tmp_path / "ratings.db"
    code = (
        "import sys, app\n"
        "from app.cli.main import main\n"
        "print(app.__file__)\n"
        f"sys.exit(main(['--database-url', 'sqlite:///{database.as_posix()}', 'migrate']))\n"
    )
    # The dependencies come from this environment; the package itself from the install,
    # which comes first on the path, and the working directory is outside the project.
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=tmp_path,
        env={"PYTHONPATH": str(site), "PATH": ""},
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    assert Path(done.stdout.strip()).is_relative_to(site)
    with sqlite3.connect(database) as connection:
        tables = {row[0] for row in connection.execute("SELECT name FROM sqlite_master")}
        (version,) = connection.execute("SELECT version_num FROM alembic_version").fetchone()
    assert {"ladders", "ratings", "matches", "participants", "api_keys"} <= tables
    assert {version} == migration_heads()


@pytest.mark.slow
def test_the_wheel_holds_the_console_pages_and_files(wheel: Path) -> None:
    console = ROOT / "app" / "console"
    files = {
        path.relative_to(ROOT).as_posix()
        for folder in ("templates", "static")
        for path in (console / folder).rglob("*")
        if path.is_file()
    }
    assert {
        "app/console/templates/base.html",
        "app/console/static/console.js",
        "app/console/static/uplot/uPlot.iife.min.js",
        "app/console/static/uplot/LICENSE",
    } <= files
    with zipfile.ZipFile(wheel) as archive:
        packed = set(archive.namelist())
    assert files <= packed, sorted(files - packed)
