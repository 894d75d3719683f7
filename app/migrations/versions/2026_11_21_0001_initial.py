"""The initial schema: ladders, ratings, matches, participants, rating history, API keys.

CHECK constraints keep every stored rating finite and every sigma > 0 (NULL for Elo);
``ix_ratings_leaderboard`` orders a ladder by conservative rating for keyset paging.

Revision ID: 0001
Revises:
Create Date: 2026-11-21 11:06:04.057223
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op


revision: str = '0001'
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table('api_keys',
    sa.Column('id', sa.Integer(), autoincrement=True, nullable=False),
    sa.Column('name', sa.String(length=128), nullable=False),
    sa.Column('scope', sa.String(length=8), nullable=False),
    sa.Column('prefix', sa.String(length=16), nullable=False),
    sa.Column('key_hash', sa.String(length=64), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('revoked_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('last_used_at', sa.DateTime(timezone=True), nullable=True),
    sa.CheckConstraint("scope IN ('read', 'write', 'admin')", name=op.f('ck_api_keys_scope')),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_api_keys')),
    sa.UniqueConstraint('key_hash', name=op.f('uq_api_keys_key_hash'))
    )
    op.create_table('ladders',
    sa.Column('id', sa.String(length=64), nullable=False),
    sa.Column('algorithm', sa.String(length=16), nullable=False),
    sa.Column('params', sa.JSON(), nullable=False),
    sa.Column('description', sa.Text(), nullable=True),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.CheckConstraint("algorithm IN ('trueskill', 'plackett_luce', 'elo')", name=op.f('ck_ladders_algorithm')),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_ladders'))
    )
    op.create_table('matches',
    sa.Column('seq', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), autoincrement=True, nullable=False),
    sa.Column('ladder_id', sa.String(length=64), nullable=False),
    sa.Column('match_id', sa.String(length=128), nullable=False),
    sa.Column('body_hash', sa.String(length=64), nullable=False),
    sa.Column('played_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('recorded_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('quality', sa.Float(), nullable=True),
    sa.Column('request', sa.JSON(), nullable=False),
    sa.Column('meta', sa.JSON(), nullable=True),
    sa.Column('result', sa.Text(), nullable=False),
    sa.CheckConstraint('quality IS NULL OR (quality >= 0 AND quality <= 1)', name=op.f('ck_matches_quality_range')),
    sa.ForeignKeyConstraint(['ladder_id'], ['ladders.id'], name=op.f('fk_matches_ladder_id_ladders'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('seq', name=op.f('pk_matches')),
    sa.UniqueConstraint('ladder_id', 'match_id', name='uq_matches_ladder_match_id')
    )
    op.create_index('ix_matches_ladder_seq', 'matches', ['ladder_id', 'seq'])

    op.create_table('ratings',
    sa.Column('ladder_id', sa.String(length=64), nullable=False),
    sa.Column('player_id', sa.String(length=128), nullable=False),
    sa.Column('mu', sa.Float(), nullable=False),
    sa.Column('sigma', sa.Float(), nullable=True),
    sa.Column('conservative', sa.Float(), nullable=False),
    sa.Column('matches', sa.Integer(), nullable=False),
    sa.Column('last_played_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('updated_at', sa.DateTime(timezone=True), nullable=False),
    sa.CheckConstraint('conservative BETWEEN -1.0e308 AND 1.0e308', name=op.f('ck_ratings_conservative_finite')),
    sa.CheckConstraint('matches >= 0', name=op.f('ck_ratings_matches_nonnegative')),
    sa.CheckConstraint('mu BETWEEN -1.0e308 AND 1.0e308', name=op.f('ck_ratings_mu_finite')),
    sa.CheckConstraint('sigma IS NULL OR (sigma > 0 AND sigma <= 1.0e308)', name=op.f('ck_ratings_sigma_positive')),
    sa.ForeignKeyConstraint(['ladder_id'], ['ladders.id'], name=op.f('fk_ratings_ladder_id_ladders'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('ladder_id', 'player_id', name=op.f('pk_ratings'))
    )
    op.create_index('ix_ratings_leaderboard', 'ratings', ['ladder_id', sa.literal_column('conservative DESC'), 'player_id'])

    op.create_table('participants',
    sa.Column('match_seq', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), nullable=False),
    sa.Column('player_id', sa.String(length=128), nullable=False),
    sa.Column('ladder_id', sa.String(length=64), nullable=False),
    sa.Column('team', sa.Integer(), nullable=False),
    sa.Column('position', sa.Integer(), nullable=False),
    sa.Column('rank', sa.Integer(), nullable=False),
    sa.Column('weight', sa.Float(), nullable=False),
    sa.Column('mu_before', sa.Float(), nullable=False),
    sa.Column('sigma_before', sa.Float(), nullable=True),
    sa.Column('mu_after', sa.Float(), nullable=False),
    sa.Column('sigma_after', sa.Float(), nullable=True),
    sa.CheckConstraint('(sigma_before IS NULL OR sigma_before > 0) AND (sigma_after IS NULL OR sigma_after > 0)', name=op.f('ck_participants_sigma_positive')),
    sa.CheckConstraint('mu_before BETWEEN -1.0e308 AND 1.0e308 AND mu_after BETWEEN -1.0e308 AND 1.0e308', name=op.f('ck_participants_mu_finite')),
    sa.CheckConstraint('weight >= 0 AND weight <= 1', name=op.f('ck_participants_weight_range')),
    sa.ForeignKeyConstraint(['match_seq'], ['matches.seq'], name=op.f('fk_participants_match_seq_matches'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('match_seq', 'player_id', name=op.f('pk_participants'))
    )
    op.create_index('ix_participants_player', 'participants', ['ladder_id', 'player_id', 'match_seq'])

    op.create_table('rating_history',
    sa.Column('id', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), autoincrement=True, nullable=False),
    sa.Column('ladder_id', sa.String(length=64), nullable=False),
    sa.Column('player_id', sa.String(length=128), nullable=False),
    sa.Column('kind', sa.String(length=16), nullable=False),
    sa.Column('match_seq', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), nullable=True),
    sa.Column('match_id', sa.String(length=128), nullable=True),
    sa.Column('played_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('mu_before', sa.Float(), nullable=False),
    sa.Column('sigma_before', sa.Float(), nullable=True),
    sa.Column('mu_after', sa.Float(), nullable=False),
    sa.Column('sigma_after', sa.Float(), nullable=True),
    sa.CheckConstraint("(kind = 'match') = (match_seq IS NOT NULL)", name=op.f('ck_rating_history_match_kind')),
    sa.CheckConstraint("kind IN ('match', 'adjustment')", name=op.f('ck_rating_history_kind')),
    sa.CheckConstraint('(sigma_before IS NULL OR sigma_before > 0) AND (sigma_after IS NULL OR sigma_after > 0)', name=op.f('ck_rating_history_sigma_positive')),
    sa.CheckConstraint('mu_before BETWEEN -1.0e308 AND 1.0e308 AND mu_after BETWEEN -1.0e308 AND 1.0e308', name=op.f('ck_rating_history_mu_finite')),
    sa.ForeignKeyConstraint(['ladder_id', 'player_id'], ['ratings.ladder_id', 'ratings.player_id'], name='fk_rating_history_player_ratings', ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['match_seq'], ['matches.seq'], name=op.f('fk_rating_history_match_seq_matches'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_rating_history'))
    )
    op.create_index('ix_rating_history_player', 'rating_history', ['ladder_id', 'player_id', 'id'])



def downgrade() -> None:
    op.drop_index('ix_rating_history_player', table_name='rating_history')
    op.drop_table('rating_history')
    op.drop_index('ix_participants_player', table_name='participants')
    op.drop_table('participants')
    op.drop_index('ix_ratings_leaderboard', table_name='ratings')
    op.drop_table('ratings')
    op.drop_index('ix_matches_ladder_seq', table_name='matches')
    op.drop_table('matches')
    op.drop_table('ladders')
    op.drop_table('api_keys')
