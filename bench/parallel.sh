#!/usr/bin/env bash
# bench/parallel.sh — reads in parts (`sluice export --jobs`, `read_arrow(jobs=)`)
# against the single-connection peers of issue 41, in one run.
#
# One command, run from anywhere:
#
#     bash bench/parallel.sh
#
# Environment (all optional; see bench/lib/common.sh):
#   SLUICE_BENCH_PG_URL, ROWS (1000000), REPS (3), SKIP_BUILD=1, SLUICE_BIN, PYTHON
#   JOBS   the part counts tried (default "1 2")
#
# What it does:
#   1. makes sure payment_events holds ROWS rows (bench/lib/payment_events.sh),
#      builds sluice (release) and bench/.venv-parallel with DuckDB and its
#      postgres extension from PyPI (loaded offline);
#   2. runs every variant once, checking it moves ROWS rows;
#   3. times REPS interleaved repetitions of every variant, each under
#      bench/lib/tree_rss.py: wall time and the peak of the summed RSS of the
#      process tree (Python and the sluice child it runs both count), every
#      client on plain TCP (`--output-dir` writes a Parquet file per part,
#      each part with its own encoder; the others write one output);
#   4. prints a Markdown table of medians with ratios to each job's reference
#      (psql `\copy` for CSV and NDJSON, DuckDB's COPY for Parquet, DuckDB's
#      scanner for Arrow in Python) and writes bench/results/parallel-<date>.md.

set -euo pipefail

LOG_PREFIX=parallel
# shellcheck source=lib/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/common.sh"
# shellcheck source=lib/payment_events.sh
source "$BENCH/lib/payment_events.sh"
require_positive_integers ROWS REPS
JOBS=${JOBS:-1 2}

PARALLEL_VENV="$BENCH/.venv-parallel"
PEER_PINS=(pyarrow==21.0.0 duckdb==1.4.4 duckdb-extensions==1.4.4 duckdb-extension-postgres==1.4.4)
LOAD_AVG_START=$(load_average)

ensure_tables
build_sluice
ensure_peer_venv "$PARALLEL_VENV" "pyarrow, duckdb, duckdb_extensions" "${PEER_PINS[@]}"
export PYTHONPATH="$ROOT/python" SLUICE_BIN="$SLUICE"
PARQUET="$WORK/out.parquet"
PARQUET_DIR="$WORK/parts"

VARIANTS=(psql_csv duckdb_parquet duckdb_arrow)
for jobs in $JOBS; do
    VARIANTS+=("sluice_csv_$jobs" "sluice_ndjson_$jobs" "sluice_parquet_$jobs" "sluice_parquetdir_$jobs" "sluice_arrow_$jobs")
done

# command_of KEY: CMD, KEY's command line; OUT, where its standard output goes.
command_of() {
    local key=$1 jobs=${1##*_}
    OUT=/dev/null
    case $key in
        psql_csv) CMD=(psql "$PLAIN_URL" -X -q -c "\\copy payment_events to stdout csv") ;;
        duckdb_parquet) CMD=("$PY" "$BENCH/parallel_peers.py" duckdb_parquet "$PLAIN_URL" "$PARQUET") ;;
        duckdb_arrow) CMD=("$PY" "$BENCH/parallel_peers.py" duckdb_arrow "$PLAIN_URL") ;;
        sluice_csv_*) CMD=("$SLUICE" export --db "$PLAIN_URL" --table payment_events --jobs "$jobs" --format csv) ;;
        sluice_ndjson_*) CMD=("$SLUICE" export --db "$PLAIN_URL" --table payment_events --jobs "$jobs") ;;
        sluice_parquet_*) CMD=("$SLUICE" export --db "$PLAIN_URL" --table payment_events --jobs "$jobs" --format parquet -o "$PARQUET") ;;
        sluice_parquetdir_*) CMD=("$SLUICE" export --db "$PLAIN_URL" --table payment_events --jobs "$jobs" --format parquet --output-dir "$PARQUET_DIR") ;;
        sluice_arrow_*) CMD=("$PY" "$BENCH/parallel_peers.py" sluice_arrow "$PLAIN_URL" "$jobs") ;;
    esac
}

