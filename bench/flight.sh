#!/usr/bin/env bash
# bench/flight.sh — payment_events pulled in parallel parts: pyarrow.flight
# readers of `sluice serve`'s Arrow Flight endpoints (one snapshot for all
# parts) against ConnectorX's partitioned reader (one connection per id range,
# no shared snapshot).
#
# One command, run from anywhere:
#
#     bash bench/flight.sh               # 1M rows
#     ROWS=5000000 bash bench/flight.sh  # 5M rows
#
# Environment (all optional; see bench/lib/common.sh):
#   SLUICE_BENCH_PG_URL, ROWS (1000000), REPS (3), SKIP_BUILD=1, SLUICE_BIN, PYTHON
#   PARTS   the numbers of parallel readers (default "1 2 4")
#
# What it does:
#   1. makes sure payment_events holds ROWS rows, builds sluice (release) and
#      bench/.venv-flight with the pinned clients;
#   2. starts `sluice serve` (release) with the named query `payment_events`
#      (`table = "payment_events"`, split by its storage) and [flight], under
#      /usr/bin/time for the server's peak RSS;
#   3. times REPS interleaved repetitions of each client and part count, each
#      its own process under /usr/bin/time (wall time, client peak RSS), every
#      client on plain TCP;
#   4. prints a Markdown table and writes bench/results/flight-<rows>-<date>.md.

set -euo pipefail

LOG_PREFIX=flight
# shellcheck source=lib/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/common.sh"
# shellcheck source=lib/payment_events.sh
source "$BENCH/lib/payment_events.sh"
PARTS=${PARTS:-1 2 4}
require_positive_integers ROWS REPS

FLIGHT_VENV="$BENCH/.venv-flight"
PEER_PINS=(connectorx==0.4.6 pyarrow==26.0.1)
LOAD_AVG_START=$(load_average)

ensure_tables
build_sluice
ensure_peer_venv "$FLIGHT_VENV" "connectorx, pyarrow.flight" "${PEER_PINS[@]}"

CONFIG="$WORK/sluice.toml"
cat >"$CONFIG" <<TOML
[server]
listen = "127.0.0.1:0"
[databases.main]
url = "$PLAIN_URL"
pool_size = 8
[queries.payment_events]
table = "payment_events"
[flight]
listen = "127.0.0.1:0"
TOML
SERVER_LOG="$WORK/serve.log"
SERVER_TIME="$WORK/serve.time"
/usr/bin/time -f '%e %M' -o "$SERVER_TIME" "$SLUICE" serve --config "$CONFIG" 2>"$SERVER_LOG" &
SERVER_PID=$!
# SIGTERM to sluice itself (time's child): time then reports its peak RSS.
stop_server() { pkill -TERM -P "$SERVER_PID" 2>/dev/null || true; wait "$SERVER_PID" 2>/dev/null || true; }
trap 'stop_server; remove_work' EXIT
flight_location "$SERVER_LOG"

# run_variant CLIENT N: one timed run; appends "wall_s rss_kb" to its samples.
run_variant() {
    local client=$1 parts=$2 target=$LOCATION
    [[ $client == flight ]] || target=$PLAIN_URL
    if ! /usr/bin/time -f '%e %M' -o "$TIME_FILE" "$PY" "$BENCH/flight_peers.py" "$client" "$target" "$parts" \
        >"$WORK/out.json" 2>"$WORK/err"; then
        log "$client $parts failed:"; tail -c 2000 "$WORK/err" >&2; exit 1
    fi
    grep -q "\"rows\": $ROWS," "$WORK/out.json" || { log "$client $parts read $(cat "$WORK/out.json")"; exit 1; }
    tail -n 1 "$TIME_FILE" >>"$WORK/$client-$parts.samples"
}

for (( rep = 1; rep <= REPS; rep++ )); do
    for parts in $PARTS; do
        for client in flight connectorx; do
            log "repetition $rep/$REPS: $client, $parts part(s)"
            run_variant "$client" "$parts"
        done
    done
done
stop_server
SERVER_RSS_KB=$(tail -n 1 "$SERVER_TIME" | awk '{ print $2 }')

REPORT="$RESULTS/flight-$ROWS-$(date -u +%F).md"
{
    echo "# Parallel pulls: sluice's Arrow Flight against ConnectorX's partitioned reader"
    echo
    echo "$(fmt_int "$ROWS") rows of payment_events into one pyarrow Table, median of $REPS interleaved runs, $(date -u '+%F %H:%M UTC')."
    echo
    echo "| parts | pyarrow.flight ← sluice, s | ConnectorX $(peer_version connectorx), s | sluice ÷ ConnectorX | client peak RSS MB, Flight / ConnectorX |"
    echo "|---:|---:|---:|---:|---:|"
    for parts in $PARTS; do
        flight_s=$(median 1 "$WORK/flight-$parts.samples")
        cx_s=$(median 1 "$WORK/connectorx-$parts.samples")
        printf '| %s | %.2f | %.2f | %s | %s / %s |\n' "$parts" "$flight_s" "$cx_s" "$(ratio_of "$flight_s" "$cx_s")" \
            "$(mb "$(median 2 "$WORK/flight-$parts.samples")")" "$(mb "$(median 2 "$WORK/connectorx-$parts.samples")")"
    done
    echo
    echo "Peak RSS of \`sluice serve\` over the whole run (every Flight pull): $(mb "$SERVER_RSS_KB") MB."
    echo "Times are whole client processes (Python start and imports included)."
    echo "Flight's parts are storage (ctid) ranges of payment_events read in one exported"
    echo "snapshot; ConnectorX's are ranges of id, each in its own transaction."
    echo
    machine_section --load-average
    reproduce_section flight.sh "ROWS=$ROWS REPS=$REPS PARTS=\"$PARTS\""
    echo
    raw_samples_section "$WORK"/*.samples
} >"$REPORT"
show_report "$REPORT"
