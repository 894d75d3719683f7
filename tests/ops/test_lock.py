"""The lock files agree with pyproject.toml: every dependency is pinned, with hashes, at a
version pyproject.toml allows, and the runtime lock holds the service alone at the same
versions as the full one. When one fails, run scripts/lock."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[2]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
CORE = [Requirement(text) for text in PROJECT["dependencies"]]
EXTRAS = [
    Requirement(text)
    for extra in ("dev", "eval")
    for text in PROJECT["optional-dependencies"][extra]
]


def pins(name: str) -> dict[str, str]:
    """Package name -> pinned version; every pin must carry at least one hash."""
    text = (ROOT / name).read_text(encoding="utf-8")
    found: dict[str, str] = {}
    for entry in re.split(r"\n(?=\S)", text):
        pinned = re.match(r"([A-Za-z0-9._-]+)==(\S+)", entry)
        if pinned is None:
            assert entry.startswith("#"), entry
            continue
        assert "--hash=sha256:" in entry, f"{name}: {pinned[1]} has no hash"
        found[canonicalize_name(pinned[1])] = pinned[2]
    return found


@pytest.mark.parametrize(
    ("lock", "requirements"),
    [("requirements.lock", CORE + EXTRAS), ("requirements-runtime.lock", CORE)],
)
def test_every_dependency_is_pinned_where_pyproject_allows(
    lock: str, requirements: list[Requirement]
) -> None:
    pinned = pins(lock)
    for requirement in requirements:
        version = pinned.get(canonicalize_name(requirement.name))
        assert version is not None, f"{lock} lacks {requirement.name}"
        assert requirement.specifier.contains(version, prereleases=True), (lock, requirement)


def test_the_runtime_lock_is_the_service_alone_at_the_same_versions() -> None:
    full, runtime = pins("requirements.lock"), pins("requirements-runtime.lock")
    assert runtime.items() <= full.items()
    only_extras = {canonicalize_name(r.name) for r in EXTRAS} - {
        canonicalize_name(r.name) for r in CORE
    }
    assert "scipy" in only_extras and "pytest" in only_extras
    assert not only_extras & runtime.keys()
