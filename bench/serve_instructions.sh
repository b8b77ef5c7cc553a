#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR  # (lint from anywhere: shellcheck -x bench/serve_instructions.sh)
# bench/serve_instructions.sh — what one short gateway request costs sluice, in
# CPU instructions of its own process, counted by valgrind's callgrind: a
# figure that repeats to within 1–2% on a noisy 2-core machine, where
# requests/s and CPU seconds move by 20% from one run to the next
# (bench/serve_load.sh measures those). Use it to tell whether a change to the
# request path made it cheaper.
#
#     bash bench/serve_instructions.sh
#     BASELINE_BIN=/path/to/older/sluice bash bench/serve_instructions.sh
#
# Environment (all optional; see bench/lib/common.sh):
#   SLUICE_BENCH_PG_URL, ROWS (1000000), SKIP_BUILD=1, SLUICE_BIN
#   BASELINE_BIN  another sluice binary measured the same way first, for a ratio
#   SECONDS_TIMED seconds of counted load (default 20; ~20,000 requests)
#   SLUICE_PORT   port on 127.0.0.1 (default 18492)
#
# What it does: makes sure payment_events and its account index exist (as
# bench/serve_load.sh does); starts `sluice serve` under
# `valgrind --tool=callgrind` with the short query of bench/serve_load.sh
# (`select * from payment_events where account_id = $1 order by id limit 10`,
# ~10 rows of 8 columns as NDJSON), plain TCP, SLUICE_LOG=warn; drives it with
# `wrk -t 1 -c 4` for 5 s uncounted (pool filled, statements prepared), zeroes
# the counters, then SECONDS_TIMED s counted; divides the instructions by the
# requests wrk completed. Also counted: calls to malloc per request. Prints
# the figures and the 25 functions with the most instructions of their own.
# Kernel work (system calls, the loopback network) is not counted.

set -euo pipefail

LOG_PREFIX=serve-instructions
# shellcheck source=lib/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/common.sh"
# shellcheck source=lib/payment_events.sh
source "$BENCH/lib/payment_events.sh"
SECONDS_TIMED=${SECONDS_TIMED:-20}
SLUICE_PORT=${SLUICE_PORT:-18492}
require_positive_integers SECONDS_TIMED SLUICE_PORT

for tool in valgrind callgrind_control callgrind_annotate; do
    command -v "$tool" >/dev/null || { echo "$tool is required: apt-get install valgrind" >&2; exit 2; }
done
for tool in wrk curl; do
    command -v "$tool" >/dev/null || { echo "$tool is required: apt-get install $tool" >&2; exit 2; }
done

ensure_tables
ensure_account_index
warm_account_reads
build_sluice

cat >"$WORK/sluice.toml" <<EOF
[databases.main]
url = "$PLAIN_URL"
pool_size = 4

[queries.account_payments]
sql = "select * from payment_events where account_id = \$1 order by id limit 10"
params = [{ name = "account_id", type = "bigint", required = true }]
EOF
cat >"$WORK/load.lua" <<'EOF'
-- GET the short query for a random account, seeded per thread.
local threads = 0
function setup(thread)
    threads = threads + 1
    thread:set("id", threads)
end
function init(args)
    math.randomseed(tonumber(args[1]) + id)
end
function request()
    return wrk.format("GET", "/queries/account_payments?account_id=" .. math.random(1, 50000))
end
function done(summary, latency, requests)
    io.write(string.format("REQUESTS %d\n", summary.requests))
end
EOF

SERVER_PID=""
stop_background() {
    [[ -z $SERVER_PID ]] || { kill "$SERVER_PID" 2>/dev/null; wait "$SERVER_PID" 2>/dev/null || true; }
    SERVER_PID=""
}

# measure BIN: prints "instructions malloc_calls requests" for one binary.
measure() {
    local bin=$1 out="$WORK/callgrind.out" base="http://127.0.0.1:$SLUICE_PORT" requests
    rm -f "$out"*
    PGSSLMODE=disable SLUICE_LOG=warn valgrind --tool=callgrind --callgrind-out-file="$out" \
        "$bin" serve --config "$WORK/sluice.toml" --listen "127.0.0.1:$SLUICE_PORT" \
        >"$WORK/server.log" 2>&1 &
    SERVER_PID=$!
    for _ in $(seq 600); do
        curl -sf -o /dev/null "$base/health" && break
        kill -0 "$SERVER_PID" 2>/dev/null || { cat "$WORK/server.log" >&2; exit 1; }
        sleep 0.1
    done
    wrk -t 1 -c 4 -d 5s -s "$WORK/load.lua" "$base" -- 7 >/dev/null
    callgrind_control --zero "$SERVER_PID" >/dev/null 2>&1
    requests=$(wrk -t 1 -c 4 -d "${SECONDS_TIMED}s" -s "$WORK/load.lua" "$base" -- 42 |
        awk '/^REQUESTS/ {print $2}')
    callgrind_control --dump "$SERVER_PID" >/dev/null 2>&1
    stop_background
    local dump
    dump=$(find "$WORK" -maxdepth 1 -name 'callgrind.out*' -size +0 | sort | tail -n 1)
    callgrind_annotate --threshold=100 "$dump" >"$WORK/annotate.txt" 2>/dev/null
    callgrind_annotate --tree=caller --threshold=100 "$dump" >"$WORK/callers.txt" 2>/dev/null
    local instructions malloc_calls
    instructions=$(awk '/PROGRAM TOTALS/ {gsub(",", "", $1); print $1; exit}' "$WORK/annotate.txt")
    # Calls into glibc's malloc: the sum of its callers' call counts.
    malloc_calls=$(awk '
        /^$/ {n = 0; next}
        /  \*  .*malloc\.c:malloc \[/ {for (i = 1; i <= n; i++) total += calls[i]; print total; exit}
        {if (match($0, /\(([0-9,]+)x\)/)) {c = substr($0, RSTART + 1, RLENGTH - 3); gsub(",", "", c); calls[++n] = c}}
    ' "$WORK/callers.txt")
    echo "${instructions:-0} ${malloc_calls:-0} ${requests:-0}"
}

report() { # NAME BIN
    local figures
    read -r -a figures <<<"$(measure "$2")"
    (( figures[2] > 0 )) || { echo "no requests completed for $1" >&2; exit 1; }
    printf '%s: %d requests, %d instructions per request, %.1f malloc calls per request\n' \
        "$1" "${figures[2]}" $(( figures[0] / figures[2] )) \
        "$(awk -v m="${figures[1]}" -v n="${figures[2]}" 'BEGIN {print m / n}')"
    PER_REQUEST=$(( figures[0] / figures[2] ))
}

if [[ -n ${BASELINE_BIN:-} ]]; then
    report "baseline ($BASELINE_BIN)" "$BASELINE_BIN"
    BASELINE=$PER_REQUEST
fi
report "sluice ($SLUICE)" "$SLUICE"
if [[ -n ${BASELINE:-} ]]; then
    awk -v a="$PER_REQUEST" -v b="$BASELINE" 'BEGIN {printf "sluice / baseline: %.3f\n", a / b}'
fi
echo "the 25 functions with the most instructions of their own, over all counted requests:"
# (The threads' entry points, at 100% of the total, are not functions of interest.)
grep -E '^ *[0-9,]+ \( *[0-9.]+%\)  ' "$WORK/annotate.txt" | grep -v -E 'PROGRAM TOTALS|\((99\.[0-9]+|100\.0)%\)' |
    head -n 25 |
    sed -E 's#/root/\.cargo/registry/src/[^/]+/##; s#/rustc/[0-9a-f]+/library/##'
