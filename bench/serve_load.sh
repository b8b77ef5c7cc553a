#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR  # (lint from anywhere: shellcheck -x bench/serve_load.sh)
# bench/serve_load.sh — load figures for `sluice serve` against what a team
# writes by hand instead: FastAPI + asyncpg (bench/serve_load_fastapi.py)
# serving the same two queries, both driven by wrk on loopback.
#
#     bash bench/serve_load.sh
#
# Environment (all optional; see bench/lib/common.sh):
#   SLUICE_BENCH_PG_URL, ROWS (1000000), REPS (3), SKIP_BUILD=1, SLUICE_BIN, PYTHON
#   DURATION      timed seconds per cell (default 10)
#   WARMUP        untimed seconds of the same load before each cell (default 3)
#   LEVELS        concurrent clients, one cell each (default "1 16 64 256")
#   POOL_SIZE     database connections of each server (default 16): sluice's
#                 pool_size; FastAPI: POOL_SIZE / workers per uvicorn worker
#                 (rounded up), since each worker process has its own pool
#   POOL_WAIT     seconds a request waits for a free connection before a 503,
#                 in both servers (default 2, sluice's default pool_wait)
#   WRK_TIMEOUT   seconds after which wrk counts a request as a timeout
#                 (default 30; wrk's own default of 2 s would hide 503s)
#   SEED          seed of the random request parameters (default 42)
#   SLUICE_LOG    sluice's log filter (default warn: requests that did not
#                 complete; info adds a line per completed request)
#   SLUICE_PORT, FASTAPI_PORT  ports on 127.0.0.1 (default 18490, 18491)
#
# The queries, as sluice named queries and as FastAPI routes with the same SQL:
#   short   `select * from payment_events where account_id = $1 order by id
#           limit 10`, a random account per request (the table has ~20 rows
#           per account: 5 to 42; the limit makes it ~10 as the issue asks),
#           served by the index payment_events_account_id_idx, made if missing;
#   stream  `select * from payment_events where id between $1 and $1 + 9999
#           order by id`, 10,000 rows from a random start (the primary key).
# wrk's Lua script draws the parameters from math.random seeded with SEED plus
# the thread number, so both servers get the same sequence of requests.
#
# What it does:
#   1. makes sure payment_events holds ROWS rows (bench/lib/payment_events.sh)
#      and has the account index; installs wrk when missing (as root; else
#      it stops naming the package); builds sluice; makes bench/.venv-serve-load
#      with the pinned peer (fastapi, uvicorn[standard], asyncpg, orjson);
#   2. starts both servers once for the whole run: `sluice serve` with the
#      default worker threads (one per CPU) and SLUICE_LOG=warn (its log of
#      requests that did not complete, without the info line per completed
#      request: uvicorn has no access log either; SLUICE_LOG=info measures it
#      with that log, written to a file), and uvicorn with one worker per CPU,
#      --no-access-log, --loop uvloop, --http httptools;
#   3. checks that both give the same NDJSON for one request of each query
#      (line count, and every row's values parsed; the report says how the
#      spellings differ);
#   4. REPS times, interleaved (sluice first in odd reps, FastAPI first in even
#      ones): for each query and client level, each server gets WARMUP s of
#      untimed load, then DURATION s timed with
#      `wrk -t 2 -c N --latency --timeout WRK_TIMEOUT` (-t 1 for one client);
#      After the two servers' cells of the short query, two references: the
#      same SQL straight from the database, pgbench -M prepared with the same
#      clients (up to POOL_SIZE sessions, as the servers have), threads,
#      random accounts and seed (WARMUP s, then DURATION s with its
#      per-transaction log); and HTTP alone, wrk against sluice's 404 for an
#      unknown path;
#   5. per cell: requests/s (2xx responses only), latency p50/p99/p99.9 (wrk:
#      full response time, closed loop), errors (wrk's connect, read, write,
#      timeout and non-2xx counts; the status codes from sluice's /metrics
#      and from the peer's log), peak RSS of the cell (VmHWM after resetting
#      it with /proc/PID/clear_refs; for uvicorn summed over the master, its
#      workers and multiprocessing's resource tracker) and, for sluice, the
#      largest and the mean `sluice_pool_waiting` seen by scraping /metrics
#      every 0.5 s (sluice exposes only that gauge, no wait counter; it counts
#      requests whose new session is still connecting as waiting too), and
#      the CPU time per 2xx response of the server's processes and of the
#      PostgreSQL backends of its sessions (found through ss and
#      pg_stat_activity's client ports; PostgreSQL on this machine only),
#      over the middle of the timed part, and of wrk (its whole timed run,
#      by /usr/bin/time);
#   6. writes bench/results/serve_load-<date>.md with the medians over REPS
#      (errors summed, RSS and pool waits the largest), the raw runs, the load
#      average, versions and the commands.
#
# Exit status: 0; 1 if the two servers disagree on the data or a server dies.

set -euo pipefail

