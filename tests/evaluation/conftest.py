"""Small match files written on the fly."""

from __future__ import annotations

import gzip
import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

WriteMatches = Callable[..., Path]


@pytest.fixture
def write_matches(tmp_path: Path) -> WriteMatches:
    """write_matches(bodies, name="m.jsonl") -> path; a name ending in .gz is gzipped."""

    def write(bodies: Sequence[dict[str, Any] | str], name: str = "m.jsonl") -> Path:
        text = "".join((b if isinstance(b, str) else json.dumps(b)) + "\n" for b in bodies)
        path = tmp_path / name
        if name.endswith(".gz"):
            with gzip.open(path, "wt", encoding="utf-8") as f:
                f.write(text)
        else:
            path.write_text(text, encoding="utf-8")
        return path

    return write
