#!/bin/sh
# The primary's first start (docker-entrypoint-initdb.d): a role the standby streams the
# log with, allowed to connect for replication from the compose network.
set -eu
psql -v ON_ERROR_STOP=1 --username "$POSTGRES_USER" --dbname "$POSTGRES_DB" <<SQL
CREATE ROLE replicator WITH REPLICATION LOGIN PASSWORD '${RATINGS_REPLICATION_PASSWORD}';
SQL
echo "host replication replicator all scram-sha-256" >> "$PGDATA/pg_hba.conf"
