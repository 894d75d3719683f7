"""Reads on a real streaming standby, made here: a PostgreSQL primary of its own
(``initdb``) and a hot standby copied from it with ``pg_basebackup``, both run by the
``postgres`` user on free ports and removed after. The service writes to the primary and
reads from the standby (``RATINGS_READ_DATABASE_URL``).

- A read sent with a write's ``Ratings-Consistency-Token`` sees that write, whichever
  worker takes it, while other clients write all the time; the same read without it, from
  a standby that applies each commit 400 ms after it arrives, mostly does not.
- With the primary stopped, reads go on from the standby, writes are refused with 503 at
  once, and they succeed again once it is back, without a restart of the service.
"""

from __future__ import annotations

import glob
import os
import shlex
import shutil
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import psycopg
import pytest

from app.services import auth
from app.storage.engine import dispose_engines, get_engine, session_factory, upgrade
from tests.reliability.conftest import Server, create_ladder, free_port, report

BINARIES = sorted(glob.glob("/usr/lib/postgresql/*/bin"))

pytestmark = [
    pytest.mark.postgres,
    pytest.mark.skipif(
        os.environ.get("RATINGS_TEST_POSTGRES_URL") is None or not BINARIES,
        reason="needs PostgreSQL's server programs (initdb, pg_basebackup)",
    ),
    pytest.mark.skipif(shutil.which("su") is None, reason="runs PostgreSQL as postgres"),
]

LADDER = "/v1/ladders/replicated"

#: Rounds of write-then-read of one player.
ROUNDS = 20

#: How long the standby holds each commit before it applies it, in milliseconds.
APPLY_DELAY_MS = 400


def _as_postgres(*command: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["su", "postgres", "-c", shlex.join(command)],
        capture_output=True,
        text=True,
        check=check,
        timeout=120,
    )


@dataclass
class Cluster:
    folder: Path
    port: int

    @property
    def data(self) -> str:
        return str(self.folder / "data")

    def url(self, database: str = "ratings") -> str:
        return f"postgresql+psycopg://postgres@127.0.0.1:{self.port}/{database}"

    def start(self) -> None:
        _as_postgres(
            f"{BINARIES[-1]}/pg_ctl",
            "-D",
            self.data,
            "-l",
            str(self.folder / "server.log"),
            "-o",
            f"-p {self.port} -k {self.folder} -c listen_addresses=127.0.0.1",
            "-w",
            "start",
        )

    def stop(self, mode: str = "fast") -> None:
        _as_postgres(
            f"{BINARIES[-1]}/pg_ctl", "-D", self.data, "-m", mode, "-w", "stop", check=False
        )


@dataclass
class Pair:
    primary: Cluster
    standby: Cluster
    key: str


def _folder(name: str) -> Path:
    folder = Path(tempfile.mkdtemp(prefix=f"ratings-{name}-"))
    shutil.chown(folder, "postgres")
    folder.chmod(0o700)
    return folder


@pytest.fixture(scope="module")
def pair() -> Iterator[Pair]:
    """A primary with the service's schema and a key, and its streaming standby."""
    primary = Cluster(_folder("primary"), free_port())
    standby = Cluster(_folder("standby"), free_port())
    try:
        _as_postgres(
            f"{BINARIES[-1]}/initdb", "-D", primary.data, "-U", "postgres", "--auth=trust", "-N"
        )
        primary.start()
        with psycopg.connect(primary.url("postgres").replace("+psycopg", ""), autocommit=True) as c:
            c.execute("CREATE DATABASE ratings")
        upgrade(primary.url())
        with session_factory(get_engine(primary.url()))() as session:
            key = auth.create_key(session, name="replicated", scope="admin").key
            session.commit()
        dispose_engines()
        _as_postgres(
            f"{BINARIES[-1]}/pg_basebackup",
            "-h",
            "127.0.0.1",
            "-p",
            str(primary.port),
            "-U",
            "postgres",
            "-D",
            standby.data,
            "-R",  # standby.signal and the primary's address: a streaming standby
            "-X",
            "stream",
            "-c",
            "fast",  # a checkpoint now, not at the next scheduled one
        )
        # The standby applies each commit a moment after it arrives: a replay as far
        # behind as a busy replica's, on a machine where it would otherwise keep up.
        with open(Path(standby.data) / "postgresql.auto.conf", "a", encoding="utf-8") as conf:
            conf.write(f"recovery_min_apply_delay = '{APPLY_DELAY_MS}ms'\n")
        standby.start()
        yield Pair(primary, standby, key)
    finally:
        dispose_engines()
        for cluster in (standby, primary):
            cluster.stop("immediate")
            shutil.rmtree(cluster.folder, ignore_errors=True)


