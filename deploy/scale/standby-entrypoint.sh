#!/bin/sh
# The standby: on its first start a copy of the primary (pg_basebackup -R writes
# standby.signal and the primary's address), then PostgreSQL as a hot standby that
# streams the primary's log and answers reads.
set -eu
if [ ! -s "$PGDATA/PG_VERSION" ]; then
    until pg_isready -h primary -U "$POSTGRES_USER" -d "$POSTGRES_DB"; do sleep 1; done
    export PGPASSWORD="$RATINGS_REPLICATION_PASSWORD"
    pg_basebackup -h primary -U replicator -D "$PGDATA" -R -X stream -c fast
    chmod 0700 "$PGDATA"
    chown -R postgres:postgres "$PGDATA"
fi
exec docker-entrypoint.sh postgres -c hot_standby=on
