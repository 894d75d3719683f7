"""benchmarks/scheduling.py: the stall probe sees a stall the machine makes, and the kernel's
session groups are turned off only for the block and restored."""

from __future__ import annotations

import math
import os
import signal
import time
from pathlib import Path

import pytest

from benchmarks import scheduling


def test_the_probe_sees_a_process_left_unscheduled() -> None:
    probe = scheduling.StallProbe(1.0)
    time.sleep(0.3)
    os.kill(probe._process.pid, signal.SIGSTOP)  # as a starved process: it cannot run
    time.sleep(0.25)
    os.kill(probe._process.pid, signal.SIGCONT)
    assert probe.worst() >= 240


def test_a_quiet_probe_reports_its_longest_wait() -> None:
    worst = scheduling.StallProbe(0.2).worst()
    assert math.isfinite(worst) and worst >= 0


@pytest.fixture
def setting(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The kernel's switch, as a file the test owns, on."""
    switch = tmp_path / "sched_autogroup_enabled"
    switch.write_text("1\n")
    monkeypatch.setattr(scheduling, "AUTOGROUP", switch)
    return switch


def test_session_groups_are_off_only_inside(setting: Path) -> None:
    with scheduling.without_session_groups(True) as state:
        assert state == "off"
        assert scheduling.autogroup() == "off"
    assert scheduling.autogroup() == "on"
    with scheduling.without_session_groups(False) as state:
        assert state == "on"
    setting.unlink()
    with scheduling.without_session_groups(True) as state:
        assert state == "absent"


def test_session_groups_are_restored_after_a_failure(setting: Path) -> None:
    with pytest.raises(RuntimeError), scheduling.without_session_groups(True):
        raise RuntimeError("the run failed")
    assert scheduling.autogroup() == "on"
