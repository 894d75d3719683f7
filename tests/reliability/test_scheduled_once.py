"""Scheduled work runs once across instances, and a killed instance's share is taken over:
two servers on one PostgreSQL database, a season scheduled on a ladder of 1,500 players.
The first server's worker opens it and is killed (SIGKILL) in the middle of a step of the
opening; the second server, whose clock had found the opening held, takes the rest over
once the killed worker's lease has run out, and every player is reset exactly once."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from sqlalchemy import text

from app.storage.engine import get_engine
from tests.reliability import faults
from tests.reliability.conftest import Server, create_ladder

pytestmark = pytest.mark.postgres

#: Players of the ladder: more than one step of an opening (its first is 1,000).
PLAYERS = 1_500

#: The lease the servers hold an opening by, in seconds (60 by default).
LEASE_S = 2


def _fill(http: object, players: int) -> None:
    matches = [
        {"match_id": f"m{n}", "teams": [[f"p{2 * n}"], [f"p{2 * n + 1}"]]}
        for n in range(players // 2)
    ]
    for start in range(0, len(matches), 500):
        answer = http.post(  # type: ignore[attr-defined]
            "/v1/ladders/ranked/matches/batch", json={"matches": matches[start : start + 500]}
        )
        assert answer.status_code == 201, answer.text


def _opened(url: str) -> bool:
    """Whether season "two" of the ladder is open and its opening done."""
    with get_engine(url).connect() as connection:
        return bool(
            connection.scalar(
                text(
                    "SELECT count(*) FROM seasons WHERE ladder_id = 'ranked' AND id = 'two'"
                    " AND NOT EXISTS (SELECT 1 FROM season_openings WHERE ladder_id = 'ranked')"
                )
            )
        )


def test_a_killed_instances_opening_is_taken_over_and_done_once(
    database_url: str, admin_key: str, tmp_path: Path
) -> None:
    if not database_url.startswith("postgresql"):
        pytest.skip("instances share a PostgreSQL database")
    signal = tmp_path / "paused"
    clocks = {
        "RATINGS_SEASON_CLOCK_S": "0.2",
        "RATINGS_SCHEDULED_LEASE_S": str(LEASE_S),
    }
    first = Server(
        database_url,
        admin_key,
        RATINGS_FAULT_HOOK=faults.PAUSE_IN_OPENING,
        RATINGS_FAULT_SIGNAL=str(signal),
        **clocks,
    )
    second = Server(database_url, admin_key, **clocks)
    first.start(tmp_path / "first.log")
    try:
        with first.client() as http:
            create_ladder(http, "ranked")
            _fill(http, PLAYERS)
            starts = datetime.now(UTC) + timedelta(seconds=1)
            scheduled = http.post(
                "/v1/ladders/ranked/seasons",
                json={"id": "two", "keep": 0.5, "starts_at": starts.isoformat()},
            )
            assert scheduled.status_code == 201, scheduled.text
        deadline = time.monotonic() + 30
        while not signal.exists():  # the first step of the opening, about to commit
            assert time.monotonic() < deadline, "the opening never reached its first step"
            time.sleep(0.05)
        second.start(tmp_path / "second.log")
        time.sleep(0.5)  # the second's clock finds the opening, held by the first
        first.kill()
        deadline = time.monotonic() + 60
        while not _opened(database_url):
            assert time.monotonic() < deadline, "the opening was never finished"
            time.sleep(0.2)
    finally:
        first.kill()
        second.stop()
    # The first's step died with it (nothing of it committed), so every reset below is
    # the second's, made after the kill.
    with get_engine(database_url).connect() as connection:
        resets = connection.execute(
            text(
                "SELECT player_id, count(*) FROM rating_history"
                " WHERE ladder_id = 'ranked' AND reset GROUP BY player_id"
            )
        ).all()
        opened = connection.scalar(
            text("SELECT count(*) FROM seasons WHERE ladder_id = 'ranked' AND id = 'two'")
        )
    assert opened == 1
    assert len(resets) == PLAYERS
    assert {count for _, count in resets} == {1}
