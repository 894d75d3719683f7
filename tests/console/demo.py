"""A demo database for the console and a served service on it: what the browser tests
drive and ``scripts/console_screenshots.py`` photographs.

The matches are simulated (each player has a hidden skill; a match is won by the better
performance of the day, drawn when the two are close) and recorded through the API, so
every rating, history entry, prediction and quality is the service's own.
"""

from __future__ import annotations

import os
import random
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx

from app.config import get_settings
from app.services import auth
from app.storage.engine import dispose_engines, get_engine, session_factory, upgrade

ROOT = Path(__file__).resolve().parents[2]
#: The demo's duel ladder, and the player who played most of its matches.
LADDER = "arena-duel"
VETERAN = "veteran"
#: Matches per batch request.
BATCH = 500


@dataclass(frozen=True, slots=True)
class Demo:
    url: str
    key: str
    players: int
    matches: int
    veteran_matches: int


#: The demo's matches were played over the days before it is made, evenly.
DAYS = 60


def _played_at(n: int, matches: int) -> str:
    start = datetime.now(UTC) - timedelta(days=DAYS)
    moment = start + timedelta(days=DAYS) * (n / matches)
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def _duels(players: int, matches: int, veteran_share: float, seed: int) -> list[dict[str, Any]]:
    rnd = random.Random(seed)
    names = [VETERAN, *(f"player-{n:04d}" for n in range(1, players))]
    skill = {name: rnd.gauss(25.0, 6.0) for name in names}
    skill[VETERAN] = 30.0
    bodies = []
    for n in range(matches):
        if rnd.random() < veteran_share:
            a, b = VETERAN, rnd.choice(names[1:])
        else:
            a, b = rnd.sample(names, 2)
        margin = rnd.gauss(skill[a], 4.0) - rnd.gauss(skill[b], 4.0)
        body: dict[str, Any] = {
            "match_id": f"duel-{n:06d}",
            "teams": [[a], [b]],
            "played_at": _played_at(n, matches),
        }
        if abs(margin) < 1.0:
            body["ranks"] = [1, 1]
        elif margin < 0:
            body["ranks"] = [2, 1]
        bodies.append(body)
    return bodies


def _ffa(players: int, matches: int, seed: int) -> list[dict[str, Any]]:
    rnd = random.Random(seed)
    names = [f"racer-{n:03d}" for n in range(players)]
    skill = {name: rnd.gauss(1500.0, 200.0) for name in names}
    bodies = []
    for n in range(matches):
        field = rnd.sample(names, 6)
        order = sorted(field, key=lambda name: -rnd.gauss(skill[name], 250.0))
        bodies.append(
            {
                "match_id": f"race-{n:05d}",
                "teams": [[name] for name in order],
                "played_at": _played_at(n, matches),
            }
        )
    return bodies


def seed(
    url: str,
    *,
    players: int = 120,
    matches: int = 2_000,
    veteran_share: float = 0.5,
    seed: int = 7,
) -> Demo:
    """Migrate the database at ``url`` and fill it: a TrueSkill duel ladder of ``players``
    and ``matches`` (about ``veteran_share`` of them the veteran's), a small Elo
    free-for-all ladder, and an admin key (returned)."""
    upgrade(url)
    session = session_factory(get_engine(url))()
    try:
        key = auth.create_key(session, name="console-demo", scope="admin").key
        session.commit()
    finally:
        session.close()
    previous = os.environ.get("RATINGS_DATABASE_URL")
    os.environ["RATINGS_DATABASE_URL"] = url
    get_settings.cache_clear()
    try:
        from fastapi.testclient import TestClient

        from app.main import create_app

        with TestClient(create_app()) as client:
            client.headers["Authorization"] = f"Bearer {key}"
            ladders = [
                {"id": LADDER, "algorithm": "trueskill", "description": "Ranked duels"},
                {"id": "league-races", "algorithm": "elo", "description": "Six-player races"},
            ]
            for ladder in ladders:
                assert client.post("/v1/ladders", json=ladder).status_code == 201
            duels = _duels(players, matches, veteran_share, seed)
            for ladder_id, bodies in ((LADDER, duels), ("league-races", _ffa(40, 300, seed))):
                for start in range(0, len(bodies), BATCH):
                    answer = client.post(
                        f"/v1/ladders/{ladder_id}/matches/batch",
                        json={"matches": bodies[start : start + BATCH]},
                    )
                    assert answer.status_code == 201, answer.text
    finally:
        if previous is None:
            os.environ.pop("RATINGS_DATABASE_URL", None)
        else:
            os.environ["RATINGS_DATABASE_URL"] = previous
        get_settings.cache_clear()
        dispose_engines()
    veteran = sum(1 for body in duels if VETERAN in (body["teams"][0][0], body["teams"][1][0]))
    return Demo(url, key, players, matches, veteran)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@contextmanager
def served(url: str, *, require_read_key: bool = False, log: Path | None = None) -> Iterator[str]:
    """The service on ``url`` in a uvicorn process of its own, on a free local port; its
    base URL while the block runs."""
    port = free_port()
    env = {
        **os.environ,
        "RATINGS_DATABASE_URL": url,
        "RATINGS_REQUIRE_READ_KEY": "true" if require_read_key else "false",
    }
    command = [sys.executable, "-m", "uvicorn", "app.main:app", "--port", str(port)]
    out = open(log, "wb") if log is not None else subprocess.DEVNULL  # noqa: SIM115
    process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=out, stderr=out)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                if httpx.get(f"{base}/healthz", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the service did not start (exit {process.poll()})")
            time.sleep(0.1)
        yield base
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        if out is not subprocess.DEVNULL:
            out.close()
