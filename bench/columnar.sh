#!/usr/bin/env bash
# bench/columnar.sh — Arrow IPC and Parquet export: sluice vs the Python peers.
#
# One command, run from anywhere:
#
#     bash bench/columnar.sh
#
# Environment (all optional; see bench/lib/common.sh):
#   SLUICE_BENCH_PG_URL, ROWS (1000000), REPS (3), SKIP_BUILD=1, SLUICE_BIN, PYTHON
#   SCALE_CHECK=1   also export a 5,000,000-row table as an Arrow stream and as
#                   Parquet and compare sluice's peak RSS with that at ROWS
#   PEERS           which Python peers to run (default "connectorx polars psycopg adbc")
#
# What it does:
#   1. makes sure payment_events holds ROWS generated rows (bench/lib/payment_events.sh);
#   2. builds sluice (release) and bench/.venv-columnar with the pinned peers;
#   3. runs every variant once, untimed, to a file and checks with pyarrow that
#      it holds ROWS rows (and reads sluice's --stats for round trips), keeping
#      the output's size;
#   4. times REPS interleaved repetitions of every variant under /usr/bin/time:
#      the psql CSV reference and the Arrow streams to /dev/null, Parquet to a
#      file in a scratch directory (a Parquet writer needs a real file);
#   5. prints a Markdown table and writes bench/results/columnar-<date>.md.
#
# Exit status: 0; 1 if a variant failed its run or its row check; 3 if
# SCALE_CHECK=1 found sluice's memory growing with the row count.

set -euo pipefail

LOG_PREFIX=columnar
# shellcheck source=lib/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/common.sh"
# shellcheck source=lib/payment_events.sh
source "$BENCH/lib/payment_events.sh"
require_positive_integers ROWS REPS

COLUMNAR_VENV="$BENCH/.venv-columnar"
# Pinned peers, all wheels on CPython 3.11 x86_64.
PEER_PINS=(connectorx==0.4.6 pyarrow==26.0.1 polars==2.1.0 'psycopg[binary]==3.3.9'
           adbc-driver-manager==1.13.0 adbc-driver-postgresql==1.13.0)
PEERS=${PEERS-connectorx polars psycopg adbc}  # PEERS="" runs sluice and psql only
LOAD_AVG_START=$(load_average)

ensure_tables
build_sluice

ensure_peer_venv "$COLUMNAR_VENV" "connectorx, polars, psycopg, adbc_driver_postgresql" "${PEER_PINS[@]}"

# --------------------------------------------------------------- variants --

VARIANTS=(psql sluice_arrow sluice_parquet)
for peer in $PEERS; do VARIANTS+=("${peer}_arrow" "${peer}_parquet"); done
declare -A LABEL=(
    [psql]='psql `\copy … csv` to /dev/null (reference)'
    [sluice_arrow]='sluice `--format arrow`'
    [sluice_parquet]='sluice `--format parquet` (zstd)'
    [connectorx_arrow]="ConnectorX $(peer_version connectorx) → pyarrow IPC stream"
    [connectorx_parquet]="ConnectorX $(peer_version connectorx) → \`pyarrow.parquet.write_table\` (zstd)"
    [polars_arrow]="polars $(peer_version polars) \`read_database_uri\` → \`write_ipc_stream\`"
    [polars_parquet]="polars $(peer_version polars) \`read_database_uri\` → \`write_parquet\` (zstd)"
    [psycopg_arrow]="psycopg $PSYCOPG_VERSION binary COPY → pyarrow batches → IPC stream"
    [psycopg_parquet]="psycopg $PSYCOPG_VERSION binary COPY → pyarrow batches → Parquet (zstd)"
    [adbc_arrow]="adbc_driver_postgresql $(peer_version adbc-driver-postgresql) record batches → IPC stream"
    [adbc_parquet]="adbc_driver_postgresql $(peer_version adbc-driver-postgresql) record batches → Parquet (zstd)"
)
# cmd_for KEY TABLE OUT: CMD exports `select * from TABLE` to OUT.
cmd_for() {
    local key=$1 q="select * from $2" out=$3
    case $key in
        psql)           CMD=(psql "$URL" -X -c "\\copy ($q) to '$out' csv") ;;
        sluice_arrow)   CMD=("$SLUICE" export --db "$URL" --query "$q" --format arrow --output "$out") ;;
        sluice_parquet) CMD=("$SLUICE" export --db "$URL" --query "$q" --format parquet --output "$out") ;;
        *_arrow)        CMD=("$PY" "$BENCH/columnar_peers.py" "${key%_arrow}" arrow "$URL" "$out" --query "$q") ;;
        *_parquet)      CMD=("$PY" "$BENCH/columnar_peers.py" "${key%_parquet}" parquet "$URL" "$out" --query "$q") ;;
    esac
}
# timed_out KEY: where a timed run writes.
timed_out() { if [[ $1 == *_parquet ]]; then echo "$WORK/$1.parquet"; else echo /dev/null; fi; }

