#!/usr/bin/env bash
# bench/python.sh — the `sluice` Python package against what Python users use
# today: payment_events into pyarrow, pandas and polars, and a DataFrame back
# into a table.
#
# One command, run from anywhere:
#
#     bash bench/python.sh
#
# Environment (all optional; see bench/lib/common.sh):
#   SLUICE_BENCH_PG_URL, ROWS (1000000), REPS (3), SKIP_BUILD=1, SLUICE_BIN, PYTHON
#   TO_SQL_ROWS     rows pandas `to_sql` writes (default 100000: at its speed
#                   the whole table would take many minutes); its time is
#                   also shown scaled to ROWS
#
# What it does:
#   1. makes sure payment_events holds ROWS rows (bench/lib/payment_events.sh),
#      builds sluice (release) and bench/.venv-python with the pinned peers;
#   2. exports payment_events once as an Arrow stream (the writers' DataFrame)
#      and as CSV (psql's `\copy … from … csv`, the write reference);
#   3. times REPS interleaved repetitions of every variant of
#      bench/python_peers.py, each its own process under /usr/bin/time (wall
#      time and peak RSS; a write's time is that of the write alone, after the
#      DataFrame is loaded), every client on plain TCP (sslmode=disable);
#   4. prints a Markdown table and writes bench/results/python-<date>.md.

set -euo pipefail

LOG_PREFIX=python
# shellcheck source=lib/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/common.sh"
# shellcheck source=lib/payment_events.sh
source "$BENCH/lib/payment_events.sh"
TO_SQL_ROWS=${TO_SQL_ROWS:-100000}
require_positive_integers ROWS REPS TO_SQL_ROWS
(( TO_SQL_ROWS <= ROWS )) || TO_SQL_ROWS=$ROWS

PYTHON_VENV="$BENCH/.venv-python"
PEER_PINS=(connectorx==0.4.6 pyarrow==26.0.1 pandas==2.3.3 polars==2.1.0
           'psycopg[binary]==3.3.9' SQLAlchemy==2.1.9
           adbc-driver-manager==1.13.0 adbc-driver-postgresql==1.13.0)
LOAD_AVG_START=$(load_average)
# Every client on plain TCP: PLAIN_URL (bench/lib/common.sh).

ensure_tables
build_sluice

ensure_peer_venv "$PYTHON_VENV" "connectorx, polars, pandas, psycopg, sqlalchemy, adbc_driver_postgresql" "${PEER_PINS[@]}"
# The package from the source tree, driving the release binary (what the wheel holds).
export PYTHONPATH="$ROOT/python" SLUICE_BIN="$SLUICE"

SOURCE="$DATA/payment_events.arrows"
CSV="$DATA/payment_events.csv"
log "exporting payment_events as an Arrow stream and as CSV (the writers' input)"
"$SLUICE" export --db "$PLAIN_URL" --query "select * from payment_events" --format arrow >"$SOURCE"
pg -c "\\copy payment_events to '$CSV' csv"
pg -c "create table if not exists payment_events_py_write (like payment_events)"

READS=(connectorx_arrow sluice_arrow sluice_batches connectorx_pandas sluice_pandas connectorx_polars
       sluice_polars polars_uri psycopg_pandas psycopg_copy_arrow adbc_arrow)
# polars `write_database(engine="adbc")` is not among them: ADBC's binary COPY
# sends a string column into jsonb without jsonb's version byte, and the server
# refuses the first row ("unsupported jsonb version number 123", adbc 1.13.0);
# its other engine, SQLAlchemy, is pandas `to_sql` underneath, measured here.
WRITES=(psql_copy sluice_write psycopg_copy to_sql)
declare -A LABEL=(
    [connectorx_arrow]="ConnectorX $(peer_version connectorx) → pyarrow"
    [connectorx_pandas]="ConnectorX → pandas"
    [connectorx_polars]="ConnectorX → polars"
    [sluice_arrow]="**sluice \`read_arrow\`**"
    [sluice_batches]="**sluice \`read_batches\`** (streamed, not kept)"
    [sluice_pandas]="**sluice \`read_pandas\`**"
    [sluice_polars]="**sluice \`read_polars\`**"
    [polars_uri]="polars $(peer_version polars) \`read_database_uri\`"
    [psycopg_pandas]="psycopg $PSYCOPG_VERSION \`fetchall\` → pandas"
    [psycopg_copy_arrow]="psycopg binary COPY → pyarrow"
    [adbc_arrow]="adbc_driver_postgresql $(peer_version adbc-driver-postgresql) → pyarrow"
    [psql_copy]="psql \`\\copy … from … csv\` (reference)"
    [sluice_write]="**sluice \`write\`** (pandas DataFrame)"
    [psycopg_copy]="psycopg $PSYCOPG_VERSION COPY, \`write_row\` per row"
    [to_sql]="pandas $(peer_version pandas) \`to_sql(method=\"multi\")\`, $(fmt_int "$TO_SQL_ROWS") rows"
)

