"""The machine's own stalls, told apart from the service's: the kernel's session groups and a
probe of how long a process that wants to run waits for a core.

Linux's autogroup (``kernel.sched_autogroup_enabled``) shares the processor between
sessions before processes: PostgreSQL's backends run in the database server's session, and
a benchmark's load generator and service in the benchmark's. On a 2-core virtual machine
with the load generator, two workers and PostgreSQL all busy, that was seen to leave a
process of another session (PostgreSQL's backends, or the probe below) unscheduled for up
to 4.6 s, which no closed-loop latency figure survives. :func:`without_session_groups`
turns autogroup off for a run and back on afterwards, and :class:`StallProbe` measures,
beside each timed run, the longest a sleeping process of its own session waited to run
again, so that a table says when a tail is the machine's.
"""

from __future__ import annotations

import contextlib
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

AUTOGROUP = Path("/proc/sys/kernel/sched_autogroup_enabled")

#: Sleeps a millisecond at a time until its deadline, then prints the longest it waited
#: beyond the millisecond, in milliseconds.
PROBE_SOURCE = """\
import sys, time
deadline = time.monotonic() + float(sys.argv[1])
worst, last = 0.0, time.monotonic()
while last < deadline:
    time.sleep(0.001)
    now = time.monotonic()
    worst, last = max(worst, now - last - 0.001), now
print(round(worst * 1000, 1))
"""


def autogroup() -> str:
    """``on``, ``off`` or ``absent`` (a kernel without autogroup, or not Linux)."""
    try:
        return "on" if AUTOGROUP.read_text().strip() == "1" else "off"
    except OSError:
        return "absent"


@contextlib.contextmanager
def without_session_groups(turn_off: bool) -> Iterator[str]:
    """Autogroup turned off for the block when ``turn_off`` and it is on and may be written
    (as root), and restored afterwards; yields the state the block ran with."""
    if not turn_off or autogroup() != "on":
        yield autogroup()
        return
    try:
        AUTOGROUP.write_text("0")
    except OSError as exc:
        print(f"autogroup stays on ({exc.strerror}): stalls may be the machine's", file=sys.stderr)
        yield "on"
        return
    print("autogroup off for this run (restored afterwards)", file=sys.stderr)
    try:
        yield "off"
    finally:
        AUTOGROUP.write_text("1")


class StallProbe:
    """:data:`PROBE_SOURCE` in a session of its own, for ``seconds``: :meth:`worst` is the
    longest it waited to run again, in milliseconds."""

    def __init__(self, seconds: float) -> None:
        self._process = subprocess.Popen(
            [sys.executable, "-c", PROBE_SOURCE, str(seconds)],
            stdout=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )

    def worst(self) -> float:
        out, _ = self._process.communicate(timeout=60)
        return float(out.strip() or "nan")