declare -A STATUS=() TRIPS=() SIZE=()

# rows_in KEY FILE: the rows pyarrow reads from FILE.
rows_in() {
    case $1 in
        psql)      wc -l <"$2" ;;
        *_parquet) "$PY" -c 'import sys, pyarrow.parquet as pq; print(pq.ParquetFile(sys.argv[1]).metadata.num_rows)' "$2" ;;
        *)         "$PY" -c 'import sys, pyarrow as pa; print(pa.ipc.open_stream(sys.argv[1]).read_all().num_rows)' "$2" ;;
    esac
}

log "warm-up: psql reference (untimed)"
cmd_for psql payment_events /dev/null
"${CMD[@]}" >/dev/null
for key in "${VARIANTS[@]}"; do
    out="$WORK/check.$key"
    cmd_for "$key" payment_events "$out"
    [[ $key == sluice_* ]] && CMD+=(--stats)
    log "row check: $key"
    if ! "${CMD[@]}" >/dev/null 2>"$WORK/$key.err"; then
        STATUS[$key]="FAILED: $(tail -n 1 "$WORK/$key.err")"
    elif [[ $(rows_in "$key" "$out") != "$ROWS" ]]; then
        STATUS[$key]="FAILED: $(rows_in "$key" "$out") rows, want $ROWS"
    else
        STATUS[$key]=""
    fi
    SIZE[$key]=$(mb $(( $(stat -c %s "$out" 2>/dev/null || echo 0) / 1024 )))
    TRIPS[$key]=$(stat_of "$(cat "$WORK/$key.err")" "round trips")
    TRIPS[$key]=${TRIPS[$key]:-—}
    [[ -z ${STATUS[$key]} ]] || log "$key: ${STATUS[$key]}"
    rm -f "$out"
done

# timed KEY TABLE: one run under GNU time, appended to KEY.TABLE.samples.
timed() {
    local out
    out=$(timed_out "$1")
    cmd_for "$1" "$2" "$out"
    if timed_run "${CMD[@]}" 2>"$WORK/$1.run.err"; then
        echo "$TIME_SAMPLE" >>"$WORK/$1.$2.samples"
    else
        STATUS[$1]="FAILED: timed run ($(tail -n 1 "$WORK/$1.run.err"))"
    fi
    [[ $out == /dev/null ]] || rm -f "$out"
    assert_dev_null "$1"
}

for (( rep = 1; rep <= REPS; rep++ )); do
    for key in "${VARIANTS[@]}"; do
        [[ -z ${STATUS[$key]} ]] || continue
        log "rep $rep/$REPS: $key"
        timed "$key" payment_events
    done
done

if [[ $SCALE_CHECK == 1 ]]; then
    for (( rep = 1; rep <= REPS; rep++ )); do
        for key in sluice_arrow sluice_parquet; do
            log "scale check rep $rep/$REPS: $key on $SCALE_TABLE"
            timed "$key" "$SCALE_TABLE"
        done
    done
