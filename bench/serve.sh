#!/usr/bin/env bash
# bench/serve.sh — HTTP gateway benchmark for `sluice serve`.
#
#     bash bench/serve.sh
#
# Environment (all optional):
#   SLUICE_BENCH_PG_URL  database URL (default postgres://postgres@127.0.0.1:5432/test)
#   ROWS                 rows expected in payment_events (default 1000000)
#   REPS                 timed repetitions (default 3); medians are reported
#   CLIENTS              concurrent clients for the memory run (default 32)
#   SKIP_BUILD=1         do not run `cargo build --release -p sluice-cli`
#   SLUICE_BIN           sluice binary (default <target dir>/release/sluice)
#
# What it measures, through HTTP with curl on loopback, output to /dev/null:
#   1. PostgreSQL: `GET /queries/payment_events` (NDJSON and CSV) against the
#      reference `psql \copy (select * from payment_events) to stdout csv`;
#   2. SQLite (`sluice serve --demo`): the same through HTTP against
#      `sqlite3 -csv` and `sqlite3 -json` on the same file;
#   3. the server's peak RSS (VmHWM) with 1 client, and with CLIENTS clients
#      streaming the whole table at once (a fresh server for each, so each
#      peak is its own), for both databases.
# Every variant runs once untimed first and must produce ROWS rows.
#
# The PostgreSQL table is bench/run.sh's payment_events (same generator):
# run `bash bench/run.sh` once first if it does not exist. The demo file is
# made by the server itself on first start (its creation time is reported).
# Writes a Markdown table to bench/results/serve-<date>.md.

set -euo pipefail

for tool in curl psql sqlite3; do
    command -v "$tool" >/dev/null || { echo "$tool is required (apt-get install $tool)" >&2; exit 2; }
done
LOG_PREFIX=serve-bench
# Shared settings (URL, ROWS, REPS, SKIP_BUILD, SLUICE, ...), scratch WORK,
# log, pg, plain TCP, timing and report helpers.
# shellcheck source=lib/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/common.sh"
CLIENTS=${CLIENTS:-32}
DEMO_FILE="$DATA/serve-demo.sqlite"
PG_PORT=${PG_PORT:-18480}
DEMO_PORT=${DEMO_PORT:-18481}
require_positive_integers ROWS REPS

SERVER_PID=
# shellcheck disable=SC2317  # called on exit by common.sh
stop_background() {
    [[ -n $SERVER_PID ]] && kill "$SERVER_PID" 2>/dev/null && wait "$SERVER_PID" 2>/dev/null
}

have=$(pg -c "select count(*) from payment_events" 2>/dev/null || echo missing)
if [[ $have != "$ROWS" ]]; then
    echo "payment_events has '$have' rows, want $ROWS: run 'ROWS=$ROWS bash bench/run.sh' first" >&2
    exit 2
fi

build_sluice
[[ -x $SLUICE ]] || { echo "no sluice binary at $SLUICE" >&2; exit 2; }

cat >"$WORK/pg.toml" <<EOF
[databases.main]
url = "$URL"
pool_size = $CLIENTS
pool_wait = "30s"

[queries.payment_events]
sql = "select * from payment_events"
EOF

# start_server NAME ARGS...: starts sluice serve, waits for /health.
start_server() {
    local port=$1; shift
    "$SLUICE" serve "$@" --listen "127.0.0.1:$port" 2>>"$WORK/server.log" &
    SERVER_PID=$!
    for _ in $(seq 1 600); do
        curl -sf "http://127.0.0.1:$port/health" >/dev/null 2>&1 && return 0
        kill -0 "$SERVER_PID" 2>/dev/null || { cat "$WORK/server.log" >&2; exit 1; }
        sleep 0.5
    done
    echo "server on port $port did not become healthy" >&2; exit 1
}
stop_server() {
    kill -TERM "$SERVER_PID"; wait "$SERVER_PID" || true; SERVER_PID=
}
peak_rss_mb() { awk '/VmHWM/ { printf "%.1f", $2 / 1024 }' "/proc/$SERVER_PID/status"; }

# Commands by variant key; COMMAND is set by cmd_for.
cmd_for() {
    case $1 in
        psql)       COMMAND=(psql "$URL" -X -c "\\copy (select * from payment_events) to stdout csv") ;;
        pg_ndjson)  COMMAND=(curl -sS --fail "http://127.0.0.1:$PG_PORT/queries/payment_events") ;;
        pg_csv)     COMMAND=(curl -sS --fail "http://127.0.0.1:$PG_PORT/queries/payment_events?format=csv") ;;
        sqlite_csv) COMMAND=(sqlite3 -csv "$DEMO_FILE" "select * from payment_events order by id") ;;
        sqlite_json) COMMAND=(sqlite3 -json "$DEMO_FILE" "select * from payment_events order by id") ;;
        demo_ndjson) COMMAND=(curl -sS --fail "http://127.0.0.1:$DEMO_PORT/queries/payment_events") ;;
        demo_csv)   COMMAND=(curl -sS --fail "http://127.0.0.1:$DEMO_PORT/queries/payment_events?format=csv") ;;
    esac
}
# shellcheck disable=SC2016  # the backticks are Markdown code spans
declare -A LABEL=(
    [psql]='psql `\copy … csv` (reference)'
    [pg_ndjson]='sluice serve → curl, NDJSON'
    [pg_csv]='sluice serve → curl, CSV'
    [sqlite_csv]='sqlite3 -csv (reference)'
    [sqlite_json]='sqlite3 -json'
    [demo_ndjson]='sluice serve --demo → curl, NDJSON'
    [demo_csv]='sluice serve --demo → curl, CSV'
)

