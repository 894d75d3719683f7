"""benchmarks/console.py runs end to end on a small ladder and prints its table."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "console.py"


@pytest.mark.slow
def test_the_console_benchmark_prints_a_row_per_case() -> None:
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--players", "2000", "--requests", "5", "--markdown"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert "| case | API p50 ms |" in "\n".join(lines)
    cases = [line.split(" | ")[0].strip("| ") for line in lines if line.startswith("| ")]
    assert cases[-3:] == ["first page", "deep page", "player"]