LOG_PREFIX=serve-load
# shellcheck source=lib/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/common.sh"
# shellcheck source=lib/payment_events.sh
source "$BENCH/lib/payment_events.sh"
DURATION=${DURATION:-10}
WARMUP=${WARMUP:-3}
LEVELS=${LEVELS:-"1 16 64 256"}
POOL_SIZE=${POOL_SIZE:-16}
POOL_WAIT=${POOL_WAIT:-2}
WRK_TIMEOUT=${WRK_TIMEOUT:-30}
SEED=${SEED:-42}
export SLUICE_LOG=${SLUICE_LOG:-warn}
SLUICE_PORT=${SLUICE_PORT:-18490}
FASTAPI_PORT=${FASTAPI_PORT:-18491}
require_positive_integers ROWS REPS DURATION WARMUP POOL_SIZE POOL_WAIT WRK_TIMEOUT SEED SLUICE_PORT FASTAPI_PORT
read -r -a LEVEL_LIST <<<"$LEVELS"
(( ${#LEVEL_LIST[@]} )) || { echo "LEVELS is empty" >&2; exit 2; }
for level in "${LEVEL_LIST[@]}"; do
    [[ $level =~ ^[1-9][0-9]*$ ]] || { echo "LEVELS must be positive integers: '$level'" >&2; exit 2; }
done
LOAD_AVG_START=$(load_average)

command -v curl >/dev/null || { echo "curl is required: apt-get install curl" >&2; exit 2; }
if ! command -v wrk >/dev/null; then
    if [[ $(id -u) == 0 ]] && command -v apt-get >/dev/null; then
        log "installing wrk (apt-get install -y wrk)"
        apt-get install -y -qq wrk >/dev/null || { apt-get update -qq && apt-get install -y -qq wrk >/dev/null; }
    fi
    command -v wrk >/dev/null || { echo "wrk is required: apt-get install wrk (Debian package 'wrk')" >&2; exit 2; }
fi
command -v pgbench >/dev/null || { echo "pgbench is required: apt-get install postgresql (Debian ships it with the server)" >&2; exit 2; }
[[ -x /usr/bin/time ]] || { echo "/usr/bin/time is required: apt-get install time" >&2; exit 2; }

ensure_tables
ensure_account_index
warm_account_reads
build_sluice
[[ -x $SLUICE ]] || { echo "no sluice binary at $SLUICE" >&2; exit 2; }

PEER_VENV="$BENCH/.venv-serve-load"
PEER_PINS=(fastapi==0.163.2 starlette==1.10.0 'uvicorn[standard]==0.54.0' uvloop==0.23.0
           httptools==0.9.0 asyncpg==0.32.0 orjson==3.13.0)
ensure_peer_venv "$PEER_VENV" "fastapi, uvicorn, uvloop, httptools, asyncpg, orjson" "${PEER_PINS[@]}"
UVICORN="$PEER_VENV/bin/uvicorn"

WORKERS=$(nproc)
PEER_POOL=$(( (POOL_SIZE + WORKERS - 1) / WORKERS ))
need=$(( POOL_SIZE + PEER_POOL * WORKERS + 5 ))
MAX_CONNECTIONS=$(pg -c "show max_connections")
(( MAX_CONNECTIONS >= need )) || {
    echo "PostgreSQL max_connections is $MAX_CONNECTIONS; both servers' pools need $need: lower POOL_SIZE" >&2
    exit 2
}

# The request parameters' ranges: every account, and every start with 10,000 rows after it.
read -r ACCOUNT_MIN ACCOUNT_MAX ID_MIN ID_MAX < <(pg -F ' ' -c \
    "select min(account_id), max(account_id), min(id), max(id) from payment_events")
STREAM_ROWS=10000
STREAM_MAX=$(( ID_MAX - STREAM_ROWS + 1 ))
ROWS_PER_ACCOUNT=$(pg -c "select round(count(*)::numeric / count(distinct account_id), 1) from payment_events")
ACCOUNT_SPREAD=$(pg -c "select min(n) || ' to ' || max(n) from (select count(*) n from payment_events group by account_id) s")
# shellcheck disable=SC2016  # $1 is the SQL's parameter
SHORT_SQL='select * from payment_events where account_id = $1 order by id limit 10'
# shellcheck disable=SC2016
STREAM_SQL='select * from payment_events where id between $1 and $1 + 9999 order by id'
QUERIES=(short stream)
SERVERS=(sluice fastapi)
declare -A SERVER_LABEL=([sluice]="sluice serve" [fastapi]="FastAPI + asyncpg")

# ------------------------------------------------------------------ servers --

SLUICE_PID=""
FASTAPI_PID=""
SAMPLER_PID=""
DIRECT_PID=""
# shellcheck disable=SC2317  # called on exit by common.sh
stop_background() {
    local pid
    for pid in "$SAMPLER_PID" "$SLUICE_PID" "$FASTAPI_PID" "$DIRECT_PID"; do
        [[ -n $pid ]] || continue
        kill -TERM "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
    done
    SAMPLER_PID="" SLUICE_PID="" FASTAPI_PID="" DIRECT_PID=""
}

# Plain TCP for both servers, whatever PGSSLMODE says: sluice through
# PLAIN_URL (bench/lib/common.sh); the peer connects with ssl=False
# (bench/serve_load_fastapi.py).
cat >"$WORK/sluice.toml" <<EOF
[databases.main]
url = "$PLAIN_URL"
pool_size = $POOL_SIZE
pool_wait = "${POOL_WAIT}s"

[queries.account_payments]
description = "One account's payments, the first 10"
sql = "$SHORT_SQL"
params = [{ name = "account_id", type = "bigint", required = true }]

[queries.payment_range]
description = "10,000 payments from an id on"
sql = "$STREAM_SQL"
params = [{ name = "start", type = "bigint", required = true }]
EOF

# server_cmd SERVER: its command line in CMD ($URL stays a placeholder for the
# report; the environment the peer needs is in PEER_ENV).
server_cmd() {
    case $1 in
        sluice)  CMD=("$SLUICE" serve --config "$WORK/sluice.toml" --listen "127.0.0.1:$SLUICE_PORT") ;;
        fastapi) CMD=("$UVICORN" serve_load_fastapi:app --app-dir "$BENCH" --host 127.0.0.1
                      --port "$FASTAPI_PORT" --workers "$WORKERS" --no-access-log --loop uvloop
                      --http httptools) ;;
    esac
}
# shellcheck disable=SC2016  # the literal placeholder $URL
PEER_ENV=(SERVE_LOAD_PG_URL='$URL' SERVE_LOAD_POOL_SIZE="$PEER_POOL" SERVE_LOAD_POOL_WAIT="$POOL_WAIT")

# wait_until_up NAME PID URL LOG: until URL answers 200, or exit 1 if PID dies.
wait_until_up() {
    local _
    for _ in $(seq 1 300); do
        curl -sf -o /dev/null "$3" && return 0
        kill -0 "$2" 2>/dev/null || { echo "$1 exited:" >&2; cat "$4" >&2; exit 1; }
        sleep 0.2
    done
    echo "$1 did not answer $3 within 60 s" >&2; cat "$4" >&2; exit 1
}

log "starting sluice serve on 127.0.0.1:$SLUICE_PORT (pool $POOL_SIZE, SLUICE_LOG=$SLUICE_LOG)"
server_cmd sluice
"${CMD[@]}" 2>"$WORK/sluice.log" &
SLUICE_PID=$!
wait_until_up sluice "$SLUICE_PID" "http://127.0.0.1:$SLUICE_PORT/health" "$WORK/sluice.log"
SLUICE_LISTENING=$(grep -m1 'listening on http' "$WORK/sluice.log" | sed -E 's/^.*(sluice serve: )/\1/' || true)

log "starting uvicorn on 127.0.0.1:$FASTAPI_PORT ($WORKERS workers, pool $PEER_POOL each)"
server_cmd fastapi
SERVE_LOAD_PG_URL=$URL SERVE_LOAD_POOL_SIZE=$PEER_POOL SERVE_LOAD_POOL_WAIT=$POOL_WAIT \
    "${CMD[@]}" 2>"$WORK/fastapi.log" &
FASTAPI_PID=$!
wait_until_up FastAPI "$FASTAPI_PID" "http://127.0.0.1:$FASTAPI_PORT/account?account_id=$ACCOUNT_MIN" "$WORK/fastapi.log"
# Every worker must be up before the first cell, not only the one that answered.
for _ in $(seq 1 100); do
    (( $(grep -c 'Application startup complete' "$WORK/fastapi.log" || true) >= WORKERS )) && break
    sleep 0.2
done

# base_for SERVER: its address; path_for SERVER QUERY: the request's path
# without the parameter's value.
base_for() {
    case $1 in
        sluice|http) echo "http://127.0.0.1:$SLUICE_PORT" ;;
        fastapi)     echo "http://127.0.0.1:$FASTAPI_PORT" ;;
    esac
}
path_for() {
    case $1:$2 in
        sluice:short)   echo "/queries/account_payments?account_id=" ;;
        sluice:stream)  echo "/queries/payment_range?start=" ;;
        fastapi:short)  echo "/account?account_id=" ;;
        fastapi:stream) echo "/stream?start=" ;;
        http:short)     echo "/no_such_route?account_id=" ;;
    esac
}
# sluice_query QUERY: the named query's name.
sluice_query() { if [[ $1 == short ]]; then echo account_payments; else echo payment_range; fi; }
# range_for QUERY: the parameter's lowest and highest value.
range_for() {
    case $1 in
        short)  echo "$ACCOUNT_MIN $ACCOUNT_MAX" ;;
        stream) echo "$ID_MIN $STREAM_MAX" ;;
    esac
}

