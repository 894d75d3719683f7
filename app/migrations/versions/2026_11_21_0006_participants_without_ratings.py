"""Participants without ratings: a match's rating change is kept in its history rows.

``participants`` repeated each player's rating before and after the match (mu and sigma),
which the match's ``rating_history`` rows and its result document hold too. Nothing read
them: a match is answered with its result document, a player's history and every
re-rating read ``rating_history``; re-rating only kept them in step. Dropping them takes
32 bytes off every participant row. (PostgreSQL drops a column without rewriting the
table: rows written before keep their size until it is rewritten, e.g. by VACUUM FULL.)

Downgrading puts them back from the history rows; a voided match has none left, so its
numbers come from its result document, which holds them as they were when it was voided.

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-21 18:10:00.000000
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from alembic import op

revision: str = "0006"
down_revision: str | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

NUMBERS = ("mu_before", "sigma_before", "mu_after", "sigma_after")
MU_FINITE = "mu_before BETWEEN -1.0e308 AND 1.0e308 AND mu_after BETWEEN -1.0e308 AND 1.0e308"
SIGMAS_POSITIVE = (
    "(sigma_before IS NULL OR (sigma_before > 0 AND sigma_before <= 1.0e308)) AND "
    "(sigma_after IS NULL OR (sigma_after > 0 AND sigma_after <= 1.0e308))"
)

#: Result documents read at a time when filling in voided matches.
CHUNK = 1000


def upgrade() -> None:
    # SQLite: the table is copied without the columns (participants is no table's parent).
    with op.batch_alter_table("participants") as batch:
        batch.drop_constraint(op.f("ck_participants_mu_finite"), type_="check")
        batch.drop_constraint(op.f("ck_participants_sigma_positive"), type_="check")
        for column in NUMBERS:
            batch.drop_column(column)


def _from_documents(connection: sa.Connection) -> None:
    """The numbers of participants with no history row, from their matches' documents."""
    seqs = list(
        connection.scalars(
            sa.text("SELECT DISTINCT match_seq FROM participants WHERE mu_before IS NULL")
        )
    )
    update = sa.text(
        "UPDATE participants SET mu_before = :mu_before, sigma_before = :sigma_before, "
        "mu_after = :mu_after, sigma_after = :sigma_after "
        "WHERE match_seq = :seq AND player_id = :player_id"
    )
    select = sa.text("SELECT seq, result FROM matches WHERE seq IN :seqs").bindparams(
        sa.bindparam("seqs", expanding=True)
    )
    for start in range(0, len(seqs), CHUNK):
        rows: list[dict[str, Any]] = []
        for seq, result in connection.execute(select, {"seqs": seqs[start : start + CHUNK]}):
            for team in json.loads(result)["teams"]:
                for player in team["players"]:
                    rows.append(
                        {
                            "seq": seq,
                            "player_id": player["player_id"],
                            "mu_before": player["before"]["mu"],
                            "sigma_before": player["before"]["sigma"],
                            "mu_after": player["after"]["mu"],
                            "sigma_after": player["after"]["sigma"],
                        }
                    )
        if rows:
            connection.execute(update, rows)


def downgrade() -> None:
    with op.batch_alter_table("participants") as batch:
        for column in NUMBERS:
            batch.add_column(sa.Column(column, sa.Float(), nullable=True))
    op.execute(
        "UPDATE participants SET mu_before = h.mu_before, sigma_before = h.sigma_before, "
        "mu_after = h.mu_after, sigma_after = h.sigma_after "
        "FROM rating_history AS h "
        "WHERE h.match_seq = participants.match_seq AND h.player_id = participants.player_id"
    )
    _from_documents(op.get_bind())
    with op.batch_alter_table("participants") as batch:
        batch.alter_column("mu_before", existing_type=sa.Float(), nullable=False)
        batch.alter_column("mu_after", existing_type=sa.Float(), nullable=False)
        batch.create_check_constraint(op.f("ck_participants_mu_finite"), MU_FINITE)
        batch.create_check_constraint(op.f("ck_participants_sigma_positive"), SIGMAS_POSITIVE)