@pytest.fixture
def served(pair: Pair) -> Iterator[Server]:
    server = Server(
        pair.primary.url(),
        pair.key,
        workers=2,
        RATINGS_READ_DATABASE_URL=pair.standby.url(),
        RATINGS_CONNECT_TIMEOUT_S="2",
        # Longer than the standby's delay: a read with a token waits for it there.
        RATINGS_CONSISTENCY_WAIT_MS="1500",
    )
    server.start()
    try:
        yield server
    finally:
        server.stop()


def _write_all_the_time(server: Server, stop: threading.Event, errors: list[str]) -> None:
    with server.client() as http:
        n = 0
        while not stop.is_set():
            n += 1
            answer = http.post(f"{LADDER}/matches", json={"teams": [[f"a{n % 50}"], [f"b{n}"]]})
            if answer.status_code != 201:
                errors.append(f"{answer.status_code}: {answer.text[:200]}")


def test_a_read_with_a_writes_token_sees_it(served: Server) -> None:
    with served.client() as writer:
        create_ladder(writer, "replicated")
    stop = threading.Event()
    errors: list[str] = []
    load = [
        threading.Thread(target=_write_all_the_time, args=(served, stop, errors), daemon=True)
        for _ in range(2)
    ]
    for thread in load:
        thread.start()
    stale_without = 0
    where: dict[str, int] = {}
    try:
        with served.client() as writer:
            for n in range(1, ROUNDS + 1):
                written = writer.post(f"{LADDER}/matches", json={"teams": [["hero"], [f"x{n}"]]})
                assert written.status_code == 201, written.text
                token = written.headers["ratings-consistency-token"]
                # New connections: the kernel hands each to either worker.
                with served.client() as reader:
                    plain = reader.get(f"{LADDER}/players/hero")
                with served.client() as reader:
                    fresh = reader.get(
                        f"{LADDER}/players/hero", headers={"Ratings-Consistency-Token": token}
                    )
                assert plain.headers["ratings-read-from"] == "replica"
                stale_without += plain.status_code != 200 or plain.json()["matches"] != n
                assert fresh.status_code == 200, fresh.text
                assert fresh.json()["matches"] == n, (n, fresh.headers)
                where[fresh.headers["ratings-read-from"]] = (
                    where.get(fresh.headers["ratings-read-from"], 0) + 1
                )
    finally:
        stop.set()
        for thread in load:
            thread.join(timeout=30)
    assert not errors, errors[:5]
    report("replica_tokens", rounds=ROUNDS, stale_without_token=stale_without, **where)
    # Without the token the same reads, from the standby, lag behind the writes (how
    # often depends on how long a round takes on a loaded machine).
    assert stale_without >= ROUNDS // 4, stale_without
    # A token that is no log position is refused, not ignored.
    with served.client() as reader:
        refused = reader.get(
            f"{LADDER}/players/hero", headers={"Ratings-Consistency-Token": "yesterday"}
        )
    assert refused.status_code == 422, refused.text


def test_reads_go_on_while_the_primary_is_down(pair: Pair, served: Server) -> None:
    with served.client() as http:
        create_ladder(http, "down")
        written = http.post("/v1/ladders/down/matches", json={"teams": [["p"], ["q"]]})
        assert written.status_code == 201, written.text
        token = {"Ratings-Consistency-Token": written.headers["ratings-consistency-token"]}
        deadline = time.monotonic() + 10
        while True:  # until the standby has replayed it: then it answers the token
            read = http.get("/v1/ladders/down/players/p", headers=token)
            assert read.status_code == 200, read.text
            if read.headers["ratings-read-from"] == "replica":
                break
            assert time.monotonic() < deadline, "the standby never replayed the write"
        pair.primary.stop()
        try:
            for path in ("/v1/ladders/down/players/p", "/v1/ladders/down/leaderboard"):
                read = http.get(path)
                assert read.status_code == 200, (path, read.text)
                assert read.headers["ratings-read-from"] == "replica"
            assert http.get("/v1/ladders/down/players/p", headers=token).status_code == 200
            started = time.monotonic()
            refused = http.post("/v1/ladders/down/matches", json={"teams": [["p"], ["r"]]})
            refused_after = time.monotonic() - started
            assert refused.status_code == 503, refused.text
            assert "retry-after" in refused.headers
            assert refused_after < 5.0, refused_after
        finally:
            pair.primary.start()
        deadline = time.monotonic() + 30
        while True:
            again = http.post("/v1/ladders/down/matches", json={"teams": [["p"], ["s"]]})
            if again.status_code == 201 or time.monotonic() > deadline:
                break
            assert again.status_code == 503, again.text
            time.sleep(0.2)
        assert again.status_code == 201, again.text
    report("replica_primary_down", refused_after_s=round(refused_after, 3))
