#!/usr/bin/env bash
# bench/proxy.sh — what `sluice proxy` costs when it adds no delay: the 1M-row
# `payment_events` exported as NDJSON to /dev/null directly and through
# `sluice proxy --rtt 0`, interleaved. The issue's bound: at most 5% slower.
#
#     bash bench/proxy.sh
#
# Environment (all optional; see bench/lib/common.sh):
#   SLUICE_BENCH_PG_URL, ROWS (1000000), REPS (5), SKIP_BUILD=1, SLUICE_BIN
#   PROXY_PORT  the proxy's port on 127.0.0.1 (default 6439)
#
# Both runs use the same sluice binary and plain TCP (PGSSLMODE=disable); the
# proxy runs with its observer on (the report is built as always) and writes
# its report to the scratch directory. Peak RSS is the exporter's; the proxy's
# own peak is read from its /proc status at the end.
#
# Exit status: 0; 1 if a run failed.

set -euo pipefail

LOG_PREFIX=proxy
# Five runs each by default (the other scripts take three): the difference sought is small.
REPS=${REPS:-5}
# shellcheck source=lib/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/common.sh"
# shellcheck source=lib/payment_events.sh
source "$BENCH/lib/payment_events.sh"
require_positive_integers ROWS REPS
SCALE_CHECK=0
PROXY_PORT=${PROXY_PORT:-6439}
LOAD_AVG_START=$(load_average)

ensure_tables
build_sluice

# The URL with its host and port replaced by the proxy's.
PROXY_URL=$(sed -E "s#^(postgres(ql)?://([^@/]*@)?)[^/]*#\1127.0.0.1:$PROXY_PORT#" <<<"$URL")
UPSTREAM=$(sed -E 's#^postgres(ql)?://([^@/]*@)?([^/?]*).*#\3#' <<<"$URL")
[[ $UPSTREAM == *:* ]] || UPSTREAM="$UPSTREAM:5432"

PROXY_PID=""
# The proxy writes its report as it exits: wait for it before the scratch directory goes.
stop_background() {
    [[ -z $PROXY_PID ]] && return 0
    kill "$PROXY_PID" 2>/dev/null || true
    wait "$PROXY_PID" 2>/dev/null || true
}
"$SLUICE" proxy --listen "127.0.0.1:$PROXY_PORT" --upstream "$UPSTREAM" --rtt 0 \
    --output "$WORK/report.json" 2>"$WORK/proxy.err" &
PROXY_PID=$!
for _ in $(seq 100); do
    if psql "$PROXY_URL" -X -At -c "select 1" >/dev/null 2>&1; then break; fi
    sleep 0.1
done
psql "$PROXY_URL" -X -At -c "select 1" >/dev/null || { cat "$WORK/proxy.err" >&2; exit 1; }

QUERY="select * from payment_events"
FAILED=0
for (( rep = 1; rep <= REPS; rep++ )); do
    for key in direct proxied; do
        url=$URL
        [[ $key == proxied ]] && url=$PROXY_URL
        log "rep $rep/$REPS: $key"
        if timed_run "$SLUICE" export --db "$url" --query "$QUERY" --format ndjson; then
            echo "$TIME_SAMPLE" >>"$WORK/$key.samples"
        else
            FAILED=1
        fi
    done
done
PROXY_RSS_KB=$(awk '/^VmHWM/ { print $2 }' "/proc/$PROXY_PID/status" 2>/dev/null || echo 0)

DIRECT=$(median 1 "$WORK/direct.samples")
PROXIED=$(median 1 "$WORK/proxied.samples")
DATE=$(date -u +%Y-%m-%d)
REPORT="$RESULTS/proxy-$DATE.md"
{
    echo "# sluice proxy overhead at --rtt 0 — $DATE"
    echo
    echo "\`sluice export --format ndjson\` of \`$QUERY\` ($(fmt_int "$ROWS") rows) to /dev/null, directly and through \`sluice proxy --rtt 0\`; median of $REPS interleaved runs each."
    echo
    echo "| path | median s | × direct | exporter peak RSS MB |"
    echo "| --- | ---: | ---: | ---: |"
    printf '| direct | %.2f | 1.00× | %s |\n' "$DIRECT" "$(mb "$(median 2 "$WORK/direct.samples")")"
    printf '| through sluice proxy --rtt 0 | %.2f | %s | %s |\n' "$PROXIED" "$(ratio_of "$PROXIED" "$DIRECT")" \
        "$(mb "$(median 2 "$WORK/proxied.samples")")"
    echo
    echo "The proxy's own peak RSS over the run: $(mb "$PROXY_RSS_KB") MB."
    echo
    # shellcheck disable=SC2119
    machine_section --load-average
    echo
    reproduce_section proxy.sh "ROWS=$ROWS REPS=$REPS"
    echo
    raw_samples_section "$WORK"/direct.samples "$WORK"/proxied.samples
} >"$REPORT"
show_report "$REPORT"
exit "$FAILED"
