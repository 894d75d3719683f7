"""``ratings import`` reads and validates the next chunks in a thread of its own while the
current chunk is written: the thread ends with the import however it ends, and what it
meets reaches the writer in file order."""

from __future__ import annotations

import json
import threading
from datetime import UTC, datetime
from pathlib import Path

import pytest
from sqlalchemy import text

from app.domain.documents.ladders import LadderCreate
from app.services import ladders
from app.services.importer import ImportFailed, import_matches
from app.storage.engine import get_engine, session_factory
from app.storage.unit_of_work import transactor
from tests.service.helpers import table_counts


def _readers() -> list[threading.Thread]:
    return [thread for thread in threading.enumerate() if thread.name == "import-reader"]


def _file(tmp_path: Path, count: int, bad_line: int | None = None) -> Path:
    lines = [
        json.dumps({"match_id": f"m{n}", "teams": [[f"p{n}"], [f"p{n + 1}"], [f"p{n + 2}"]]})
        for n in range(1, count + 1)
    ]
    if bad_line is not None:
        lines[bad_line - 1] = '{"teams": [["a"], ["a"]]}'
    path = tmp_path / "matches.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _ladder(url: str) -> None:
    with session_factory(get_engine(url))() as session:
        ladders.create_ladder(
            session=session,
            body=LadderCreate(id="reader", algorithm="trueskill"),
            now=datetime.now(UTC),
        )
        session.commit()


def _matches(url: str) -> int:
    with get_engine(url).connect() as connection:
        return int(connection.scalar(text("SELECT count(*) FROM matches")) or 0)


def test_every_chunk_is_written_and_the_reader_ends(database_url: str, tmp_path: Path) -> None:
    _ladder(database_url)
    summary = import_matches(
        transact=transactor(session_factory(get_engine(database_url))),
        ladder_id="reader",
        path=_file(tmp_path, 95),
        chunk=10,
    )
    assert (summary.read, summary.recorded, summary.skipped) == (95, 95, 0)
    assert _matches(database_url) == 95
    assert _readers() == []


def test_a_bad_line_read_ahead_waits_for_the_chunks_before_it(
    database_url: str, tmp_path: Path
) -> None:
    _ladder(database_url)
    with pytest.raises(ImportFailed, match=r"^line 47: .*\(nothing of lines 41-47 was written\)"):
        import_matches(
            transact=transactor(session_factory(get_engine(database_url))),
            ladder_id="reader",
            path=_file(tmp_path, 95, bad_line=47),
            chunk=10,
        )
    assert _matches(database_url) == 40  # the four chunks before the bad line's own
    assert _readers() == []


def test_a_writer_that_stops_stops_the_reader(database_url: str, tmp_path: Path) -> None:
    before = table_counts(database_url)
    with pytest.raises(ImportFailed, match="no-such-ladder"):
        import_matches(
            transact=transactor(session_factory(get_engine(database_url))),
            ladder_id="no-such-ladder",
            path=_file(tmp_path, 500),
            chunk=10,
        )
    assert table_counts(database_url) == before
    assert _readers() == []