# server_pids SERVER: the server's processes (uvicorn: the master and its children).
server_pids() {
    case $1 in
        sluice)  echo "$SLUICE_PID" ;;
        fastapi) echo "$FASTAPI_PID"; ps -o pid= --ppid "$FASTAPI_PID" | tr -d ' ' ;;
        direct)  echo "$DIRECT_PID" ;;
    esac
}
# status_sum SERVER FIELD: FIELD (VmHWM, VmRSS) summed over its processes, KB.
status_sum() {
    local pid total=0 kb
    for pid in $(server_pids "$1"); do
        kb=$(awk -v f="$2:" '$1 == f { print $2 }' "/proc/$pid/status" 2>/dev/null || echo 0)
        total=$(( total + ${kb:-0} ))
    done
    echo "$total"
}
# reset_peak SERVER: start its processes' VmHWM again from their current RSS
# (clear_refs 5); PEAK_RESET=0 when the kernel refuses (then the peak is the
# process's since it started).
PEAK_RESET=1
reset_peak() {
    local pid
    for pid in $(server_pids "$1"); do
        echo 5 >"/proc/$pid/clear_refs" 2>/dev/null || PEAK_RESET=0
    done
}
# cpu_ticks PID...: their user + system CPU time so far, in clock ticks.
cpu_ticks() {
    local pid total=0
    for pid in "$@"; do
        total=$(( total + $(awk '{ print $14 + $15 }' "/proc/$pid/stat" 2>/dev/null || echo 0) ))
    done
    echo "$total"
}
# The PostgreSQL backends of a server's sessions, found through the client
# ports of its connections, when PostgreSQL runs on this machine (PG_LOCAL=1:
# /proc shows its processes).
PG_PORT_NUM=$(sed -E 's#^postgres(ql)?://([^@/]*@)?(\[[^]]*\]|[^:/?]*)(:([0-9]+))?.*#\5#' <<<"$URL")
PG_PORT_NUM=${PG_PORT_NUM:-5432}
PG_LOCAL=0
checkpointer=$(pg -c "select pid from pg_stat_activity where backend_type = 'checkpointer'" 2>/dev/null || true)
if [[ -n $checkpointer && -r /proc/$checkpointer/stat ]] && command -v ss >/dev/null; then PG_LOCAL=1; fi
backend_pids() {
    (( PG_LOCAL )) || return 0
    local pids ports
    pids=$(server_pids "$1" | paste -sd '|')
    ports=$(ss -tnpH state established "( dport = :$PG_PORT_NUM )" | grep -E "pid=($pids)," \
        | awk '{ n = split($3, a, ":"); print a[n] }' | paste -sd ,)
    [[ -z $ports ]] || pg -c "select pid from pg_stat_activity where client_port in ($ports)"
}
# cpu_window SERVER FILE: writes to FILE the CPU ticks of the server's
# processes and of its sessions' backends over the middle of a timed run, the
# window's length in seconds and how many of those backends ended within it:
# from min(1, D/4) s in (sessions that the warm-up's abandoned requests cost
# are replaced by then) to min(1, D/4) s before the end (wrk's abandoned
# requests end their sessions then, and a backend that has exited can no
# longer be read). Started with the timed run.
cpu_window() {
    local margin began backends server0 server1 pid pg_ticks=0 ended=0 t0 t1
    local -A pg0
    began=$(date +%s.%N)
    margin=$(awk -v d="$DURATION" 'BEGIN { print (d / 4 < 1 ? d / 4 : 1) }')
    sleep "$margin"
    backends=$(backend_pids "$1")
    t0=$(date +%s.%N)
    # shellcheck disable=SC2046  # one argument per process id
    server0=$(cpu_ticks $(server_pids "$1"))
    for pid in $backends; do pg0[$pid]=$(cpu_ticks "$pid"); done
    # Until DURATION - margin after the start, whatever the look-ups took.
    sleep "$(awk -v d="$DURATION" -v m="$margin" -v b="$began" -v n="$(date +%s.%N)" \
        'BEGIN { s = d - m - (n - b); print (s > 0 ? s : 0) }')"
    t1=$(date +%s.%N)
    # shellcheck disable=SC2046
    server1=$(cpu_ticks $(server_pids "$1"))
    # A backend that ended meanwhile (a session being replaced) is left out.
    for pid in "${!pg0[@]}"; do
        if [[ -r /proc/$pid/stat ]]; then
            pg_ticks=$(( pg_ticks + $(cpu_ticks "$pid") - pg0[$pid] ))
        else
            ended=$(( ended + 1 ))
        fi
    done
    echo "$(( server1 - server0 )) $pg_ticks $(awk -v a="$t0" -v b="$t1" 'BEGIN { print b - a }') $ended" >"$2"
}
HZ=$(getconf CLK_TCK)
check_alive() {
    local server pid
    for server in "${SERVERS[@]}"; do
        if [[ $server == sluice ]]; then pid=$SLUICE_PID; else pid=$FASTAPI_PID; fi
        kill -0 "$pid" 2>/dev/null || { echo "$server died:" >&2; tail -n 50 "$WORK/$server.log" >&2; exit 1; }
    done
}

# ------------------------------------------------------------- same output --

# The same request to both servers must give the same rows: the same number of
# lines, and each row's values equal once parsed (numbers and timestamps may be
# spelled differently: the check says how).
cat >"$WORK/compare.py" <<'EOF'
import json, sys
from datetime import datetime
from decimal import Decimal, InvalidOperation

def rows(path):
    with open(path, "rb") as f:
        return [json.loads(line, parse_float=Decimal) for line in f if line.strip()]

def spelled(v):
    return str(v) if isinstance(v, Decimal) else json.dumps(v, ensure_ascii=False)

def same(a, b):
    if a == b:
        return True
    for conv in (Decimal, lambda v: datetime.fromisoformat(v.replace("Z", "+00:00"))):
        try:
            if conv(str(a)) == conv(str(b)):
                return True
        except (InvalidOperation, ValueError, TypeError):
            pass
    return False

query, left, right = sys.argv[1], rows(sys.argv[2]), rows(sys.argv[3])
if len(left) != len(right):
    sys.exit(f"{query}: sluice {len(left)} rows, FastAPI {len(right)}")
spellings = {}
for i, (a, b) in enumerate(zip(left, right)):
    if list(a) != list(b):
        sys.exit(f"{query}: row {i}: keys differ: {list(a)} vs {list(b)}")
    for key in a:
        if not same(a[key], b[key]):
            sys.exit(f"{query}: row {i} {key}: sluice {a[key]!r}, FastAPI {b[key]!r}")
        if a[key] != b[key] or type(a[key]) is not type(b[key]):
            spellings.setdefault(key, (spelled(a[key]), spelled(b[key])))
notes = "; ".join(f"`{k}` sluice `{a}`, FastAPI `{b}`" for k, (a, b) in spellings.items())
print(f"{len(left)} rows each, equal values" + (f"; spelled differently: {notes}" if notes else ", spelled the same"))
EOF
CHECK_ACCOUNT=$(( ACCOUNT_MIN + 41 ))
CHECK_START=$(( ID_MIN + 12344 ))
declare -A SAME
for query in "${QUERIES[@]}"; do
    if [[ $query == short ]]; then value=$CHECK_ACCOUNT; else value=$CHECK_START; fi
    for server in "${SERVERS[@]}"; do
        curl -sS --fail -o "$WORK/check.$server.$query" "$(base_for "$server")$(path_for "$server" "$query")$value"
    done
    if cmp -s "$WORK/check.sluice.$query" "$WORK/check.fastapi.$query"; then
        SAME[$query]="byte-identical, $(wc -l <"$WORK/check.sluice.$query") lines"
    else
        SAME[$query]=$("$PY" "$WORK/compare.py" "$query" "$WORK/check.sluice.$query" "$WORK/check.fastapi.$query") \
            || { echo "the servers disagree (above)" >&2; exit 1; }
    fi
    log "$query ($value): ${SAME[$query]}"
done

# ------------------------------------------------------------------- cells --

cat >"$WORK/load.lua" <<'EOF'
-- wrk script: GET <prefix><random value in [low, high]>, seeded per thread
-- (seed + thread number) so every server gets the same request sequence; done()
-- prints one machine-readable line (latencies in microseconds).
local threads = 0
function setup(thread)
    threads = threads + 1
    thread:set("id", threads)
