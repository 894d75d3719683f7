"""benchmarks/batch.py: every batch it posts is one the service must take, and as large as
the bounds allow."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

from app.config import Settings
from app.domain.documents.matches import MAX_BATCH, MAX_BATCH_SLOTS, MatchBatch

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "batch.py"


@pytest.fixture(scope="module")
def script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("benchmarks_batch", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_each_shape_fills_the_bounds_and_is_valid(script: ModuleType) -> None:
    limit = Settings().max_body_bytes
    for name, shape in script.SHAPES.items():
        body, count = script.batch_body(shape, MAX_BATCH_SLOTS, "t")
        batch = MatchBatch.model_validate_json(body)
        assert len(batch.matches) == count
        slots = sum(len(team) for match in batch.matches for team in match.teams)
        assert slots == count * shape.players <= MAX_BATCH_SLOTS, name
        assert len(body) <= limit, name
        ids = {p for match in batch.matches for team in match.teams for p in team}
        assert {len(p) for p in ids} == {script.ID_LENGTH}, name
        if shape.meta:
            # As many as the body limit lets through: one more would pass it.
            assert len(body) + len(body) // count > limit, name
        else:
            # One more match would pass a bound.
            assert count == MAX_BATCH or slots + shape.players > MAX_BATCH_SLOTS, name
