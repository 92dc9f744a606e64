#!/bin/sh
# leaseside run jobs/report -- ./report_postgres.sh TEXT
# Writes TEXT to the report only if this holder's token is not stale: the
# fence and the write are one transaction (-1), and a refused fence
# (SQLSTATE LS001) stops psql (exit 3) and rolls the write back.
set -eu
psql "$DATABASE_URL" -X -q -1 -v ON_ERROR_STOP=1 \
	-v lease="$LEASESIDE_LEASE" -v token="$LEASESIDE_TOKEN" -v body="$1" <<'SQL'
SELECT leaseside.fence(:'lease', :'token') AS previous \gset
INSERT INTO report (name, body) VALUES ('daily', :'body')
	ON CONFLICT (name) DO UPDATE SET body = excluded.body;
SQL