declare -A LABEL=(
    [psql_csv]='psql `\copy … to stdout csv` (CSV and NDJSON reference)'
    [duckdb_parquet]="DuckDB $(peer_version duckdb) postgres scanner, \`COPY … TO\` Parquet (Parquet reference)"
    [duckdb_arrow]="DuckDB $(peer_version duckdb) postgres scanner, \`fetch_arrow_table\` (Arrow reference)"
)
for jobs in $JOBS; do
    LABEL[sluice_csv_$jobs]="sluice export --format csv --jobs $jobs"
    LABEL[sluice_ndjson_$jobs]="sluice export --format ndjson --jobs $jobs"
    LABEL[sluice_parquet_$jobs]="sluice export --format parquet --jobs $jobs"
    LABEL[sluice_parquetdir_$jobs]="sluice export --format parquet --jobs $jobs --output-dir (a file per part)"
    LABEL[sluice_arrow_$jobs]="sluice \`read_arrow(table=…, jobs=$jobs)\`"
done
declare -A REFERENCE=([psql_csv]=psql_csv [duckdb_parquet]=duckdb_parquet [duckdb_arrow]=duckdb_arrow)
for jobs in $JOBS; do
    REFERENCE[sluice_csv_$jobs]=psql_csv
    REFERENCE[sluice_ndjson_$jobs]=psql_csv
    REFERENCE[sluice_parquet_$jobs]=duckdb_parquet
    REFERENCE[sluice_parquetdir_$jobs]=duckdb_parquet
    REFERENCE[sluice_arrow_$jobs]=duckdb_arrow
done

# run KEY: one run under tree_rss.py; appends "elapsed_s peak_kb" to KEY's samples.
run() {
    command_of "$1"
    rm -rf "$PARQUET" "$PARQUET_DIR"
    tree_run "$1" "$OUT"
}

# check KEY: one untimed run whose output holds ROWS rows.
check() {
    local rows
    command_of "$1"
    rm -rf "$PARQUET" "$PARQUET_DIR"
    case $1 in
        *parquetdir*) "${CMD[@]}" >/dev/null; rows=$("$PY" -c "import pyarrow.dataset as d, sys; print(d.dataset(sys.argv[1], format='parquet').count_rows())" "$PARQUET_DIR") ;;
        *parquet*) "${CMD[@]}" >/dev/null; rows=$("$PY" -c "import pyarrow.parquet as p, sys; print(p.read_metadata(sys.argv[1]).num_rows)" "$PARQUET") ;;
        *arrow*) rows=$("${CMD[@]}") ;;
        sluice_csv_*) rows=$(( $("${CMD[@]}" | wc -l) - 1 )) ;;
        *) rows=$("${CMD[@]}" | wc -l) ;;
    esac
    [[ $rows == "$ROWS" ]] || { log "$1 moved $rows rows, not $ROWS"; exit 1; }
}

check_then_time "${VARIANTS[@]}"

REPORT=$(report_path parallel)
{
    echo "# Reads in parts against single-connection peers"
    echo
    echo "$(fmt_int "$ROWS") rows of payment_events, median of $REPS interleaved runs, $(date -u '+%F %H:%M UTC'); peak RSS is the whole process tree's."
    echo
    ratio_table "${VARIANTS[@]}"
    echo
    echo "## Commands"
    echo
    commands_block command_of "${VARIANTS[@]}"
    echo
    machine_section --load-average
    reproduce_section parallel.sh "ROWS=$ROWS REPS=$REPS JOBS='$JOBS'"
    echo
    samples=()
    for key in "${VARIANTS[@]}"; do samples+=("$WORK/$key.samples"); done
    raw_samples_section "${samples[@]}"
} >"$REPORT"
show_report "$REPORT"
