#!/usr/bin/env bash
# bench/mariadb_columnar.sh — MariaDB into Arrow and Parquet: sluice against
# ConnectorX and DuckDB's mysql scanner, in one run (issue 41).
#
# One command, run from anywhere:
#
#     bash bench/mariadb_columnar.sh
#
# Environment (all optional; see bench/lib/common.sh and
# bench/lib/mariadb_payment_events.sh):
#   SLUICE_BENCH_MARIADB_URL (mariadb://root@127.0.0.1:3306/test), ROWS
#   (1000000), REPS (3), SKIP_BUILD=1, SLUICE_BIN, PYTHON
#
# What it does:
#   1. makes sure MariaDB's payment_events holds ROWS rows, builds sluice
#      (release) and bench/.venv-mariadb-columnar with pyarrow, ConnectorX,
#      DuckDB and its mysql extension from PyPI (loaded offline);
#   2. runs every variant once, checking it reads ROWS rows;
#   3. times REPS interleaved repetitions of every variant, each under
#      bench/lib/tree_rss.py: wall time and the peak of the summed RSS of the
#      process tree (Python and the sluice child it runs both count), every
#      client on plain TCP without TLS;
#   4. prints a Markdown table of medians with ratios to each job's
#      reference (ConnectorX for Arrow in Python, DuckDB's COPY for Parquet)
#      and writes bench/results/mariadb-columnar[-ROWS]-<date>.md.

set -euo pipefail

LOG_PREFIX=mariadb-columnar
# shellcheck source=lib/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/common.sh"
# shellcheck source=lib/mariadb_payment_events.sh
source "$BENCH/lib/mariadb_payment_events.sh"
require_positive_integers ROWS REPS

VENV_DIR="$BENCH/.venv-mariadb-columnar"
PEER_PINS=(pyarrow==21.0.0 connectorx==0.4.6 duckdb==1.4.4 duckdb-extensions==1.4.4
           duckdb-extension-mysql-scanner==1.4.4)
LOAD_AVG_START=$(load_average)

mdb_check_server
ensure_mdb_table payment_events "$ROWS"
build_sluice
ensure_peer_venv "$VENV_DIR" "pyarrow, connectorx, duckdb, duckdb_extensions" "${PEER_PINS[@]}"
export PYTHONPATH="$ROOT/python" SLUICE_BIN="$SLUICE"
PARQUET="$WORK/out.parquet"

VARIANTS=(connectorx_arrow duckdb_arrow sluice_arrow duckdb_parquet connectorx_parquet sluice_parquet)

# command_of KEY: CMD, KEY's command line.
command_of() {
    case $1 in
        sluice_parquet) CMD=("$SLUICE" export --db "$SLUICE_SURL" --query "select * from payment_events" --format parquet -o "$PARQUET") ;;
        *_parquet) CMD=("$PY" "$BENCH/mariadb_columnar_peers.py" "$1" "$SURL" "$PARQUET") ;;
        sluice_arrow) CMD=("$PY" "$BENCH/mariadb_columnar_peers.py" "$1" "$SLUICE_SURL") ;;
        *) CMD=("$PY" "$BENCH/mariadb_columnar_peers.py" "$1" "$SURL") ;;
    esac
}

declare -A LABEL=(
    [connectorx_arrow]="ConnectorX $(peer_version connectorx) \`read_sql(…, return_type=\"arrow\")\` (Arrow reference)"
    [duckdb_arrow]="DuckDB $(peer_version duckdb) mysql scanner, \`fetch_arrow_table\`"
    [sluice_arrow]='sluice `read_arrow(url, "select * from payment_events")`'
    [duckdb_parquet]="DuckDB $(peer_version duckdb) mysql scanner, \`COPY … TO\` Parquet zstd (Parquet reference)"
    [connectorx_parquet]="ConnectorX $(peer_version connectorx) + pyarrow $(peer_version pyarrow) \`write_table\` zstd"
    [sluice_parquet]='sluice export --format parquet (zstd)'
)
declare -A REFERENCE=(
    [connectorx_arrow]=connectorx_arrow [duckdb_arrow]=connectorx_arrow [sluice_arrow]=connectorx_arrow
    [duckdb_parquet]=duckdb_parquet [connectorx_parquet]=duckdb_parquet [sluice_parquet]=duckdb_parquet
)

# run KEY: one run under tree_rss.py; appends "elapsed_s peak_kb" to KEY's samples.
run() {
    command_of "$1"
    rm -f "$PARQUET"
    tree_run "$1" /dev/null
}

# check KEY: one untimed run that reads ROWS rows.
check() {
    local rows
    command_of "$1"
    rm -f "$PARQUET"
    case $1 in
        *parquet) "${CMD[@]}" >/dev/null; rows=$("$PY" -c "import pyarrow.parquet as p, sys; print(p.read_metadata(sys.argv[1]).num_rows)" "$PARQUET") ;;
        *) rows=$("${CMD[@]}") ;;
    esac
    [[ $rows == "$ROWS" ]] || { log "$1 read $rows rows, not $ROWS"; exit 1; }
}

check_then_time "${VARIANTS[@]}"

REPORT=$(report_path mariadb-columnar)
{
    echo "# MariaDB into Arrow and Parquet"
    echo
    echo "$(fmt_int "$ROWS") rows of MariaDB's payment_events ($(table_mb payment_events) MB on disk), median of $REPS interleaved runs, $(date -u '+%F %H:%M UTC'); peak RSS is the whole process tree's."
    echo
    ratio_table "${VARIANTS[@]}"
    echo
    echo "## Commands"
    echo
    commands_block command_of "${VARIANTS[@]}"
    echo
    mdb_machine_section "$("$PY" --version 2>&1), pyarrow $(peer_version pyarrow), ConnectorX $(peer_version connectorx), DuckDB $(peer_version duckdb) with duckdb-extension-mysql-scanner $(peer_version duckdb-extension-mysql-scanner) (${VENV_DIR#"$ROOT"/})"
    mdb_reproduce_section mariadb_columnar.sh "ROWS=$ROWS REPS=$REPS"
    echo
    samples=()
    for key in "${VARIANTS[@]}"; do samples+=("$WORK/$key.samples"); done
    raw_samples_section "${samples[@]}"
} >"$REPORT"
show_report "$REPORT"
