#!/usr/bin/env bash
# bench/server_cpu.sh — what PostgreSQL's server spends per row for each result
# format sluice asks for: text for every column (NDJSON, CSV) against the
# binary result format where a column's type has core's binary form (Arrow,
# Parquet), with COPY text and binary as the server's own bounds (issue 41).
#
# One command, run from anywhere:
#
#     bash bench/server_cpu.sh
#
# Environment (all optional; see bench/lib/common.sh):
#   SLUICE_BENCH_PG_URL, ROWS (1000000), REPS (5), SKIP_BUILD=1, SLUICE_BIN
#
# The server's CPU is read from the postmaster's /proc/PID/stat: a backend's
# user and system time join the postmaster's cutime and cstime when it is
# reaped, so the difference across one client run (its connection closed,
# then a moment for the reaping) is what that run's backend spent. It needs
# the server on this machine: the postmaster is the oldest process named
# postgres. Client time is wall time. Medians of REPS interleaved runs.

set -euo pipefail

LOG_PREFIX=server-cpu
REPS=${REPS:-5}
# shellcheck source=lib/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/common.sh"
# shellcheck source=lib/payment_events.sh
source "$BENCH/lib/payment_events.sh"
require_positive_integers ROWS REPS

POSTMASTER=$(pgrep -o -x postgres || true)
[[ -n $POSTMASTER ]] || { echo "no process named postgres on this machine: the server must run here" >&2; exit 2; }
TICKS=$(getconf CLK_TCK)
LOAD_AVG_START=$(load_average)

ensure_tables
build_sluice

# children_ticks: the CPU ticks of the postmaster's reaped children.
children_ticks() { awk '{ print $16 + $17 }' "/proc/$POSTMASTER/stat"; }

VARIANTS=(copy_text copy_binary sluice_text sluice_binary)
command_of() {
    case $1 in
        copy_text) CMD=(psql "$PLAIN_URL" -X -q -c "copy (select * from payment_events) to stdout") ;;
        copy_binary) CMD=(psql "$PLAIN_URL" -X -q -c "copy (select * from payment_events) to stdout (format binary)") ;;
        sluice_text) CMD=("$SLUICE" export --db "$PLAIN_URL" --table payment_events --format ndjson) ;;
        sluice_binary) CMD=("$SLUICE" export --db "$PLAIN_URL" --table payment_events --format arrow) ;;
        column_*) column_command "$1" ;;
    esac
}
declare -A LABEL=(
    [copy_text]='psql `COPY … TO STDOUT` (text)'
    [copy_binary]='psql `COPY … TO STDOUT (FORMAT binary)`'
    [sluice_text]='sluice export --format ndjson (every column as text)'
    [sluice_binary]='sluice export --format arrow (binary where the type has a binary form)'
)

# run KEY: appends "server_s wall_s" to KEY's samples.
run() {
    local before after started ended
    command_of "$1"
    before=$(children_ticks)
    started=$(date +%s.%N)
    "${CMD[@]}" >/dev/null
    ended=$(date +%s.%N)
    # The backend has exited with its connection; give the postmaster a
    # moment to reap it.
    sleep 0.3
    after=$(children_ticks)
    awk -v a="$before" -v b="$after" -v t="$TICKS" -v s="$started" -v e="$ended" \
        'BEGIN { printf "%.2f %.3f\n", (b - a) / t, e - s }' >>"$WORK/$1.samples"
    assert_dev_null "$1"
}

# Where the server's time goes: COPY of each column alone, text and binary.
COLUMNS=(id account_id amount currency status created_at description payload)
for column in "${COLUMNS[@]}"; do
    LABEL[column_${column}_text]="\`$column\` text"
    LABEL[column_${column}_binary]="\`$column\` binary"
done
column_command() {
    local column=${1#column_} format=""
    column=${column%_*}
    if [[ $1 == *_binary ]]; then format=" (format binary)"; fi
    CMD=(psql "$PLAIN_URL" -X -q -c "copy (select $column from payment_events) to stdout$format")
}

for (( rep = 1; rep <= REPS; rep++ )); do
    for key in "${VARIANTS[@]}"; do
        log "repetition $rep/$REPS: $key"
        run "$key"
    done
    for column in "${COLUMNS[@]}"; do
        for format in text binary; do
            run "column_${column}_$format"
        done
    done
done

REPORT=$(report_path server-cpu)
{
    echo "# PostgreSQL's CPU per result format"
    echo
    echo "$(fmt_int "$ROWS") rows of payment_events, median of $REPS interleaved runs, $(date -u '+%F %H:%M UTC'). Server CPU: the backend's user + system time; wall: the client's whole run."
    echo
    echo "| variant | server CPU s | server µs per row | × text | client wall s |"
    echo "|---|---:|---:|---:|---:|"
    text=$(median 1 "$WORK/sluice_text.samples")
    for key in "${VARIANTS[@]}"; do
        cpu=$(median 1 "$WORK/$key.samples")
        printf '| %s | %.2f | %.2f | %s | %.2f |\n' "${LABEL[$key]}" "$cpu" \
            "$(awk -v c="$cpu" -v r="$ROWS" 'BEGIN { print c * 1e6 / r }')" \
            "$(ratio_of "$cpu" "$text")" "$(median 2 "$WORK/$key.samples")"
    done
    echo
    echo "### By column: COPY of one column, text and binary"
    echo
    echo "| column | text: server CPU s | binary: server CPU s |"
    echo "|---|---:|---:|"
    for column in "${COLUMNS[@]}"; do
        printf '| `%s` | %.2f | %.2f |\n' "$column" "$(median 1 "$WORK/column_${column}_text.samples")" \
            "$(median 1 "$WORK/column_${column}_binary.samples")"
    done
    echo
    echo "## Commands"
    echo
    commands_block command_of "${VARIANTS[@]}"
    echo
    machine_section --load-average
    reproduce_section server_cpu.sh "ROWS=$ROWS REPS=$REPS"
    echo
    echo "## Raw samples (server CPU s, client wall s)"
    echo
    for key in "${VARIANTS[@]}"; do
        echo "- $key: $(awk '{ printf "%s%s / %s", (NR > 1 ? "; " : ""), $1, $2 }' "$WORK/$key.samples")"
    done
} >"$REPORT"
show_report "$REPORT"
