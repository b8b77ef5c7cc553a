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

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BENCH="$ROOT/bench"
URL=${SLUICE_BENCH_PG_URL:-postgres://postgres@127.0.0.1:5432/test}
ROWS=${ROWS:-1000000}
REPS=${REPS:-3}
CLIENTS=${CLIENTS:-32}
SKIP_BUILD=${SKIP_BUILD:-0}
TARGET_DIR=${CARGO_TARGET_DIR:-$ROOT/target}
SLUICE=${SLUICE_BIN:-$TARGET_DIR/release/sluice}
DATA="$BENCH/data"
RESULTS="$BENCH/results"
DEMO_FILE="$DATA/serve-demo.sqlite"
PG_PORT=${PG_PORT:-18480}
DEMO_PORT=${DEMO_PORT:-18481}

[[ $ROWS =~ ^[1-9][0-9]*$ ]] || { echo "ROWS must be a positive integer" >&2; exit 2; }
[[ $REPS =~ ^[1-9][0-9]*$ ]] || { echo "REPS must be a positive integer" >&2; exit 2; }
for tool in curl psql sqlite3; do
    command -v "$tool" >/dev/null || { echo "$tool is required (apt-get install $tool)" >&2; exit 2; }
done
LOG_PREFIX=serve-bench
# Tool checks, URL masking, log, pg, plain TCP, report helpers.
source "$ROOT/bench/lib/common.sh"

WORK=$(mktemp -d)
SERVER_PID=
cleanup() {
    [[ -n $SERVER_PID ]] && kill "$SERVER_PID" 2>/dev/null && wait "$SERVER_PID" 2>/dev/null
    rm -rf "$WORK"
}
trap cleanup EXIT
mkdir -p "$DATA" "$RESULTS"

have=$(pg -c "select count(*) from payment_events" 2>/dev/null || echo missing)
if [[ $have != "$ROWS" ]]; then
    echo "payment_events has '$have' rows, want $ROWS: run 'ROWS=$ROWS bash bench/run.sh' first" >&2
    exit 2
fi

if [[ $SKIP_BUILD != 1 ]]; then
    log "cargo build --release -p sluice-cli"
    (cd "$ROOT" && cargo build --release -p sluice-cli)
fi
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
    /usr/bin/time -f '%e %M' -o "$WORK/time" "${COMMAND[@]}" >/dev/null
    tail -n 1 "$WORK/time" | cut -d' ' -f1 >>"$WORK/$1.samples"
}
median() { sort -n "$WORK/$1.samples" | awk '{ a[NR] = $1 } END { print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }

# concurrent PORT: CLIENTS curls at once, each to /dev/null; prints wall seconds.
concurrent() {
    local port=$1 start end
    start=$(date +%s.%N)
    for _ in $(seq 1 "$CLIENTS"); do
        curl -sS --fail -o /dev/null "http://127.0.0.1:$port/queries/payment_events" &
    done
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
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f×", a / b }'; }
PSQL=$(median psql); SQLITE=$(median sqlite_csv)
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
        echo "| ${LABEL[$key]} | $(median "$key") | $(ratio "$(median "$key")" "$PSQL") |"
    done
    for key in sqlite_csv sqlite_json demo_ndjson demo_csv; do
        echo "| ${LABEL[$key]} | $(median "$key") | $(ratio "$(median "$key")" "$SQLITE") |"
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
    echo "## Reproduce"
    echo
    echo '```'
    echo "SLUICE_BENCH_PG_URL='$URL_SHOWN' ROWS=$ROWS REPS=$REPS CLIENTS=$CLIENTS bash bench/serve.sh"
    echo '```'
} | tee "$OUT"
log "wrote $OUT"
