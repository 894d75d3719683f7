"""Placement: ``ladders.placement_matches`` (a player with fewer counted matches in the
current season is provisional) and ``ratings.season_base``, a player's counted matches
before the current season, so that the season's own are ``matches - season_base``
without counting them at every read. Opening a season sets it to ``matches``; recording
leaves it alone; a re-rating sets it again.

The rating buckets and blocks of a ladder with placement count its placed players only,
so that a rank counts the ranked players as fast as it counts every player: the triggers
of migration 0016 count a row only where ``matches - season_base >= placement_matches``
(every row of a ladder without placement, so nothing is counted again here). A player
who places, or a season opening that sends every player back to placing, moves in or out
of the counts through the same triggers; a change of ``placement_matches`` counts the
ladder again (``app.storage.blocks.recount``).

Revision ID: 0023
Revises: 0022
Create Date: 2026-11-27 18:00:00.000000
"""

from __future__ import annotations

import importlib.util
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType

import sqlalchemy as sa
from alembic import op

revision: str = "0023"
down_revision: str | None = "0022"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

#: The ratings of ladders past their first season: the counted matches before the current
#: season's first seq.
_BACKFILL = """
UPDATE ratings SET season_base = (
    SELECT count(*) FROM participants AS p JOIN matches AS m ON m.seq = p.match_seq
    WHERE p.ladder_id = ratings.ladder_id AND p.player_id = ratings.player_id
      AND m.voided_at IS NULL
      AND p.match_seq < (SELECT max(s.first_seq) FROM seasons AS s
                         WHERE s.ladder_id = ratings.ladder_id)
)
WHERE ladder_id IN (SELECT ladder_id FROM seasons WHERE ordinal > 1)
"""


def _blocks_migration() -> ModuleType:
    """Migration 0016, whose trigger definitions this one extends."""
    path = Path(__file__).with_name("2026_11_24_0016_rating_blocks.py")
    spec = importlib.util.spec_from_file_location("rating_blocks_0016", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _triggers(placed: bool) -> None:
    blocks = _blocks_migration()
    if op.get_bind().dialect.name == "postgresql":
        # The statement triggers call these functions by name: replaced in place.
        for statement in blocks._postgres_functions(placed=placed):
            op.execute(statement)
        return
    for statement in blocks._buckets_migration().SQLITE_DROPS:
        op.execute(statement)
    for statement in blocks._sqlite_triggers(placed=placed):
        op.execute(statement)


def upgrade() -> None:
    # Plain ALTER TABLEs (in place on SQLite): a batch copy would drop the rating triggers.
    op.add_column(
        "ladders",
        sa.Column("placement_matches", sa.Integer(), server_default="0", nullable=False),
    )
    op.add_column(
        "ratings", sa.Column("season_base", sa.Integer(), server_default="0", nullable=False)
    )
    op.execute(_BACKFILL)
    _triggers(placed=True)
    # The match counts join the leaderboard index after its order, so that a rank of
    # placed players (and a page with min_matches) reads the index alone.
    op.drop_index("ix_ratings_leaderboard", table_name="ratings")
    _leaderboard_index("matches", "season_base")


def _leaderboard_index(*extra: str) -> None:
    op.create_index(
        "ix_ratings_leaderboard",
        "ratings",
        ["ladder_id", sa.literal_column("conservative DESC"), "player_id", *extra],
    )


def downgrade() -> None:
    op.drop_index("ix_ratings_leaderboard", table_name="ratings")
    _leaderboard_index()
    _triggers(placed=False)
    op.drop_column("ratings", "season_base")
    op.drop_column("ladders", "placement_matches")
