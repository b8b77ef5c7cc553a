#!/usr/bin/env bash
# The schema-driven fuzzer against a real `sluice serve`, as CI runs it:
# schemathesis (pinned in requirements.txt, in a virtualenv made once under the
# target directory) reads the server's /openapi.json and sends what it
# generates from it, valid requests and invalid ones (--mode all), to every
# route: named queries on PostgreSQL and SQLite with parameters of every
# declared type, their batches, POST /sql, an upload table, /health, /metrics.
# Every check is on (schemathesis.toml says where two do not apply, and why): no 5xx but the documented 503 and 504, every status,
# content type, header and JSON body as the document says, invalid input
# refused and valid input accepted, the token enforced; a request that takes
# longer than request-timeout fails the run too. Then a client generated from
# the document by openapi-python-client calls a named query, a batch and
# POST /sql (generated_client.py).
#
# The server is the debug binary `cargo test --workspace` built (SLUICE_BIN to
# choose another); PostgreSQL is SLUICE_TEST_PG_URL, else the test kit's
# throwaway server. Each run works in a schema and a login of its own, dropped
# on exit.
#
#   bash crates/sluice-server/tests/schemathesis/run.sh [schemathesis run options…]
#
# EXAMPLES (default 25) is the number of test cases per operation and phase;
# bench/fuzz_http.sh runs many more.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/../../../.."

target=${CARGO_TARGET_DIR:-target}
SLUICE_BIN=${SLUICE_BIN:-$target/debug/sluice}
[[ -x $SLUICE_BIN ]] || { echo "schemathesis: no sluice binary at $SLUICE_BIN: run cargo test --workspace --no-run first" >&2; exit 1; }
command -v psql >/dev/null || { echo "schemathesis: psql is missing (apt-get install postgresql-client)" >&2; exit 1; }
EXAMPLES=${EXAMPLES:-25}

requirements=$here/requirements.txt
venv="$target/schemathesis-venv-$(sha256sum "$requirements" | cut -c1-16)"
if ! [[ -f $venv/.sluice-ready ]]; then
  echo "schemathesis: making $venv"
  rm -rf "$venv"
  python3 -m venv "$venv" || { echo "schemathesis: python3 -m venv failed (apt-get install python3-venv)" >&2; exit 1; }
  "$venv/bin/pip" install -q --disable-pip-version-check -r "$requirements"
  touch "$venv/.sluice-ready"
fi

