"""Participants as players only: who played which match, and nothing the request repeats.

``participants`` kept each player's team, place in the team, rank and weight, which the
match's canonical request (teams, ranks or scores, weights) and its result document hold
too. Nothing read them: a player's matches are found by (ladder, player, match) alone, by
the index ``ix_participants_player``, and everything else reads the request or the
document. Dropping them takes 20 more bytes off every participant row on PostgreSQL (a
few on SQLite, which stores small integers in a byte or two).

Downgrading puts them back from the result documents, which list each team (its rank) and
each of its players (weight) in the request's order.

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-21 18:30:00.000000
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from alembic import op

revision: str = "0008"
down_revision: str | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

COLUMNS = {"team": sa.Integer, "position": sa.Integer, "rank": sa.Integer, "weight": sa.Float}

#: Result documents read at a time.
CHUNK = 1000


def upgrade() -> None:
    # SQLite: the table is copied without the columns (participants is no table's parent).
    with op.batch_alter_table("participants") as batch:
        batch.drop_constraint(op.f("ck_participants_weight_range"), type_="check")
        for name in COLUMNS:
            batch.drop_column(name)


def _from_documents(connection: sa.Connection) -> None:
    """Each participant's team, place, rank and weight, from its match's document."""
    select = sa.text("SELECT seq, result FROM matches WHERE seq > :after ORDER BY seq LIMIT :n")
    update = sa.text(
        "UPDATE participants SET team = :team, position = :position, rank = :rank, "
        "weight = :weight WHERE match_seq = :seq AND player_id = :player_id"
    )
    after = 0
    while True:
        matches = connection.execute(select, {"after": after, "n": CHUNK}).all()
        if not matches:
            return
        rows: list[dict[str, Any]] = []
        for seq, result in matches:
            for team, entry in enumerate(json.loads(result)["teams"]):
                for position, player in enumerate(entry["players"]):
                    rows.append(
                        {
                            "seq": seq,
                            "player_id": player["player_id"],
                            "team": team,
                            "position": position,
                            "rank": entry["rank"],
                            "weight": player["weight"],
                        }
                    )
        connection.execute(update, rows)
        after = matches[-1][0]


def downgrade() -> None:
    with op.batch_alter_table("participants") as batch:
        for name, kind in COLUMNS.items():
            batch.add_column(sa.Column(name, kind(), nullable=True))
    _from_documents(op.get_bind())
    with op.batch_alter_table("participants") as batch:
        for name, kind in COLUMNS.items():
            batch.alter_column(name, existing_type=kind(), nullable=False)
        batch.create_check_constraint(
            op.f("ck_participants_weight_range"), "weight >= 0 AND weight <= 1"
        )
