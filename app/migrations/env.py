"""Alembic environment: the app's metadata, and the URL from -x url, the config or settings."""

from __future__ import annotations

from logging.config import fileConfig

from alembic import context
from sqlalchemy import text

from app.storage.engine import get_engine, normalize_url
from app.storage.models import Base

config = context.config
if config.config_file_name is not None and not config.attributes.get("url"):
    # Only the command line configures logging; app.storage.engine.upgrade() leaves the
    # app's alone.
    fileConfig(config.config_file_name, disable_existing_loggers=False)

target_metadata = Base.metadata

#: The key of the advisory lock a migration holds on PostgreSQL ("ratings:migrate").
MIGRATE_LOCK = 0x7261746D6967


def database_url() -> str:
    url = context.get_x_argument(as_dictionary=True).get("url") or config.attributes.get("url")
    if not url:
        from app.config import get_settings

        url = get_settings().database_url
    return normalize_url(str(url))


def run_migrations_offline() -> None:
    context.configure(
        url=database_url(),
        target_metadata=target_metadata,
        literal_binds=True,
        dialect_opts={"paramstyle": "named"},
    )
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online() -> None:
    # The app's engine: on SQLite its BEGIN IMMEDIATE makes each migration transactional.
    engine = get_engine(database_url())
    with engine.connect() as connection:
        context.configure(
            connection=connection,
            target_metadata=target_metadata,
            render_as_batch=connection.dialect.name == "sqlite",
        )
        with context.begin_transaction():
            if connection.dialect.name == "postgresql":
                # One migrator at a time, whatever the instances that start together: the
                # lock is taken before the schema's revision is read, and held to the
                # commit (a transaction's lock, so a pooler in transaction mode keeps it).
                # The others then read the revision the first committed. SQLite's BEGIN
                # IMMEDIATE holds the whole database already.
                connection.execute(
                    text("SELECT pg_advisory_xact_lock(:key)"), {"key": MIGRATE_LOCK}
                )
            # What this migration starts from, read under the lock, for the caller to say.
            config.attributes["found"] = set(context.get_context().get_current_heads())
            context.run_migrations()


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