work=$(mktemp -d)
server_pid=
schema="schemathesis_$$"
login="schemathesis_sql_$$"
cleanup() {
  [[ -n $server_pid ]] && kill "$server_pid" 2>/dev/null && wait "$server_pid" 2>/dev/null
  if [[ -n ${SLUICE_TEST_PG_URL:-} ]]; then
    psql "$SLUICE_TEST_PG_URL" -X -q -c "drop schema if exists \"$schema\" cascade" \
      -c "drop role if exists \"$login\"" >/dev/null 2>&1 || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT

# Without a server named, the test kit's throwaway PostgreSQL, which stops when
# this script ends and closes its standard input.
if [[ -z ${SLUICE_TEST_PG_URL:-} ]]; then
  servers="$target/debug/sluice-test-servers"
  [[ -x $servers ]] || { echo "schemathesis: no $servers: run cargo test --workspace --no-run first" >&2; exit 1; }
  coproc SERVERS { exec "$servers"; }
  read -r -t 300 line <&"${SERVERS[0]}" || { echo "schemathesis: the test servers did not start" >&2; exit 1; }
  [[ $line =~ ^export\ SLUICE_TEST_PG_URL=\'[^\']*\'$ ]] || { echo "schemathesis: unexpected: $line" >&2; exit 1; }
  eval "$line"
fi
pg_url=$SLUICE_TEST_PG_URL

psql "$pg_url" -X -q -v ON_ERROR_STOP=1 -v schema="$schema" -v login="$login" -f "$here/fixture.sql" >/dev/null
# The same server as the login of POST /sql: no password (the test servers trust
# local connections), the fixture's schema first on its path.
sql_url=$("$venv/bin/python" - "$pg_url" "$login" "$schema" <<'PY'
import sys, urllib.parse as up
url, login, schema = sys.argv[1:]
parts = up.urlsplit(url)
host = parts.hostname + (f":{parts.port}" if parts.port else "")
query = up.parse_qsl(parts.query)
query.append(("options", f"-csearch_path={schema}"))
print(up.urlunsplit((parts.scheme, f"{login}@{host}", parts.path, up.urlencode(query), "")))
PY
)
pg_schema_url=$("$venv/bin/python" - "$pg_url" "$schema" <<'PY'
import sys, urllib.parse as up
url, schema = sys.argv[1:]
parts = up.urlsplit(url)
query = up.parse_qsl(parts.query)
query.append(("options", f"-csearch_path={schema}"))
print(up.urlunsplit((parts.scheme, parts.netloc, parts.path, up.urlencode(query), "")))
PY
)

"$venv/bin/python" - "$work/demo.sqlite" <<'PY'
import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
db.executescript("""
create table cities (id integer primary key, name text not null, population integer, founded date, area real);
""")
db.executemany("insert into cities values (?, ?, ?, ?, ?)",
               [(n, f"city {n}", n * 1000, f"{1000 + n}-01-01", n * 1.5) for n in range(1, 201)])
db.commit()
PY

token=schemathesis-token-$$
cat >"$work/sluice.toml" <<TOML
[server]
listen = "127.0.0.1:0"

[databases.main]
url = "$pg_schema_url"
pool_size = 4
pool_wait = "5s"

[databases.adhoc]
url = "$sql_url"
pool_size = 2

[databases.lite]
url = "sqlite://$work/demo.sqlite"
pool_size = 2

[queries.account]
description = "One account by id"
database = "main"
sql = "select * from accounts where id = \$1"
params = [{ name = "id", type = "bigint", required = true }]

[queries.accounts_since]
description = "Accounts updated since a moment, of a minimum balance"
database = "main"
sql = "select * from accounts where updated_at >= \$1 and balance >= \$2 and active = \$3 order by id limit least(greatest(\$4, 0), 100)"
params = [
  { name = "since", type = "timestamptz", required = true },
  { name = "min_balance", type = "numeric", default = "0" },
  { name = "active", type = "bool", default = "true" },
  { name = "limit", type = "int", default = "50" },
]
max_rows = 100

[queries.by_owner]
database = "main"
sql = "select id, owner, opened, score, tag, settings from accounts where owner = \$1 or tag = \$2 or opened = \$3 or settings @> \$4 or score < \$5"
params = [
  { name = "owner", type = "text", required = true },
  { name = "tag", type = "uuid", default = "00000000-0000-0000-0000-000000000000" },
  { name = "opened", type = "date", default = "2024-01-02" },
  { name = "settings", type = "json", default = "{}" },
  { name = "score", type = "float", default = "0" },
]

[queries.kinds]
description = "A value of every kind, and NULL in each"
database = "main"
sql = "select * from kinds order by id"

[queries.cities]
description = "Cities of at least a population (SQLite)"
database = "lite"
sql = "select * from cities where population >= ?1 and name <> ?2 order by id"
params = [
  { name = "population", type = "bigint", default = "0" },
  { name = "not_named", type = "text", default = "" },
]

[sql]
database = "adhoc"
statement_timeout = "5s"

[tables.uploads]
database = "main"
table = "uploads"
max_line_bytes = "64KiB"

[[tokens]]
name = "fuzzer"
token = "$token"
queries = ["*"]
scopes = ["sql", "write"]
TOML

"$SLUICE_BIN" serve --config "$work/sluice.toml" >"$work/server.log" 2>&1 &
server_pid=$!
address=
for _ in $(seq 1 300); do
  address=$(sed -nE 's#.*listening on (http://[0-9.]+:[0-9]+).*#\1#p' "$work/server.log" | head -1)
  [[ -n $address ]] && break
  kill -0 "$server_pid" 2>/dev/null || break
  sleep 0.1
done
if [[ -z $address ]]; then
  echo "schemathesis: sluice serve did not start:" >&2
  cat "$work/server.log" >&2
  exit 1
fi
echo "schemathesis: sluice serve at $address"

# The document must be valid OpenAPI 3.1 before anything is fuzzed from it.
curl -sf "$address/openapi.json" -o "$work/openapi.json" || { echo "schemathesis: GET /openapi.json failed" >&2; exit 1; }
"$venv/bin/python" -m openapi_spec_validator --schema 3.1 "$work/openapi.json" || {
  echo "schemathesis: /openapi.json is not valid OpenAPI 3.1 (openapi-spec-validator, above)" >&2
  exit 1
}

status=0
# One worker: hypothesis parses lambdas' source with ast, which CPython 3.11
# can fail at from two threads ("AST constructor recursion depth mismatch").
SCHEMATHESIS_HOOKS=hooks PYTHONPATH="$here" "$venv/bin/st" --config-file "$here/schemathesis.toml" run "$address/openapi.json" \
  --header "Authorization: Bearer $token" \
  --mode all --phases examples,coverage,fuzzing \
  --max-examples "$EXAMPLES" --seed "${SEED:-20261126}" --workers 1 \
  --no-color "$@" || status=$?
# A client generated from the document must work: openapi-python-client
# writes it, generated_client.py calls a named query, a batch and POST /sql.
if (( status == 0 )); then
  "$venv/bin/openapi-python-client" generate --path "$work/openapi.json" \
    --output-path "$work/sluice_api" --meta none >"$work/generate.log" 2>&1 || {
    cat "$work/generate.log" >&2
    echo "schemathesis: openapi-python-client could not generate a client" >&2
    status=1
  }
fi
if (( status == 0 )); then
  PYTHONPATH="$work" "$venv/bin/python" "$here/generated_client.py" "$address" "$token" || status=$?
fi
if ! kill -0 "$server_pid" 2>/dev/null; then
  echo "schemathesis: the server died; its log:" >&2
  cat "$work/server.log" >&2
  exit 1
fi
if (( status != 0 )); then
  echo "schemathesis: failures above; the server's log, last 40 lines:" >&2
  tail -40 "$work/server.log" >&2
fi
exit "$status"