fi

# ----------------------------------------------------------------- report --

REF_S=$(median 1 "$WORK/psql.payment_events.samples")
DATE=$(date -u +%Y-%m-%d)
# A scale check (usually without peers) must not replace the day's full table.
REPORT="$RESULTS/columnar-$DATE.md"
[[ $SCALE_CHECK == 1 ]] && REPORT="$RESULTS/columnar-scale-$DATE.md"
SETTINGS="ROWS=$ROWS REPS=$REPS"
[[ $SCALE_CHECK == 1 ]] && SETTINGS+=" SCALE_CHECK=1"
FAILED=0
SCALE_FAILED=0
{
    echo "# Arrow and Parquet export benchmark — $DATE"
    echo
    echo "\`select * from payment_events\` ($(fmt_int "$ROWS") rows). Median of $REPS interleaved runs after a warm-up; wall time and peak RSS of the client process (\`/usr/bin/time -f '%e %M'\`). Arrow streams go to /dev/null, Parquet to a file."
    echo
    echo "| variant | median s | × psql CSV | peak RSS MB | output MB | round trips |"
    echo "| --- | ---: | ---: | ---: | ---: | ---: |"
    for key in "${VARIANTS[@]}"; do
        samples="$WORK/$key.payment_events.samples"
        if [[ -n ${STATUS[$key]} || ! -s $samples ]]; then
            echo "| ${LABEL[$key]} | ${STATUS[$key]:-no data} | | | | |"
            FAILED=1
            continue
        fi
        s=$(median 1 "$samples")
        size=${SIZE[$key]}
        [[ $key == psql ]] && size="${size} (CSV)"
        printf '| %s | %.2f | %s | %s | %s | %s |\n' "${LABEL[$key]}" "$s" "$(ratio_of "$s" "$REF_S")" \
            "$(mb "$(median 2 "$samples")")" "$size" "${TRIPS[$key]}"
    done
    echo
    for peer in connectorx polars psycopg adbc; do
        [[ -s $WORK/${peer}_arrow.payment_events.samples && -s $WORK/sluice_arrow.payment_events.samples ]] || continue
        echo "- sluice Arrow vs $peer Arrow: $(ratio_of "$(median 1 "$WORK/sluice_arrow.payment_events.samples")" "$(median 1 "$WORK/${peer}_arrow.payment_events.samples")") the time, $(ratio_of "$(median 2 "$WORK/sluice_arrow.payment_events.samples")" "$(median 2 "$WORK/${peer}_arrow.payment_events.samples")") the peak RSS; Parquet: $(ratio_of "$(median 1 "$WORK/sluice_parquet.payment_events.samples")" "$(median 1 "$WORK/${peer}_parquet.payment_events.samples")") the time"
    done
    echo
    if [[ $SCALE_CHECK == 1 ]]; then
        for key in sluice_arrow sluice_parquet; do
            echo "## Memory vs row count ($key)"
            echo
            flatness_table "$WORK/$key.payment_events.samples" "$WORK/$key.$SCALE_TABLE.samples" "$ROWS" "$SCALE_ROWS"
            echo
            echo "Verdict: $SCALE_VERDICT"
            echo
            [[ $SCALE_VERDICT != NOT* ]] || SCALE_FAILED=1
        done
    fi
    # shellcheck disable=SC2119
    machine_section
    echo "- peers: $("$PY" --version 2>&1) in ${COLUMNAR_VENV#"$ROOT"/}: ${PEER_PINS[*]}"
    echo "- load average at start: $LOAD_AVG_START; at end: $(load_average)"
    echo
    reproduce_section columnar.sh "$SETTINGS"
    echo
    raw_samples_section "$WORK"/*.samples
} >"$REPORT"

show_report "$REPORT"
if (( FAILED )); then exit 1; fi
if (( SCALE_FAILED )); then exit 3; fi
exit 0
