"""Import benchmark: a JSON Lines file of matches into a fresh ladder, SQLite and PostgreSQL.

    .venv/bin/python benchmarks/import.py [FILE] [--databases sqlite,postgresql]
        [--algorithm trueskill] [--chunk 10000] [--limit N]
        [--postgres postgresql://postgres@127.0.0.1:5432] [--format table|markdown]

FILE defaults to the Halo 2 free-for-all data (``../shared/data/halo2/free_for_all.jsonl``
from the project root,
60,022 matches); it is research data that is never committed, so when the file is absent
the script says so and exits cleanly. Each database is made fresh (a temporary SQLite file;
a PostgreSQL database created on the server given by ``--postgres`` and dropped after),
migrated with Alembic, given one ladder, and loaded through
``app.services.importer.import_matches`` (what ``ratings import`` runs: parse, chunk, record
through the batch path, commit per chunk). Printed: matches, seconds and matches per
second, parse included, and the importing process's own CPU time (the database server's is
not in it): on a busy shared machine wall time also counts the time the process waited for
a core, so the load average at the start and the end is printed too.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

# benchmarks/http.py would shadow the standard library's ``http``: drop this folder from
# the import path.
_HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]
ROOT = _HERE.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from app.domain.documents.ladders import LadderCreate  # noqa: E402
from app.services import ladders  # noqa: E402
from app.services.importer import DEFAULT_CHUNK, import_matches  # noqa: E402
from app.storage.engine import get_engine, session_factory, upgrade  # noqa: E402
from app.storage.unit_of_work import transactor  # noqa: E402
from benchmarks.databases import fresh_database, print_table  # noqa: E402

#: ``../shared/data`` from the project root.
DEFAULT_FILE = ROOT.parent / "shared" / "data" / "halo2" / "free_for_all.jsonl"
DEFAULT_POSTGRES = "postgresql://postgres@127.0.0.1:5432"


def limited(path: Path, limit: int | None, folder: str) -> Path:
    if limit is None:
        return path
    part = Path(folder) / path.name
    with path.open(encoding="utf-8") as lines, part.open("w", encoding="utf-8") as out:
        for n, line in enumerate(lines):
            if n == limit:
                break
            out.write(line)
    return part


def run(url: str, path: Path, algorithm: str, chunk: int) -> tuple[int, float, float]:
    upgrade(url)
    sessions = session_factory(get_engine(url))
    with sessions() as session:
        ladders.create_ladder(
            session=session,
            body=LadderCreate(id="bench", algorithm=algorithm),
            now=datetime.now(UTC),
        )
        session.commit()
    started, cpu = time.perf_counter(), time.process_time()
    summary = import_matches(
        transact=transactor(sessions), ladder_id="bench", path=path, chunk=chunk
    )
    seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
    assert summary.recorded == summary.read, summary
    return summary.recorded, seconds, cpu


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("file", nargs="?", type=Path, default=DEFAULT_FILE)
    parser.add_argument("--databases", default="sqlite,postgresql")
    parser.add_argument("--algorithm", default="trueskill")
    parser.add_argument("--chunk", type=int, default=DEFAULT_CHUNK)
    parser.add_argument("--limit", type=int, help="only the first N matches of the file")
    parser.add_argument("--postgres", default=DEFAULT_POSTGRES, help="PostgreSQL server URL")
    parser.add_argument("--format", choices=("table", "markdown"), default="table")
    args = parser.parse_args()
    if not args.file.is_file():
        print(f"{args.file}: not found; nothing to measure (the data is not committed)")
        return 0
    rows = []
    load_at_start = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as folder:
        path = limited(args.file, args.limit, folder)
        for kind in args.databases.split(","):
            with fresh_database(kind, args.postgres, "import") as url:
                matches, seconds, cpu = run(url, path, args.algorithm, args.chunk)
            rows.append((kind, args.algorithm, matches, seconds, cpu))
    header = (
        "database",
        "algorithm",
        "matches",
        "seconds",
        "matches/s",
        "import CPU s",
        "matches per CPU s",
    )
    cells = [
        (k, a, f"{m:,}", f"{s:.2f}", f"{m / s:,.0f}", f"{c:.2f}", f"{m / c:,.0f}")
        for k, a, m, s, c in rows
    ]
    print_table(header, cells, args.format)
    # Wall time on a shared machine hangs on the load; the CPU columns much less.
    print(
        f"\n{os.cpu_count()} cores, load average (1 min) {load_at_start:.1f} at the start, "
        f"{os.getloadavg()[0]:.1f} at the end"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