# check KEY: one untimed run; the output must hold ROWS rows.
check() {
    cmd_for "$1"
    local lines
    lines=$("${COMMAND[@]}" | wc -l)
    case $1 in
        pg_csv|demo_csv) lines=$((lines - 1)) ;;          # header
        sqlite_json) lines=$((lines)) ;;                   # one object per line, [ and ] on first/last
    esac
    # CSV lines may break inside quoted fields; the generators write none.
    if [[ $1 != sqlite_json && $lines != "$ROWS" ]]; then
        echo "$1 produced $lines rows, want $ROWS" >&2; exit 1
    fi
}
timed() {
    cmd_for "$1"
    timed_run "${COMMAND[@]}"
    echo "$TIME_SAMPLE" >>"$WORK/$1.samples"
}
# median_of KEY: KEY's median wall time.
median_of() { median 1 "$WORK/$1.samples"; }

# concurrent PORT: CLIENTS curls at once, each to /dev/null; prints wall seconds.
concurrent() {
    local port=$1 start end
    start=$(date +%s.%N)
    for _ in $(seq 1 "$CLIENTS"); do
        curl -sS --fail -o /dev/null "http://127.0.0.1:$port/queries/payment_events" &
    done
    # shellcheck disable=SC2046  # one argument per job id
    wait $(jobs -p | grep -v "^$SERVER_PID\$") 2>/dev/null || true
    end=$(date +%s.%N)
    awk -v s="$start" -v e="$end" 'BEGIN { printf "%.2f", e - s }'
}

# ---------------------------------------------------------------- PostgreSQL --
log "PostgreSQL: fresh server, 1 client"
start_server "$PG_PORT" --config "$WORK/pg.toml"
for key in psql pg_ndjson pg_csv; do check "$key"; done
for _ in $(seq 1 "$REPS"); do for key in psql pg_ndjson pg_csv; do timed "$key"; done; done
PG_RSS_1=$(peak_rss_mb)
stop_server
log "PostgreSQL: fresh server, $CLIENTS clients"
start_server "$PG_PORT" --config "$WORK/pg.toml"
PG_WALL_N=$(concurrent "$PG_PORT")
PG_RSS_N=$(peak_rss_mb)
stop_server

# -------------------------------------------------------------------- SQLite --
log "SQLite demo: fresh server (creates $DEMO_FILE on first run), 1 client"
started=$(date +%s.%N)
start_server "$DEMO_PORT" --demo --demo-file "$DEMO_FILE" --demo-rows "$ROWS"
DEMO_START=$(awk -v s="$started" -v e="$(date +%s.%N)" 'BEGIN { printf "%.1f", e - s }')
for key in sqlite_csv sqlite_json demo_ndjson demo_csv; do check "$key"; done
for _ in $(seq 1 "$REPS"); do for key in sqlite_csv sqlite_json demo_ndjson demo_csv; do timed "$key"; done; done
DEMO_RSS_1=$(peak_rss_mb)
stop_server
log "SQLite demo: fresh server, $CLIENTS clients"
start_server "$DEMO_PORT" --demo --demo-file "$DEMO_FILE" --demo-rows "$ROWS"
DEMO_WALL_N=$(concurrent "$DEMO_PORT")
DEMO_RSS_N=$(peak_rss_mb)
stop_server

# ------------------------------------------------------------------- report --
PSQL=$(median_of psql); SQLITE=$(median_of sqlite_csv)
OUT="$RESULTS/serve-$(date +%F).md"
{
    echo "# sluice serve benchmark — $(date +%F)"
    echo
    echo "\`select * from payment_events\` ($ROWS rows) through HTTP with curl on loopback, output to /dev/null."
    echo "Median of $REPS interleaved runs after an untimed run that checks the row count; wall time of the client process."
    echo
    echo "| variant | median s | × reference |"
    echo "| --- | ---: | ---: |"
    for key in psql pg_ndjson pg_csv; do
        echo "| ${LABEL[$key]} | $(median_of "$key") | $(ratio_of "$(median_of "$key")" "$PSQL") |"
    done
    for key in sqlite_csv sqlite_json demo_ndjson demo_csv; do
        echo "| ${LABEL[$key]} | $(median_of "$key") | $(ratio_of "$(median_of "$key")" "$SQLITE") |"
    done
    echo
    echo "Server peak RSS (VmHWM of the \`sluice serve\` process, a fresh process per row):"
    echo
    echo "| database | 1 client (all runs above) | $CLIENTS concurrent clients, whole table each | wall s for the $CLIENTS |"
    echo "| --- | ---: | ---: | ---: |"
    echo "| PostgreSQL | $PG_RSS_1 MB | $PG_RSS_N MB | $PG_WALL_N |"
    echo "| SQLite (demo) | $DEMO_RSS_1 MB | $DEMO_RSS_N MB | $DEMO_WALL_N |"
    echo
    echo "Demo server start: $DEMO_START s (includes creating $DEMO_FILE if it did not exist)."
    echo
    echo "## Machine"
    echo
    echo "- CPUs (nproc): $(nproc) — $(awk -F': ' '/model name/ { print $2; exit }' /proc/cpuinfo)"
    echo "- PostgreSQL: $(pg -c 'show server_version'), at $URL_SHOWN"
    echo "- sqlite3: $(sqlite3 --version | cut -d' ' -f1), curl: $(curl --version | head -n 1 | cut -d' ' -f2)"
    echo "- sluice: $(cd "$ROOT" && git rev-parse --short HEAD 2>/dev/null || echo unknown)$(cd "$ROOT" && git diff --quiet 2>/dev/null || echo ' (with uncommitted changes)')"
    echo
    reproduce_section serve.sh "ROWS=$ROWS REPS=$REPS CLIENTS=$CLIENTS"
} | tee "$OUT"
log "wrote $OUT"