# run_variant KEY: one timed run; appends "wall_s rss_kb [write_s]" to KEY's samples.
run_variant() {
    local key=$1 command
    case $key in
        psql_copy) command=(psql "$PLAIN_URL" -X -q -v ON_ERROR_STOP=1 -c "\\copy payment_events_py_write from '$CSV' csv") ;;
        to_sql) command=("$PY" "$BENCH/python_peers.py" "$key" "$PLAIN_URL" --source "$SOURCE" --rows "$TO_SQL_ROWS") ;;
        sluice_write | psycopg_copy) command=("$PY" "$BENCH/python_peers.py" "$key" "$PLAIN_URL" --source "$SOURCE" --rows "$ROWS") ;;
        *) command=("$PY" "$BENCH/python_peers.py" "$key" "$PLAIN_URL") ;;
    esac
    if [[ " ${WRITES[*]} " == *" $key "* ]]; then pg -c "truncate payment_events_py_write"; fi
    if ! /usr/bin/time -f '%e %M' -o "$TIME_FILE" "${command[@]}" >"$WORK/out.json" 2>"$WORK/err"; then
        log "$key failed:"; tail -c 2000 "$WORK/err" >&2; exit 1
    fi
    local write_s
    write_s=$(sed -n 's/.*"seconds": \([0-9.e-]*\).*/\1/p' "$WORK/out.json")
    echo "$(tail -n 1 "$TIME_FILE") ${write_s:-}" >>"$WORK/$key.samples"
}

for (( rep = 1; rep <= REPS; rep++ )); do
    for key in "${READS[@]}" "${WRITES[@]}"; do
        log "repetition $rep/$REPS: $key"
        run_variant "$key"
    done
done

# seconds KEY: the median time of KEY: the write alone for the Python writers, the process otherwise.
seconds() {
    case $1 in
        sluice_write | psycopg_copy | to_sql) median 3 "$WORK/$1.samples" ;;
        *) median 1 "$WORK/$1.samples" ;;
    esac
}

REPORT="$RESULTS/python-$(date -u +%F).md"
{
    echo "# The sluice Python package against Python's database readers and writers"
    echo
    echo "$(fmt_int "$ROWS") rows of payment_events, median of $REPS interleaved runs, $(date -u '+%F %H:%M UTC')."
    echo
    echo "| read: payment_events → | seconds | × ConnectorX | peak RSS MB | × ConnectorX RSS |"
    echo "|---|---:|---:|---:|---:|"
    for key in "${READS[@]}"; do
        peer="connectorx_${key#*_}"
        [[ -e $WORK/$peer.samples ]] || peer=connectorx_arrow
        printf '| %s | %.2f | %s | %s | %s |\n' "${LABEL[$key]}" "$(seconds "$key")" \
            "$(ratio_of "$(seconds "$key")" "$(seconds "$peer")")" "$(mb "$(median 2 "$WORK/$key.samples")")" \
            "$(ratio_of "$(median 2 "$WORK/$key.samples")" "$(median 2 "$WORK/$peer.samples")")"
    done
    echo
    echo "| write: DataFrame → table | seconds | × psql \\copy | rows/s | peak RSS MB |"
    echo "|---|---:|---:|---:|---:|"
    for key in "${WRITES[@]}"; do
        rows=$ROWS
        [[ $key != to_sql ]] || rows=$TO_SQL_ROWS
        printf '| %s | %.2f | %s | %s | %s |\n' "${LABEL[$key]}" "$(seconds "$key")" \
            "$(ratio_of "$(awk -v s="$(seconds "$key")" -v r="$rows" -v n="$ROWS" 'BEGIN { print s * n / r }')" "$(seconds psql_copy)")" \
            "$(fmt_int "$(awk -v s="$(seconds "$key")" -v r="$rows" 'BEGIN { printf "%.0f", r / s }')")" \
            "$(mb "$(median 2 "$WORK/$key.samples")")"
    done
    echo
    echo "Read times are whole processes (Python start and imports included); write times"
    echo "are the write alone, after the DataFrame was loaded (psql: the whole \\copy)."
    echo "The × psql column of \`to_sql\` is scaled to $(fmt_int "$ROWS") rows from its rate."
    echo "Peak RSS is the whole process's, DataFrame included."
    echo
    machine_section --load-average
    reproduce_section python.sh "ROWS=$ROWS REPS=$REPS TO_SQL_ROWS=$TO_SQL_ROWS"
    echo
    raw_samples_section "$WORK"/*.samples
} >"$REPORT"
show_report "$REPORT"