end
function init(args)
    prefix = args[1]
    low = tonumber(args[2])
    high = tonumber(args[3])
    math.randomseed(tonumber(args[4]) + id)
end
function request()
    return wrk.format("GET", prefix .. math.random(low, high))
end
function done(summary, latency, requests)
    local e = summary.errors
    io.write(string.format(
        "SERVE_LOAD requests=%d duration_us=%d bytes=%d connect=%d read=%d write=%d status=%d timeout=%d p50_us=%d p99_us=%d p999_us=%d max_us=%d\n",
        summary.requests, summary.duration, summary.bytes, e.connect, e.read, e.write,
        e.status, e.timeout, latency:percentile(50), latency:percentile(99),
        latency:percentile(99.9), latency.max))
end
EOF

# wrk_cmd SERVER QUERY CLIENTS SECONDS: the load command in CMD.
wrk_cmd() {
    local range threads=2
    read -r -a range <<<"$(range_for "$2")"
    (( $3 >= 2 )) || threads=1
    CMD=(wrk -t "$threads" -c "$3" -d "${4}s" --timeout "${WRK_TIMEOUT}s" -s "$WORK/load.lua"
         "$(base_for "$1")" -- "$(path_for "$1" "$2")" "${range[@]}" "$SEED")
}

# metric_counts: sluice's request counts on the queries route as lines
# "query status outcome count", from /metrics.
metric_counts() {
    curl -sf "http://127.0.0.1:$SLUICE_PORT/metrics" | awk '
        /^sluice_http_requests_total\{/ && /route="queries"/ {
            match($0, /query="[^"]*"/);   q = substr($0, RSTART + 7, RLENGTH - 8)
            match($0, /status="[^"]*"/);  s = substr($0, RSTART + 8, RLENGTH - 9)
            match($0, /outcome="[^"]*"/); o = substr($0, RSTART + 9, RLENGTH - 10)
            print q, s, o, $NF
        }
        /^sluice_db_round_trips_total\{/ {
            match($0, /query="[^"]*"/); print substr($0, RSTART + 7, RLENGTH - 8), "round_trips", "-", $NF
        }'
}
# pool_sampler FILE: append sluice_pool_waiting every 0.5 s until killed.
pool_sampler() {
    while :; do
        curl -sf "http://127.0.0.1:$SLUICE_PORT/metrics" \
            | awk '/^sluice_pool_waiting/ { print $NF }' >>"$1" || true
        sleep 0.5
    done
}

# compiling_now: whether another compile (rustc, cc1, cargo) is running.
compiling_now() {
    local name
    for name in rustc cc1 cc1plus cargo; do pgrep -x "$name" >/dev/null && return 0; done
    return 1
}

# field NAME: the value of NAME= in the wrk summary line of run_cell.
field() { sed -E "s/.* $1=([0-9]+).*/\1/" <<<"$line"; }

# cpu_per_response FILE RPS: from cpu_window's FILE, the CPU µs per response
# at RPS of the measured processes and of their PostgreSQL backends ("-" when
# PostgreSQL is not on this machine), as "SERVER_US PG_US".
cpu_per_response() {
    awk -v hz="$HZ" -v rps="$2" -v local="$PG_LOCAL" '{
        n = rps * $3
        if (n <= 0) { print 0, "-"; exit }
        printf "%.0f %s\n", $1 / hz * 1e6 / n, (local == 1 ? sprintf("%.0f", $2 / hz * 1e6 / n) : "-") }' "$1"
}
# wrk_summary OUT: the SERVE_LOAD line load.lua printed into OUT, in LINE (read
# by field); exit 1 showing OUT when there is none.
wrk_summary() {
    line=$(grep '^SERVE_LOAD ' "$1") || { echo "wrk printed no summary:" >&2; cat "$1" >&2; exit 1; }
}
# per_response_us FILE RPS DURATION_US: the CPU time /usr/bin/time wrote to
# FILE ("user system" seconds, its last line), in µs per response at RPS over
# DURATION_US.
per_response_us() {
    tail -n 1 "$1" | awk -v rps="$2" -v d="$3" '{ n = rps * d / 1e6; printf "%.0f\n", (n > 0 ? ($1 + $2) * 1e6 / n : 0) }'
}

# run_cell SERVER QUERY CLIENTS REP: warm-up, then the timed run; appends a
# line to WORK/SERVER.QUERY.CLIENTS.samples:
#   ok_rps p50_ms p99_ms p999_ms errors peak_rss_kb pool_waiting(max/mean)
#   detail server_cpu_us_per_2xx postgres_cpu_us_per_2xx wrk_cpu_us_per_2xx
run_cell() {
    local server=$1 query=$2 clients=$3 rep=$4 base="$WORK/$1.$2.$3" out line
    local requests duration status errs ok_rps detail="" waiting=- log_lines
    log "rep $rep/$REPS: ${SERVER_LABEL[$server]}, $query, $clients clients"
    TOTAL_CELLS=$(( TOTAL_CELLS + 1 ))
    compiling=0
    compiling_now && compiling=1
    wrk_cmd "$server" "$query" "$clients" "$WARMUP"
    "${CMD[@]}" >/dev/null
    sleep 0.5
    reset_peak "$server"
    log_lines=$(wc -l <"$WORK/$server.log")
    if [[ $server == sluice ]]; then
        metric_counts >"$base.before"
        : >"$base.waiting.$rep"
        pool_sampler "$base.waiting.$rep" &
        SAMPLER_PID=$!
    fi
    wrk_cmd "$server" "$query" "$clients" "$DURATION"
    out="$base.wrk.$rep"
    local cpu_pid server_us pg_us load_us
    cpu_window "$server" "$base.cpu.$rep" &
    cpu_pid=$!
    /usr/bin/time -f '%U %S' -o "$base.wrkcpu.$rep" "${CMD[@]}" >"$out"
    wait "$cpu_pid"
    if [[ $server == sluice ]]; then
        kill "$SAMPLER_PID"; wait "$SAMPLER_PID" 2>/dev/null || true; SAMPLER_PID=""
        # In-flight requests wrk abandoned at the end are logged once cancelled.
        sleep 0.3
        metric_counts >"$base.after"
        waiting=$(awk '{ n++; s += $1; if ($1 > m) m = $1 } END { printf "%d/%.1f", m, (n ? s / n : 0) }' "$base.waiting.$rep")
    fi
    PEAK_KB=$(status_sum "$server" VmHWM)
    compiling_now && compiling=1
    COMPILING_CELLS=$(( COMPILING_CELLS + compiling ))
    check_alive
    wrk_summary "$out"
    requests=$(field requests); duration=$(field duration_us); status=$(field status)
    errs=$(( $(field connect) + $(field read) + $(field write) + status + $(field timeout) ))
    ok_rps=$(awk -v r="$requests" -v s="$status" -v d="$duration" 'BEGIN { printf "%.1f", (r - s) / (d / 1e6) }')
    # CPU per 2xx response over the window, at the run's mean rate.
    read -r server_us pg_us < <(cpu_per_response "$base.cpu.$rep" "$ok_rps")
    load_us=$(per_response_us "$base.wrkcpu.$rep" "$ok_rps" "$duration")
    for kind in connect read write timeout; do
        (( $(field "$kind") == 0 )) || detail+="${detail:+,}$kind×$(field "$kind")"
    done
    # Which statuses the non-2xx were, from the server's side.
    if [[ $server == sluice ]]; then
        # Requests wrk abandoned when it stopped (client_gone) are no error a client saw.
        detail+=$(awk -v q="$(sluice_query "$query")" '
            FNR == NR { before[$1 " " $2 " " $3] = $4; next }
            $1 == q && $2 != "round_trips" && $3 != "client_gone" {
                n = $4 - before[$1 " " $2 " " $3]
                if (n > 0 && $2 != "200") printf ",srv:%s×%d", $2 "/" $3, n
            }' "$base.before" "$base.after")
        awk -v q="$(sluice_query "$query")" '
            FNR == NR { before[$1 " " $2 " " $3] = $4; next }
            $1 == q && $2 == "200" { ok += $4 - before[$1 " " $2 " " $3] }
            $1 == q && $2 == "round_trips" { rt += $4 - before[$1 " " $2 " " $3] }
            END { if (ok > 0) printf "%.2f\n", rt / ok }' "$base.before" "$base.after" >>"$WORK/round_trips.$query"
    else
        detail+=$(tail -n +"$(( log_lines + 1 ))" "$WORK/fastapi.log" | awk '
            /serve_load_fastapi: 503/ { n503++ }
            /Exception in ASGI application/ { n500++ }
            END { if (n503) printf ",srv:503×%d", n503; if (n500) printf ",srv:500×%d", n500 }')
    fi
    detail=${detail#,}
    awk -v r="$ok_rps" -v a="$(field p50_us)" -v b="$(field p99_us)" -v c="$(field p999_us)" \
        -v e="$errs" -v k="$PEAK_KB" -v w="$waiting" -v d="${detail:--}" -v s="$status" \
        -v su="$server_us" -v pu="$pg_us" -v lu="$load_us" \
        'BEGIN { printf "%s %.2f %.2f %.2f %d %d %s %s %s %s %s status_errors=%d\n", r, a / 1000, b / 1000, c / 1000, e, k, w, d, su, pu, lu, s }' \
        >>"$base.samples"
}

# The database served directly, as a reference for the short query: pgbench
# (PostgreSQL's own load client, C and libpq) runs the same SQL with the same
# random accounts, clients and threads as wrk, prepared, on plain TCP, with no
# HTTP and no gateway in between: what the database gives a client that
# costs little, beside what it gives through each server.
cat >"$WORK/direct.sql" <<EOF
\set account_id random($ACCOUNT_MIN, $ACCOUNT_MAX)
${SHORT_SQL/\$1/:account_id};
EOF
# direct_sessions CLIENTS: pgbench's sessions for a level: as many as its
# clients up to POOL_SIZE, the sessions each server has (more would also pass
# max_connections beside the servers' pools).
direct_sessions() { echo $(( $1 < POOL_SIZE ? $1 : POOL_SIZE )); }
# direct_cmd CLIENTS SECONDS [LOG_PREFIX]: the pgbench command in CMD.
direct_cmd() {
    local threads=2 sessions
    sessions=$(direct_sessions "$1")
    (( sessions >= 2 )) || threads=1
    CMD=(pgbench -n -M prepared -c "$sessions" -j "$threads" -T "$2" --random-seed="$SEED" -f "$WORK/direct.sql")
    if [[ -n ${3:-} ]]; then CMD+=(-l --log-prefix="$3"); fi
    CMD+=("$PLAIN_URL")
}
# run_direct CLIENTS REP: pgbench's warm-up and timed run; appends to
# WORK/direct.short.CLIENTS.samples:
#   tx_per_s p50_ms p99_ms p999_ms errors pgbench_cpu_us_per_tx postgres_cpu_us_per_tx
# (latencies from pgbench's per-transaction log).
run_direct() {
    local clients=$1 rep=$2 base="$WORK/direct.short.$1" tps failed server_us pg_us
    log "rep $rep/$REPS: pgbench (the database directly), short, $clients clients"
    direct_cmd "$clients" "$WARMUP"
    "${CMD[@]}" >/dev/null 2>&1 || { echo "pgbench failed: $(shell_words "${CMD[@]}")" >&2; exit 1; }
    rm -f "$base.log.$rep".*
    direct_cmd "$clients" "$DURATION" "$base.log.$rep"
    "${CMD[@]}" >"$base.out.$rep" 2>&1 &
    DIRECT_PID=$!
    cpu_window direct "$base.cpu.$rep"
    wait "$DIRECT_PID" || { echo "pgbench failed:" >&2; cat "$base.out.$rep" >&2; exit 1; }
    DIRECT_PID=""
    tps=$(sed -nE 's/^tps = ([0-9.]+) .*/\1/p' "$base.out.$rep" | head -n 1)
    failed=$(sed -nE 's/^number of failed transactions: ([0-9]+).*/\1/p' "$base.out.$rep")
    read -r server_us pg_us < <(cpu_per_response "$base.cpu.$rep" "$tps")
    # The log's third field is each transaction's latency in µs.
    cat "$base.log.$rep".* | awk '{ print $3 }' | sort -n | awk -v tps="$tps" -v e="${failed:-0}" \
        -v su="$server_us" -v pu="$pg_us" '
        { v[NR] = $1 }
        function at(p) { i = int(NR * p / 100 + 0.999999); if (i < 1) i = 1; return v[i] / 1000 }
        END { printf "%s %.2f %.2f %.2f %d %s %s\n", tps, at(50), at(99), at(99.9), e, su, pu }' >>"$base.samples"
    rm -f "$base.log.$rep".*
}

# run_http CLIENTS REP: the other half of the reference: the HTTP exchange
# alone, wrk against sluice's answer to an unknown path (a 404 with a short
# JSON body; no database, no log line), with the same clients, threads and
# request lines; appends to WORK/http.short.CLIENTS.samples:
#   req_per_s p50_ms p99_ms p999_ms
run_http() {
    local clients=$1 rep=$2 out="$WORK/http.short.$1.wrk.$2" line
    log "rep $rep/$REPS: HTTP alone (sluice's 404), $clients clients"
    wrk_cmd http short "$clients" "$WARMUP"
    "${CMD[@]}" >/dev/null
    wrk_cmd http short "$clients" "$DURATION"
    "${CMD[@]}" >"$out"
    wrk_summary "$out"
    awk -v r="$(field requests)" -v d="$(field duration_us)" -v a="$(field p50_us)" -v b="$(field p99_us)" \
        -v c="$(field p999_us)" 'BEGIN { printf "%.1f %.2f %.2f %.2f\n", r / (d / 1e6), a / 1000, b / 1000, c / 1000 }' \
        >>"$WORK/http.short.$clients.samples"
}

TOTAL_CELLS=0
COMPILING_CELLS=0
declare -a REP_LOADS
RSS_FIRST_SLUICE=""
for (( rep = 1; rep <= REPS; rep++ )); do
    REP_LOADS+=("rep $rep: $(load_average)")
    if (( rep % 2 )); then order=(sluice fastapi); else order=(fastapi sluice); fi
    for query in "${QUERIES[@]}"; do
        for clients in "${LEVEL_LIST[@]}"; do
            for server in "${order[@]}"; do
                run_cell "$server" "$query" "$clients" "$rep"
                if [[ $server == sluice && -z $RSS_FIRST_SLUICE ]]; then
                    RSS_FIRST_SLUICE=$(status_sum sluice VmRSS)
                fi
            done
            if [[ $query == short ]]; then
                run_direct "$clients" "$rep"
                run_http "$clients" "$rep"
            fi
        done
    done
done
# Over the whole run: the servers' current RSS now, and (for sluice) whether it grew.
RSS_END_SLUICE=$(status_sum sluice VmRSS)
RSS_END_FASTAPI=$(status_sum fastapi VmRSS)
FASTAPI_PROCESSES=$(server_pids fastapi | wc -l)
SLUICE_NOT_COMPLETE=$(grep 'sluice::request' "$WORK/sluice.log" | grep -vc 'outcome="complete"' || true)
SLUICE_LOG_SUMMARY=$(grep 'sluice::request' "$WORK/sluice.log" | grep -v 'outcome="complete"' \
    | sed -nE 's/.*query=([a-z_]+).* status=([0-9]+) outcome="([a-z_]+)".*/\1 \2 \3/p' \
    | sort | uniq -c | awk '{ printf "%s%s %s/%s ×%d", (NR > 1 ? "; " : ""), $2, $3, $4, $1 }' || true)
SLUICE_ERROR_LINES=$(grep 'sluice::request' "$WORK/sluice.log" | grep -v 'client_gone\|outcome="complete"' \
    | sed -nE 's/.*error=("[^"]*"|[^ ]*).*/\1/p' | sort | uniq -c | sort -rn | head -n 5 || true)
stop_background

# ------------------------------------------------------------------ report --

# cell_median SERVER QUERY CLIENTS COLUMN
cell_median() { median "$4" "$WORK/$1.$2.$3.samples"; }
cell_sum() { awk -v c="$4" '{ s += $c } END { print s + 0 }' "$WORK/$1.$2.$3.samples"; }
cell_max() { awk -v c="$4" '$c != "-" && $c > m { m = $c } END { print m + 0 }' "$WORK/$1.$2.$3.samples"; }
# cell_waiting QUERY CLIENTS: sluice's pool waiting, largest sample and mean
# sample over the reps.
cell_waiting() {
    awk '{ split($7, w, "/"); if (w[1] > m) m = w[1]; s += w[2]; n++ } END { printf "%d / %.1f", m, (n ? s / n : 0) }' \
        "$WORK/sluice.$1.$2.samples"
}
# cell_errors SERVER QUERY CLIENTS: "N" or "N (what they were)", summed over
# reps: wrk's error kinds, then the non-2xx statuses the server counted
# ("server:"; those include requests wrk abandoned when it stopped, which
# FastAPI still answers, with a 503 when they waited for a connection).
cell_errors() {
    local n what
    n=$(cell_sum "$@" 5)
    what=$(awk '$8 != "-" { n = split($8, p, ","); for (i = 1; i <= n; i++) { split(p[i], kv, "×"); c[kv[1]] += kv[2] } }
                END {
                    for (k in c) if (k !~ /^srv:/) { printf "%s%s×%d", (o++ ? ", " : ""), k, c[k] }
                    for (k in c) if (k ~ /^srv:/) { printf "%s%s×%d", (o++ ? (s++ ? ", " : "; server: ") : (s++ ? ", " : "server: ")), substr(k, 5), c[k] }
                }' "$WORK/$1.$2.$3.samples")
    if [[ -n $what ]]; then echo "$n ($what)"; else echo "$n"; fi
}

# direct_table: the short query's two references, measured in the same reps:
# the database straight from pgbench, and the HTTP exchange alone; against
# sluice's and FastAPI's req/s of the same cells.
direct_table() {
    local clients d_rps h_rps s_rps f_rps failed
    echo "References, in the same reps right after the two servers' cells, with wrk's threads, on plain TCP:"
    echo
    echo "- **the database directly**: pgbench (PostgreSQL's own C load client), no HTTP and no gateway, running"
    echo "  the same SQL, prepared, for the same random accounts (\`random($ACCOUNT_MIN, $ACCOUNT_MAX)\`, seed $SEED),"
    echo "  with as many sessions as clients up to $POOL_SIZE (each server's pool; above that its figures are the"
    echo "  database's best with $POOL_SIZE sessions, and its latencies are not comparable with the servers');"
    echo "  latencies from its per-transaction log, CPU as in the next table;"
    echo "- **HTTP alone**: wrk against sluice's answer to an unknown path (a 404 with a 45-byte JSON body, no"
    echo "  database), the same request lines otherwise."
    echo
    echo "Each client of a gateway waits for one HTTP exchange and one database round trip per request; with one"
    echo "client nothing overlaps, so the two references' latencies show what is left for the gateway's own work."
    echo "Each reference includes its own client's costs (wrk's, pgbench's and its log's), so their sum is a guide,"
    echo "not a bound."
    echo
    echo "| clients | the database directly: pgbench sessions, tx/s | its p50 / p99 / p99.9 ms | its CPU µs per tx: pgbench, PostgreSQL | HTTP alone: req/s | its p50 / p99 ms | 3 × FastAPI's req/s | sluice req/s |"
    echo "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
    for clients in "${LEVEL_LIST[@]}"; do
        d_rps=$(cell_median direct short "$clients" 1)
        h_rps=$(cell_median http short "$clients" 1)
        s_rps=$(cell_median sluice short "$clients" 1)
        f_rps=$(cell_median fastapi short "$clients" 1)
        printf '| %s | %s, %s | %.2f / %.2f / %.2f | %.0f, %s | %s | %.2f / %.2f | %s | %s |\n' "$clients" \
            "$(direct_sessions "$clients")" "$(fmt_int "$(printf '%.0f' "$d_rps")")" \
            "$(cell_median direct short "$clients" 2)" "$(cell_median direct short "$clients" 3)" \
            "$(cell_median direct short "$clients" 4)" "$(cell_median direct short "$clients" 6)" \
            "$( (( PG_LOCAL )) && printf '%.0f' "$(cell_median direct short "$clients" 7)" || echo n/a)" \
            "$(fmt_int "$(printf '%.0f' "$h_rps")")" \
            "$(cell_median http short "$clients" 2)" "$(cell_median http short "$clients" 3)" \
            "$(fmt_int "$(awk -v f="$f_rps" 'BEGIN { printf "%.0f", 3 * f }')")" "$(fmt_int "$(printf '%.0f' "$s_rps")")"
    done
    failed=0
    for clients in "${LEVEL_LIST[@]}"; do failed=$(( failed + $(cell_sum direct short "$clients" 5) )); done
    echo
    echo "pgbench's failed transactions over all its cells: $failed.$(one_client_note)"
    echo
}

# one_client_note: with one client, sluice's and FastAPI's median latency
# beside the references' (HTTP alone plus the database directly), as a
# sentence; nothing when 1 is not a level.
one_client_note() {
    [[ -s $WORK/sluice.short.1.samples && -s $WORK/direct.short.1.samples ]] || return 0
    awk -v s="$(cell_median sluice short 1 2)" -v f="$(cell_median fastapi short 1 2)" \
        -v h="$(cell_median http short 1 2)" -v d="$(cell_median direct short 1 2)" \
        'BEGIN { printf " With one client, the median request took %.2f ms through sluice and %.2f ms through FastAPI; HTTP alone took %.2f ms and the database directly %.2f ms, %.2f ms together.", s, f, h, d, h + d }'
}

# cpu_table QUERY: CPU time per response of each server, its PostgreSQL
# backends and wrk, and the ratio's ceiling they imply.
cpu_table() {
    local clients s_cpu f_cpu s_pg f_pg s_wrk f_wrk
    echo "CPU time per 2xx response, µs (user + system over the middle of the timed part, divided by the"
    echo "responses at the run's mean rate; median of the reps): the server's processes, the PostgreSQL"
    echo "backends of its sessions (found by their client ports), and wrk (over its whole timed run). When the"
    echo "cores are saturated (here from 16 clients on), the last column bounds sluice's req/s ratio: it is"
    echo "what the ratio would be if sluice itself cost no CPU at all, the database and wrk costing what they did."
    echo
    echo "| clients | sluice | its PostgreSQL | its wrk | FastAPI | its PostgreSQL | its wrk | sluice + PG ÷ FastAPI + PG | ceiling: FastAPI + PG + wrk ÷ sluice's PG + wrk |"
    echo "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
    for clients in "${LEVEL_LIST[@]}"; do
        s_cpu=$(cell_median sluice "$1" "$clients" 9)
        f_cpu=$(cell_median fastapi "$1" "$clients" 9)
        s_wrk=$(cell_median sluice "$1" "$clients" 11)
        f_wrk=$(cell_median fastapi "$1" "$clients" 11)
        if (( PG_LOCAL )); then
            s_pg=$(cell_median sluice "$1" "$clients" 10)
            f_pg=$(cell_median fastapi "$1" "$clients" 10)
            printf '| %s | %.0f | %.0f | %.0f | %.0f | %.0f | %.0f | %s | %s |\n' "$clients" \
                "$s_cpu" "$s_pg" "$s_wrk" "$f_cpu" "$f_pg" "$f_wrk" \
                "$(awk -v a="$s_cpu" -v b="$s_pg" -v c="$f_cpu" -v d="$f_pg" 'BEGIN { printf "%.2f", (a + b) / (c + d) }')" \
                "$(ratio_of "$(awk -v c="$f_cpu" -v d="$f_pg" -v w="$f_wrk" 'BEGIN { print c + d + w }')" \
                            "$(awk -v b="$s_pg" -v w="$s_wrk" 'BEGIN { print b + w }')")"
        else
            printf '| %s | %.0f | n/a | %.0f | %.0f | n/a | %.0f | n/a | n/a |\n' "$clients" "$s_cpu" "$s_wrk" "$f_cpu" "$f_wrk"
        fi
    done
}

DATE=$(date -u +%Y-%m-%d)
REPORT="$RESULTS/serve_load-$DATE.md"
declare -A TITLE=(
    [short]="(a) short query: \`$SHORT_SQL\`, a random account of $ACCOUNT_MIN…$ACCOUNT_MAX per request"
    [stream]="(b) $(fmt_int "$STREAM_ROWS")-row stream: \`$STREAM_SQL\`, a random start of $ID_MIN…$STREAM_MAX per request"
)
VERDICTS=()
{
    echo "# sluice serve under load vs FastAPI + asyncpg — $DATE"
    echo
    echo "wrk on loopback against \`sluice serve\` and a hand-written FastAPI + asyncpg app"
    echo "(\`bench/serve_load_fastapi.py\`) serving the same SQL as NDJSON, on the same machine and"
    echo "database over plain TCP. Each cell: ${WARMUP} s of untimed load, then ${DURATION} s timed;"
    echo "$REPS reps interleaved (sluice first in odd reps, FastAPI first in even ones); medians"
    echo "of the reps. req/s counts 2xx responses only. Latency is wrk's (request written to"
    echo "response read whole, closed loop: each client sends its next request when the last one"
    echo "is answered). Errors are summed over the $REPS reps: wrk's connect/read/write/timeout"
    echo "errors plus non-2xx responses, then (\"server:\") the non-2xx statuses the servers counted, which"
    echo "include requests wrk abandoned when it stopped (FastAPI still answers them). Peak RSS: VmHWM"
    if (( PEAK_RESET )); then
        echo "of the timed part of the cell (reset with \`/proc/PID/clear_refs\` after the warm-up),"
    else
        echo "since the process started (the kernel refused to reset it),"
    fi
    echo "largest of the reps; FastAPI's is the sum over its $FASTAPI_PROCESSES processes (uvicorn master,"
    echo "$WORKERS workers, multiprocessing's resource tracker)."
    echo
    echo "- sluice: pool_size $POOL_SIZE, pool_wait ${POOL_WAIT}s (then 503), ${SLUICE_LISTENING:-listening line not seen}"
    echo "- FastAPI: uvicorn --workers $WORKERS (one per CPU), --no-access-log, --loop uvloop, --http httptools;"
    echo "  an asyncpg pool of $PEER_POOL connections in each worker ($(( PEER_POOL * WORKERS )) in all), waiting"
    echo "  ${POOL_WAIT} s for one, then 503; orjson encoding (what a team that cares about speed uses),"
    echo "  \`fetch\` for (a), a server-side cursor in a read-only transaction, 1,000 rows per fetch and"
    echo "  per chunk, under \`StreamingResponse\` for (b)"
    if [[ $SLUICE_LOG == warn ]]; then
        echo "- sluice runs with SLUICE_LOG=warn: it logs the requests that did not complete, not the others"
        echo "  (its default, info, adds a line per request); uvicorn runs without an access log"
    else
        echo "- sluice runs with SLUICE_LOG=$SLUICE_LOG, its log to a file; uvicorn runs without an access log"
    fi
    echo "- the short query: the table has $ROWS_PER_ACCOUNT rows per account on average ($ACCOUNT_SPREAD), so"
    echo "  \`order by id limit 10\` keeps it at ~10 rows, as the issue asks; index: $ACCOUNT_INDEX_NOTE;"
    echo "  the table and the index were read through the page cache once before the first cell"
    echo "- sluice pool waiting: \`sluice_pool_waiting\` scraped from /metrics every 0.5 s during the timed part"
    echo "  (its only pool-wait figure: a gauge, no counter); it also counts requests whose new session is"
    echo "  still connecting, e.g. replacing the sessions of requests wrk abandoned at the end of the warm-up"
    echo "- same data, checked before timing: (a) account $CHECK_ACCOUNT: ${SAME[short]}; (b) start $CHECK_START: ${SAME[stream]}"
    echo
    for query in "${QUERIES[@]}"; do
        echo "## ${TITLE[$query]}"
        echo
        echo "| clients | sluice req/s | FastAPI req/s | sluice ÷ FastAPI | sluice p50 / p99 / p99.9 ms | FastAPI p50 / p99 / p99.9 ms | sluice p99 ≤ FastAPI's | sluice errors | FastAPI errors | sluice peak RSS MB | FastAPI peak RSS MB | sluice pool waiting max / mean |"
        echo "| ---: | ---: | ---: | ---: | ---: | ---: | :---: | --- | --- | ---: | ---: | ---: |"
        for clients in "${LEVEL_LIST[@]}"; do
            s_rps=$(cell_median sluice "$query" "$clients" 1)
            f_rps=$(cell_median fastapi "$query" "$clients" 1)
            s_p99=$(cell_median sluice "$query" "$clients" 3)
            f_p99=$(cell_median fastapi "$query" "$clients" 3)
            if awk -v a="$s_p99" -v b="$f_p99" 'BEGIN { exit !(a <= b) }'; then p99_ok=yes; else p99_ok=no; fi
            printf '| %s | %s | %s | %s | %.2f / %.2f / %.2f | %.2f / %.2f / %.2f | %s | %s | %s | %s | %s | %s |\n' \
                "$clients" "$(fmt_int "$(printf '%.0f' "$s_rps")")" "$(fmt_int "$(printf '%.0f' "$f_rps")")" \
                "$(ratio_of "$s_rps" "$f_rps")" \
                "$(cell_median sluice "$query" "$clients" 2)" "$s_p99" "$(cell_median sluice "$query" "$clients" 4)" \
                "$(cell_median fastapi "$query" "$clients" 2)" "$f_p99" "$(cell_median fastapi "$query" "$clients" 4)" \
                "$p99_ok" "$(cell_errors sluice "$query" "$clients")" "$(cell_errors fastapi "$query" "$clients")" \
                "$(mb "$(cell_max sluice "$query" "$clients" 6)")" "$(mb "$(cell_max fastapi "$query" "$clients" 6)")" \
                "$(cell_waiting "$query" "$clients")"
            if [[ $query == short ]]; then
                ratio_met=$(awk -v a="$s_rps" -v b="$f_rps" 'BEGIN { print (b > 0 && a >= 3 * b) ? "met" : "NOT met" }')
                d_rps=$(cell_median direct short "$clients" 1)
                VERDICTS+=("$clients client$( (( clients == 1 )) || echo s): req/s $(ratio_of "$s_rps" "$f_rps") of FastAPI's (target ≥ 3×: $ratio_met; 3 × FastAPI's is $(fmt_int "$(printf '%.0f' "$(awk -v f="$f_rps" 'BEGIN { print 3 * f }')")") req/s, the database served directly by pgbench $(fmt_int "$(printf '%.0f' "$d_rps")") tx/s with $(direct_sessions "$clients") session$( (( $(direct_sessions "$clients") == 1 )) || echo s)); p99 $(printf '%.2f' "$s_p99") ms vs $(printf '%.2f' "$f_p99") ms (target ≤: $([[ $p99_ok == yes ]] && echo met || echo NOT met))")
            fi
        done
        echo
        [[ $query != short ]] || direct_table
        cpu_table "$query"
        ended=$(cat "$WORK"/*."$query".*.cpu.* 2>/dev/null | awk '{ s += $4 } END { print s + 0 }')
        if (( ended )); then
            echo
            echo "$ended of the sessions whose backends were measured ended within the CPU window (over all cells of this query); their CPU is left out."
        fi
        if [[ -s $WORK/round_trips.$query ]]; then
            echo
            echo "sluice database round trips per 200 response (from \`sluice_db_round_trips_total\`, median of the cells): $(median 1 "$WORK/round_trips.$query")."
        fi
        echo
    done
    echo "## Targets (as measured)"
    echo
    echo "On the short query, sluice should serve ≥ 3× FastAPI's requests/s with a p99 no higher than FastAPI's:"
    echo
    for verdict in "${VERDICTS[@]}"; do echo "- $verdict"; done
    below=()
    for clients in "${LEVEL_LIST[@]}"; do (( clients <= POOL_SIZE )) && below+=("$clients"); done
    errors_below=0
    for query in "${QUERIES[@]}"; do
        for clients in "${below[@]}"; do
            errors_below=$(( errors_below + $(cell_sum sluice "$query" "$clients" 5) ))
        done
    done
    echo "- zero errors at or below the pool size ($POOL_SIZE connections; levels: ${below[*]:-none}): sluice had $errors_below ($([[ $errors_below == 0 ]] && echo met || echo NOT met))"
    echo "- RSS bounded: sluice's largest cell peak $(mb "$(for q in "${QUERIES[@]}"; do for c in "${LEVEL_LIST[@]}"; do cell_max sluice "$q" "$c" 6; done; done | sort -g | tail -n 1)") MB; its RSS after the first cell $(mb "${RSS_FIRST_SLUICE:-0}") MB, at the end of the run $(mb "$RSS_END_SLUICE") MB (FastAPI's processes at the end: $(mb "$RSS_END_FASTAPI") MB)"
    echo
    echo "## sluice's log of requests that did not complete"
    echo
    if (( SLUICE_NOT_COMPLETE )); then
        echo "$SLUICE_NOT_COMPLETE requests over the whole run (query status/outcome ×count): $SLUICE_LOG_SUMMARY."
        echo "\`client_gone\` lines are requests still in flight when wrk stopped (it closes its connections"
        echo "at the end of each run, warm-ups included); they are not errors a client saw."
        if [[ -n $SLUICE_ERROR_LINES ]]; then
            echo
            echo "Most frequent error messages:"
            echo
            echo '```'
            echo "$SLUICE_ERROR_LINES"
            echo '```'
        fi
    else
        echo "None: every request sluice logged completed."
    fi
    echo
    machine_section --load-average --pg-settings 'max_connections shared_buffers' | sed '$d'
    loads=$(IFS=';'; echo "${REP_LOADS[*]}")
    echo "- load average at the start of each rep: ${loads//;/; }"
    echo "  (the benchmark itself keeps both cores busy: wrk, the server under test and PostgreSQL"
    echo "  share them, so a load of 2–4 during the run is its own)"
    echo "- another compile (rustc, cc1, cargo) was running at the start or the end of $COMPILING_CELLS of $TOTAL_CELLS cells"
    if awk -v l="${LOAD_AVG_START%% *}" 'BEGIN { exit !(l > 3) }' || (( COMPILING_CELLS )); then
        echo "- **busy machine**: these figures were taken while other work ran; compare ratios, not absolute figures"
    fi
    echo "- wrk: $(wrk -v 2>&1 | head -n 1 | cut -d' ' -f1-2)"
    echo "- peer: $(for p in fastapi starlette uvicorn uvloop httptools asyncpg orjson; do printf '%s %s, ' "$p" "$(peer_version "$p")"; done | sed 's/, $//')"
    echo
    reproduce_section serve_load.sh "ROWS=$ROWS REPS=$REPS DURATION=$DURATION WARMUP=$WARMUP LEVELS='$LEVELS' POOL_SIZE=$POOL_SIZE POOL_WAIT=$POOL_WAIT SEED=$SEED"
    echo
    echo "The servers and one cell's load (the run's scratch directory shown as \$WORK):"
    echo
    echo '```'
    server_cmd sluice; echo "sluice: $(shell_words "${CMD[@]}")"
    server_cmd fastapi; echo "FastAPI: $(shell_words "${PEER_ENV[@]}" "${CMD[@]}")"
    wrk_cmd sluice short 64 "$DURATION"; echo "wrk (sluice, short, 64 clients): $(shell_words "${CMD[@]}")"
    wrk_cmd fastapi stream 64 "$DURATION"; echo "wrk (FastAPI, stream, 64 clients): $(shell_words "${CMD[@]}")"
    direct_cmd 64 "$DURATION" "\$WORK/direct.short.64.log.1"; echo "pgbench (short, 64 clients): $(shell_words "${CMD[@]}" | sed "s#$PLAIN_URL#\$URL$SSL_OFF#")"
    echo "$WORK/direct.sql:"; sed 's/^/    /' "$WORK/direct.sql"
    echo '```'
    echo
    echo "sluice's configuration:"
    echo
    echo '```toml'
    sed "s#^url = .*#url = \"$URL_SHOWN$SSL_OFF\"#" "$WORK/sluice.toml"
    echo '```'
    echo
    echo "## Raw runs"
    echo
    echo "Per cell, one entry per rep: req/s, p50/p99/p99.9 ms, errors, peak RSS MB."
    echo
    for query in "${QUERIES[@]}"; do
        for clients in "${LEVEL_LIST[@]}"; do
            for server in "${SERVERS[@]}"; do
                echo "- $query, $clients client$( (( clients == 1 )) || echo s), ${SERVER_LABEL[$server]}: $(awk '{ printf "%s%s req/s %s/%s/%s ms %s err %.1f MB", (NR > 1 ? "; " : ""), $1, $2, $3, $4, $5, $6 / 1024 }' "$WORK/$server.$query.$clients.samples")"
            done
            if [[ $query == short ]]; then
                echo "- $query, $clients client$( (( clients == 1 )) || echo s), pgbench: $(awk '{ printf "%s%.1f tx/s %s/%s/%s ms %s failed", (NR > 1 ? "; " : ""), $1, $2, $3, $4, $5 }' "$WORK/direct.short.$clients.samples")"
            fi
        done
    done
} | sed "s#$WORK#\$WORK#g; s#$ROOT/##g" >"$WORK/report.md"
# Written elsewhere first: a new file in bench/results would make the report
# call the tree dirty.
mv "$WORK/report.md" "$REPORT"
show_report "$REPORT"
