#!/usr/bin/env bash
# bench/mariadb.sh — sluice against MariaDB (or MySQL): export and import of
# payment_events, against the mariadb client and Python peers, in one run.
#
# One command, run from anywhere:
#
#     bash bench/mariadb.sh
#
# Environment (all optional; the same conventions as bench/run.sh):
#   SLUICE_BENCH_MARIADB_URL  server URL (default mariadb://root@127.0.0.1:3306/test)
#   ROWS                 rows in the table (default 1000000)
#   REPS                 timed repetitions (default 3); medians are reported
#   SCALE_CHECK=1        also a 5,000,000-row table: sluice NDJSON export and
#                        import peak RSS at ROWS vs 5M rows (must be flat)
#   SKIP_BUILD=1         do not run `cargo build --release -p sluice-cli`
#   SLUICE_BIN           sluice binary to use (default <target dir>/release/sluice)
#   PYTHON               interpreter used to create bench/.venv-mariadb (default python3)
#
# Needs the `mariadb` client (apt-get install mariadb-client), GNU time, a
# MariaDB server with the SEQUENCE engine (seq_1_to_N, MariaDB 10.0+) and
# local_infile=ON, Python 3 for the peers; psql is not needed.
#
# Connection (bench/lib/mariadb_payment_events.sh, shared with bench/copy.sh):
# host, port, user, password and database come from the URL
# (`localhost` becomes 127.0.0.1). Every client connects over plain TCP to that
# address: the mariadb client with `--no-defaults --protocol=TCP --skip-ssl`
# (no option files, no TLS), sluice (with ssl-mode=DISABLED), PyMySQL,
# mysqlclient and ConnectorX without TLS options. A password in the URL goes to
# every client through MYSQL_PWD, never on a command line: sluice and the
# Python scripts get the URL without it.
#
# The table (its generator, ensure_mdb_table, is in
# bench/lib/mariadb_payment_events.sh): payment_events, the MariaDB twin of bench/lib/payment_events.sh's
# PostgreSQL table, with the same columns, the same value distributions and the
# same quirks (commas, quotes, non-ASCII text, ~2% NULL descriptions,
# microseconds), filled with one INSERT … SELECT from the SEQUENCE engine's
# seq_1_to_N. The values are deterministic but not PostgreSQL's: each row's
# ten 48-bit hashes are slices of SHA2('payment_events:<id>', 512), since
# MariaDB has no hashint8extended. Types, PostgreSQL -> MariaDB:
#   id          bigint         -> BIGINT NOT NULL, PRIMARY KEY (declared up
#                                 front: InnoDB clusters rows on it)
#   account_id  bigint         -> BIGINT
#   amount      numeric(12,2)  -> DECIMAL(12,2)
#   currency    char(3)        -> CHAR(3)
#   status      text           -> VARCHAR(16)
#   created_at  timestamptz    -> DATETIME(6), holding UTC. Not TIMESTAMP(6):
#                                 sluice writes TIMESTAMP values with "+00",
#                                 which MariaDB's LOAD DATA (the import
#                                 reference) refuses
#   description text           -> VARCHAR(255) (the longest is 49 characters)
#   payload     jsonb          -> JSON (MariaDB: LONGTEXT with a json_valid()
#                                 check), compact (JSON_COMPACT), keys in
#                                 jsonb_build_object's order; three_ds a JSON
#                                 boolean
# The PostgreSQL table has no boolean column (three_ds lives in the payload),
# so none is TINYINT(1) here either. utf8mb4, InnoDB. The table comment
# records generator version and row count; the table is recreated when either
# (or its count(*)) differs. SCALE_CHECK=1 adds payment_events_5m the same way.
#
# Export, `select * from payment_events`, each to /dev/null when timed:
#   mariadb_cli            the reference: mariadb --quick --batch --skip-column-names -e '…'
#   sluice_csv             sluice export --format csv
#   sluice_ndjson          sluice export --format ndjson
#   sluice_ndjson_fs10000  the same with --fetch-size 10000 (a cursor)
#   pymysql_sscursor       bench/mariadb_export.py pymysql: SSCursor, json.dumps per row
#   mysqlclient_sscursor   bench/mariadb_export.py mysqlclient: the same on MySQLdb
#   connectorx_arrow       bench/mariadb_export.py connectorx: read_sql(…,
#                          return_type="arrow"), written with pyarrow's IPC stream writer
# Import into payment_events_load (CREATE TABLE … LIKE payment_events: same
# columns, primary key and JSON check), TRUNCATEd before every run, untimed:
#   mariadb_load_data      the reference: mariadb --local-infile=1 -e "LOAD DATA
#                          LOCAL INFILE '<csv>' INTO TABLE … FIELDS TERMINATED BY ','
#                          OPTIONALLY ENCLOSED BY '\"' LINES TERMINATED BY '\n' IGNORE 1 LINES"
#   sluice_import_csv      sluice import of the CSV
#   sluice_import_ndjson   sluice import of the NDJSON
#   pymysql_executemany    bench/mariadb_import.py: NDJSON, executemany 10,000 rows a
#                          call, autocommit off, one commit at the end
# The inputs are bench/data/mariadb_payment_events.{csv,ndjson}, written once
# by `sluice export` (ordered by id) and reused while their line count and the
# table's marker match.
#
# The Python peers live in bench/.venv-mariadb (made on first use, pinned:
# PEER_PINS and MYSQLCLIENT_PIN below). mysqlclient is a C extension on
# libmariadb: when its headers are missing the script installs libmariadb-dev
# (apt-get, as root); if mysqlclient still cannot be built, its row says why and
# the rest runs.
#
# What it does, in order:
#   1. makes sure payment_events holds exactly ROWS generated rows (recreated
#      if not); builds sluice; makes the venv;
#   2. export: one untimed reference run (warm-up), then every variant once
#      untimed to a file, checked for ROWS rows (NDJSON: first and last line
#      objects with the 8 columns; Arrow: the file's row count) and, for
#      sluice, with --stats for its round trips; then REPS repetitions,
#      interleaved, under /usr/bin/time, to /dev/null;
#   3. import: the input files, then every variant once untimed, after which
#      the target must hold ROWS rows equal to the source's (NULL-safe, JSON
#      compared with JSON_EQUALS; the reference's known difference, LOAD DATA
#      reading an empty CSV field as '' where sluice wrote a NULL, is noted
#      rather than failed), with --stats for sluice; then REPS interleaved timed
#      runs, each followed by a row count;
#   4. with SCALE_CHECK=1, REPS sluice NDJSON exports of payment_events_5m and
#      imports of its NDJSON into payment_events_load_5m;
#   5. prints Markdown tables (median s, × reference, peak RSS, round trips)
#      and the targets' verdicts, and writes them to bench/results/mariadb-<date>.md.
#
# Targets (from the issue): sluice NDJSON export ≤ 1.0× and sluice CSV import
# ≤ 1.1× the reference, peak RSS flat in the row count. The report says
# whether each was met; missing a time target does not change the exit status.
#
# Exit status: 0 if all went well; 1 if a variant failed its run or its check
# (the results file is still written, with the failure in it); 2 for a bad
# setting or a missing tool; 3 if SCALE_CHECK=1 found sluice's memory growing
# with the row count; 4 if /dev/null stopped being a device.

set -euo pipefail

# ---------------------------------------------------------------- settings --

LOG_PREFIX=mariadb-bench
BENCH_NO_PSQL=1
# Shared settings (ROWS, REPS, SKIP_BUILD, SLUICE, ...), scratch WORK, log,
# timing and report helpers.
# shellcheck source=lib/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/common.sh"
# table_for, SCALE_CHECK and SCALE_ROWS (its PostgreSQL generator is not used).
# shellcheck source=lib/payment_events.sh
source "$BENCH/lib/payment_events.sh"
require_positive_integers ROWS REPS
# The MariaDB connection and table generator (ensure_mdb_table).
# shellcheck source=lib/mariadb_payment_events.sh
source "$BENCH/lib/mariadb_payment_events.sh"
# The MariaDB URL replaces common.sh's PostgreSQL one.
URL=$MDB_URL
URL_SHOWN=$MDB_URL_SHOWN
LOAD_TABLE=payment_events_load
IMPORT_BATCH=10000           # rows per executemany call of the PyMySQL peer
MDB_VENV="$BENCH/.venv-mariadb"
# Pinned peers; all install as wheels on CPython 3.11 x86_64 except mysqlclient
# (built from source against libmariadb).
PEER_PINS=(PyMySQL==1.2.4 connectorx==0.4.6 pyarrow==26.0.1)
MYSQLCLIENT_PIN=mysqlclient==2.3.1

LOAD_AVG_START=$(load_average)
mdb_check_server

# ------------------------------------------------------------- the table --

ensure_mdb_table payment_events "$ROWS"
SCALE_TABLE=$(table_for "$SCALE_ROWS")
SCALE_LOAD_TABLE=$LOAD_TABLE${SCALE_TABLE#payment_events}   # payment_events_load_5m
if [[ $SCALE_CHECK == 1 ]]; then ensure_mdb_table "$SCALE_TABLE" "$SCALE_ROWS"; fi

# ------------------------------------------------------------------ sluice --

build_sluice
# sluice writes the import inputs and is what this benchmark is about.
if ! [[ -x $SLUICE ]] || ! "$SLUICE" import --help >/dev/null 2>&1; then
    echo "$SLUICE is missing or has no import command: build it (cargo build --release -p sluice-cli) or set SLUICE_BIN" >&2
    exit 2
fi

# ------------------------------------------------------------ Python peers --

# ensure_peers: MPY, the interpreter of bench/.venv-mariadb with PEER_PINS
# (made with PYTHON, default python3, when missing or its pins changed), and
# mysqlclient when it can be had; MYSQLCLIENT_WHY says why not otherwise.
ensure_peers() {
    MPY="$MDB_VENV/bin/python"
    local stamp="$MDB_VENV/.sluice-bench-pins" log_file="$WORK/pip.log"
    if ! [[ -x $MPY ]] || [[ $(cat "$stamp" 2>/dev/null) != "${PEER_PINS[*]}" ]]; then
        log "making ${MDB_VENV#"$ROOT"/} with ${PEER_PINS[*]}"
        [[ -x $MPY ]] || "${PYTHON:-python3}" -m venv "$MDB_VENV"
        if ! "$MPY" -m pip install --quiet "${PEER_PINS[@]}" >"$log_file" 2>&1; then
            cat "$log_file" >&2
            echo "pip install ${PEER_PINS[*]} into $MDB_VENV failed" >&2
            exit 2
        fi
        printf '%s\n' "${PEER_PINS[*]}" >"$stamp"
    fi
    MYSQLCLIENT_WHY=""
    if [[ $(peer_version mysqlclient) == "${MYSQLCLIENT_PIN#*==}" ]] && "$MPY" -c 'import MySQLdb' 2>/dev/null; then
        return
    fi
    # mysqlclient's build asks pkg-config for libmariadb (or libmysqlclient).
    if ! command -v pkg-config >/dev/null || ! { pkg-config --exists libmariadb || pkg-config --exists mysqlclient; }; then
        if (( EUID == 0 )) && command -v apt-get >/dev/null; then
            log "apt-get install libmariadb-dev pkg-config (headers for mysqlclient)"
            if ! DEBIAN_FRONTEND=noninteractive apt-get install -y -q libmariadb-dev pkg-config >"$WORK/apt.log" 2>&1; then
                apt-get update -q >>"$WORK/apt.log" 2>&1 || true
                DEBIAN_FRONTEND=noninteractive apt-get install -y -q libmariadb-dev pkg-config >>"$WORK/apt.log" 2>&1 ||
                    MYSQLCLIENT_WHY="not available: apt-get install libmariadb-dev pkg-config failed ($(grep -m 1 -E '^E:' "$WORK/apt.log" || tail -n 1 "$WORK/apt.log"))"
            fi
        else
            MYSQLCLIENT_WHY="not available: its build needs libmariadb-dev and pkg-config (apt-get install libmariadb-dev pkg-config, as root)"
        fi
    fi
    if [[ -z $MYSQLCLIENT_WHY ]]; then
        log "pip install $MYSQLCLIENT_PIN (builds against libmariadb)"
        if ! "$MPY" -m pip install --quiet "$MYSQLCLIENT_PIN" >"$log_file" 2>&1; then
            MYSQLCLIENT_WHY="not available: pip install $MYSQLCLIENT_PIN failed ($(grep -m 1 -iE 'error|exception' "$log_file" | sed 's/|/\\|/g' || echo "see pip's output"))"
        elif ! "$MPY" -c 'import MySQLdb' 2>"$log_file"; then
            MYSQLCLIENT_WHY="not available: import MySQLdb failed ($(tail -n 1 "$log_file"))"
        fi
    fi
    [[ -z $MYSQLCLIENT_WHY ]] || log "mysqlclient $MYSQLCLIENT_WHY"
}
# peer_version DIST: the installed version of a distribution in the venv, or nothing.
peer_version() {
    "$MPY" -c 'import importlib.metadata as m, sys
try: print(m.version(sys.argv[1]))
except m.PackageNotFoundError: pass' "$1" 2>/dev/null || true
}

ensure_peers
PYMYSQL_VERSION=$(peer_version PyMySQL)
CONNECTORX_VERSION=$(peer_version connectorx)
PYARROW_VERSION=$(peer_version pyarrow)
MYSQLCLIENT_VERSION=$(peer_version mysqlclient)

# --------------------------------------------------------------- variants --

EXPORT_VARIANTS=(mariadb_cli sluice_csv sluice_ndjson sluice_ndjson_fs10000
                 pymysql_sscursor mysqlclient_sscursor connectorx_arrow)
IMPORT_VARIANTS=(mariadb_load_data sluice_import_csv sluice_import_ndjson pymysql_executemany)
# shellcheck disable=SC2016  # the backticks are Markdown code spans
declare -A LABEL=(
    [mariadb_cli]='mariadb `--quick --batch --skip-column-names` (reference)'
    [sluice_csv]='sluice CSV'
    [sluice_ndjson]='sluice NDJSON'
    [sluice_ndjson_fs10000]='sluice NDJSON `--fetch-size 10000`'
    [pymysql_sscursor]="PyMySQL ${PYMYSQL_VERSION:-?} \`SSCursor\` NDJSON"
    [mysqlclient_sscursor]="mysqlclient ${MYSQLCLIENT_VERSION:-${MYSQLCLIENT_PIN#*==}} \`SSCursor\` NDJSON"
    [connectorx_arrow]="ConnectorX ${CONNECTORX_VERSION:-?} to Arrow (pyarrow ${PYARROW_VERSION:-?} IPC stream)"
    [mariadb_load_data]='mariadb `LOAD DATA LOCAL INFILE` CSV (reference)'
    [sluice_import_csv]='sluice CSV'
    [sluice_import_ndjson]='sluice NDJSON'
    [pymysql_executemany]="PyMySQL ${PYMYSQL_VERSION:-?} \`executemany\` from NDJSON, $(fmt_int "$IMPORT_BATCH") rows a call"
)
is_sluice() { [[ $1 == sluice_* ]]; }

# export_cmd KEY TABLE OUT: CMD, the argv exporting `select * from TABLE` to
# OUT; the reference writes to standard output instead (OUT unused).
export_cmd() {
    local key=$1 out=$3 q="select * from $2"
    case $key in
        mariadb_cli)           CMD=(mariadb "${MDB_ARGS[@]}" --quick --batch --skip-column-names -e "$q" "$MDB_DB") ;;
        sluice_csv)            CMD=("$SLUICE" export --db "$SLUICE_SURL" --query "$q" --format csv --output "$out") ;;
        sluice_ndjson)         CMD=("$SLUICE" export --db "$SLUICE_SURL" --query "$q" --format ndjson --output "$out") ;;
        sluice_ndjson_fs10000) CMD=("$SLUICE" export --db "$SLUICE_SURL" --query "$q" --format ndjson --output "$out" --fetch-size 10000) ;;
        pymysql_sscursor)      CMD=("$MPY" "$BENCH/mariadb_export.py" pymysql "$SURL" "$out" --query "$q") ;;
        mysqlclient_sscursor)  CMD=("$MPY" "$BENCH/mariadb_export.py" mysqlclient "$SURL" "$out" --query "$q") ;;
        connectorx_arrow)      CMD=("$MPY" "$BENCH/mariadb_export.py" connectorx "$SURL" "$out" --query "$q") ;;
    esac
}
# import_cmd KEY TARGET CSV NDJSON: CMD, the argv loading the input into TARGET.
import_cmd() {
    local key=$1 target=$2 csv=$3 ndjson=$4
    case $key in
        mariadb_load_data)    CMD=(mariadb "${MDB_ARGS[@]}" --local-infile=1 -e "LOAD DATA LOCAL INFILE '$csv' INTO TABLE $target FIELDS TERMINATED BY ',' OPTIONALLY ENCLOSED BY '\"' LINES TERMINATED BY '\\n' IGNORE 1 LINES" "$MDB_DB") ;;
        sluice_import_csv)    CMD=("$SLUICE" import --db "$SLUICE_SURL" --table "$target" "$csv") ;;
        sluice_import_ndjson) CMD=("$SLUICE" import --db "$SLUICE_SURL" --table "$target" "$ndjson") ;;
        pymysql_executemany)  CMD=("$MPY" "$BENCH/mariadb_import.py" "$SURL" "$ndjson" --table "$target" --batch-size "$IMPORT_BATCH") ;;
    esac
}

declare -A STATUS=()   # key -> "" (ok) | "not available: why" | "FAILED: why"
declare -A TRIPS=()    # key -> round trips from --stats, "?" or "—"
declare -A STATS=()    # key -> --stats of the checked run, for the report
declare -A NOTE=()     # key -> note column
declare -A OUT_MB=()   # export key -> size of the checked output
for key in "${EXPORT_VARIANTS[@]}" "${IMPORT_VARIANTS[@]}"; do
    STATUS[$key]=""; TRIPS[$key]="—"; NOTE[$key]=""
done
if [[ -n $MYSQLCLIENT_WHY ]]; then STATUS[mysqlclient_sscursor]=$MYSQLCLIENT_WHY; fi
NOTE[connectorx_arrow]="the whole result in memory, then written"
NOTE[pymysql_sscursor]="payload as a JSON string"
NOTE[mysqlclient_sscursor]="payload as a JSON string"

# trips_of FILE: the `round trips: N` total of a --stats output, or "?".
trips_of() {
    local n
    n=$(stat_of "$(cat "$1")" 'round trips' | grep -oE '^[0-9]+' || true)
    echo "${n:-?}"
}

# timed SAMPLES KEY: one run of CMD under GNU time (standard output to
# /dev/null), its "elapsed_s max_rss_kb" appended to SAMPLES; on failure KEY
# is marked FAILED.
timed() {
    local samples=$1 key=$2 err="$WORK/$2.run.err"
    if timed_run "${CMD[@]}" 2>"$err"; then
        echo "$TIME_SAMPLE" >>"$samples"
    else
        STATUS[$key]="FAILED: timed run exited non-zero ($(tail -n 1 "$err"))"
        log "$key: ${STATUS[$key]}"
    fi
    assert_dev_null "$key"
}

# ------------------------------------------------------------------ export --

# check_export KEY FILE: FILE holds ROWS rows in KEY's format; else says why.
check_export() {
    local key=$1 file=$2 lines bad
    case $key in
        connectorx_arrow)
            lines=$("$MPY" -c 'import sys, pyarrow as pa
with pa.memory_map(sys.argv[1]) as f: print(pa.ipc.open_stream(f).read_all().num_rows)' "$file" 2>&1) ||
                { echo "not an Arrow IPC stream: ${lines##*$'\n'}"; return 1; }
            [[ $lines == "$ROWS" ]] || { echo "$lines rows in the Arrow file, want $ROWS"; return 1; } ;;
        mariadb_cli)
            lines=$(wc -l <"$file")
            [[ $lines == "$ROWS" ]] || { echo "$lines lines, want $ROWS"; return 1; } ;;
        sluice_csv)
            lines=$(wc -l <"$file")
            [[ $lines == $((ROWS + 1)) ]] || { echo "$lines lines, want $ROWS + 1 header"; return 1; } ;;
        *)
            lines=$(wc -l <"$file")
            [[ $lines == "$ROWS" ]] || { echo "$lines lines, want $ROWS"; return 1; }
            # First and last record parse as JSON objects with the columns as keys.
            bad=$({ head -n 1 "$file"; tail -n 1 "$file"; } | "$MPY" -c '
import json, sys
want = ["id", "account_id", "amount", "currency", "status", "created_at", "description", "payload"]
for line in sys.stdin:
    keys = list(json.loads(line))
    if keys != want:
        sys.exit(f"keys {keys}, want {want}")
' 2>&1) || { echo "${bad##*$'\n'}"; return 1; } ;;
    esac
}

log "export warm-up: mariadb_cli on payment_events (untimed)"
export_cmd mariadb_cli payment_events /dev/null
"${CMD[@]}" >/dev/null

# Row check: every variant once, untimed, to a real file (this also warms
# binaries and Python imports); sluice with --stats for its round trips.
for key in "${EXPORT_VARIANTS[@]}"; do
    [[ -z ${STATUS[$key]} ]] || continue
    out="$DATA/mariadb-$key.out"
    rm -f "$out"   # a stale file from an interrupted run must not pass the check
    export_cmd "$key" payment_events "$out"
    if is_sluice "$key"; then CMD+=(--stats); fi
    log "export row check: $key"
    rc=0
    if [[ $key == mariadb_cli ]]; then
        "${CMD[@]}" >"$out" 2>"$WORK/$key.err" || rc=$?
    else
        "${CMD[@]}" >/dev/null 2>"$WORK/$key.err" || rc=$?
    fi
    if (( rc != 0 )); then
        STATUS[$key]="FAILED: exit status $rc ($(tail -n 1 "$WORK/$key.err"))"
    elif ! why=$(check_export "$key" "$out"); then
        STATUS[$key]="FAILED: $why"
    fi
    [[ -e $out ]] && OUT_MB[$key]=$(mb "$(( $(stat -c %s "$out") / 1024 ))")
    if is_sluice "$key"; then
        STATS[$key]=$(cat "$WORK/$key.err")
        TRIPS[$key]=$(trips_of "$WORK/$key.err")
    fi
    [[ -z ${STATUS[$key]} ]] || log "$key: ${STATUS[$key]}"
    rm -f "$out"   # up to a few hundred MB each
done

# Interleaved: rep 1 of every variant, then rep 2, ... so a burst of machine
# noise hits all variants alike.
for (( rep = 1; rep <= REPS; rep++ )); do
    for key in "${EXPORT_VARIANTS[@]}"; do
        [[ -z ${STATUS[$key]} ]] || continue
        log "export rep $rep/$REPS: $key"
        export_cmd "$key" payment_events /dev/null
        timed "$WORK/export.$key.payment_events.samples" "$key"
    done
done

# ------------------------------------------------------------------ import --

# ensure_inputs TABLE N FORMATS...: $DATA/mariadb_TABLE.{csv,ndjson} written by
# sluice export (ordered by id; CSV with its header line), reused while the
# line count matches and $DATA/mariadb_TABLE.marker holds the table's marker.
ensure_inputs() {
    local table=$1 n=$2 marker fmt file want lines tmp base="$DATA/mariadb_$1"
    shift 2
    marker=$(table_marker "$table")
    for fmt in "$@"; do
        file="$base.$fmt"
        if [[ $fmt == csv ]]; then want=$((n + 1)); else want=$n; fi
        if [[ -s $file && -f $base.marker && $(cat "$base.marker") == "$marker" ]]; then
            lines=$(wc -l <"$file")
            if [[ $lines == "$want" ]]; then
                log "input ${file#"$ROOT"/}: $n rows, up to date"
                continue
            fi
        fi
        log "input ${file#"$ROOT"/}: sluice export of $table"
        tmp="$file.tmp"
        rm -f "$tmp"
        "$SLUICE" export --db "$SLUICE_SURL" --query "select * from $table order by id" --format "$fmt" --output "$tmp"
        lines=$(wc -l <"$tmp")
        [[ $lines == "$want" ]] || { echo "export of $table to $fmt wrote $lines lines, want $want" >&2; exit 1; }
        mv -f "$tmp" "$file"
    done
    printf '%s\n' "$marker" >"$base.marker"
}
ensure_inputs payment_events "$ROWS" csv ndjson
CSV="$DATA/mariadb_payment_events.csv"
NDJSON="$DATA/mariadb_payment_events.ndjson"

# make_target NAME: an empty NAME shaped like payment_events (columns, primary
# key, the JSON check), its comment overwritten so it isn't taken for a source.
make_target() {
    mdb -e "DROP TABLE IF EXISTS $1;
            CREATE TABLE $1 LIKE payment_events;
            ALTER TABLE $1 COMMENT = 'sluice-bench import target (bench/mariadb.sh)'"
}
make_target "$LOAD_TABLE"
[[ $SCALE_CHECK == 1 ]] && make_target "$SCALE_LOAD_TABLE"

# check_import KEY TARGET SOURCE: TARGET holds exactly SOURCE's rows, column by
# column (NULL-safe; JSON compared as JSON); else CHECK_WHY says why. For the
# LOAD DATA reference, NULL descriptions loaded as '' are noted in NOTE, not
# failed: LOAD DATA reads an empty CSV field as an empty string, and sluice
# writes NULL as an empty field.
check_import() {
    local key=$1 target=$2 source=$3 have want same differ strict loose nulls
    CHECK_WHY=""
    have=$(mdb -e "select count(*) from $target")
    want=$(mdb -e "select count(*) from $source")
    if [[ $have != "$want" ]]; then
        CHECK_WHY="$have rows in $target after the run, want $want"
        return 1
    fi
    same="l.account_id <=> p.account_id and l.amount <=> p.amount and l.currency <=> p.currency
          and l.status <=> p.status and l.created_at <=> p.created_at
          and coalesce(json_equals(l.payload, p.payload), l.payload is null and p.payload is null)"
    differ="select count(*) from $target l left join $source p on p.id = l.id where p.id is null or not"
    strict=$(mdb -e "$differ ($same and l.description <=> p.description)")
    [[ $strict != 0 ]] || return 0
    if [[ $key == mariadb_load_data ]]; then
        loose=$(mdb -e "$differ ($same and (l.description <=> p.description
                                             or (p.description is null and l.description = '')))")
        if [[ $loose == 0 ]]; then
            nulls=$(mdb -e "select count(*) from $source where description is null")
            NOTE[$key]="loads the $(fmt_int "$nulls") NULL descriptions as '' (an empty CSV field is an empty string to LOAD DATA); otherwise equal to the source"
            return 0
        fi
    fi
    CHECK_WHY="$strict rows differ from $source"
    return 1
}

# reset TARGET: untimed, before every run.
reset() { mdb -e "TRUNCATE TABLE $1"; }

log "import warm-up: reading the input files"
cat "$CSV" "$NDJSON" >/dev/null

# Check run: every variant once, untimed, then the target checked row by row;
# sluice with --stats for its round trips.
for key in "${IMPORT_VARIANTS[@]}"; do
    [[ -z ${STATUS[$key]} ]] || continue
    log "import check: $key"
    reset "$LOAD_TABLE"
    import_cmd "$key" "$LOAD_TABLE" "$CSV" "$NDJSON"
    if is_sluice "$key"; then CMD+=(--stats); fi
    rc=0
    "${CMD[@]}" >/dev/null 2>"$WORK/$key.err" || rc=$?
    if (( rc != 0 )); then
        STATUS[$key]="FAILED: exit status $rc ($(tail -n 1 "$WORK/$key.err"))"
    elif ! check_import "$key" "$LOAD_TABLE" payment_events; then
        STATUS[$key]="FAILED: $CHECK_WHY"
    fi
    if is_sluice "$key"; then
        STATS[$key]=$(cat "$WORK/$key.err")
        TRIPS[$key]=$(trips_of "$WORK/$key.err")
    fi
    [[ -z ${STATUS[$key]} ]] || log "$key: ${STATUS[$key]}"
done

# import_rep KEY TARGET CSV NDJSON WANT: reset, one timed run, row count.
import_rep() {
    local key=$1 target=$2 want=$5 have
    reset "$target"
    import_cmd "$key" "$target" "$3" "$4"
    timed "$WORK/import.$key.$target.samples" "$key"
    [[ -z ${STATUS[$key]} ]] || return 0
    have=$(mdb -e "select count(*) from $target")
    if [[ $have != "$want" ]]; then
        STATUS[$key]="FAILED: $have rows in $target after a timed run, want $want"
        log "$key: ${STATUS[$key]}"
    fi
}

for (( rep = 1; rep <= REPS; rep++ )); do
    for key in "${IMPORT_VARIANTS[@]}"; do
        [[ -z ${STATUS[$key]} ]] || continue
        log "import rep $rep/$REPS: $key"
        import_rep "$key" "$LOAD_TABLE" "$CSV" "$NDJSON" "$ROWS"
    done
done

# ------------------------------------------------------------- scale check --

EXPORT_SCALE_VERDICT=""
IMPORT_SCALE_VERDICT=""
if [[ $SCALE_CHECK == 1 ]]; then
    if [[ -n ${STATUS[sluice_ndjson]} ]]; then
        EXPORT_SCALE_VERDICT="not run: sluice NDJSON export ${STATUS[sluice_ndjson]}"
    else
        log "scale check: warm-up on $SCALE_TABLE (untimed)"
        export_cmd mariadb_cli "$SCALE_TABLE" /dev/null
        "${CMD[@]}" >/dev/null
        for (( rep = 1; rep <= REPS; rep++ )); do
            log "scale check rep $rep/$REPS: sluice_ndjson export of $SCALE_TABLE"
            export_cmd sluice_ndjson "$SCALE_TABLE" /dev/null
            timed "$WORK/export.sluice_ndjson.$SCALE_TABLE.samples" sluice_ndjson
        done
        if [[ -n ${STATUS[sluice_ndjson]} ]]; then
            EXPORT_SCALE_VERDICT="${STATUS[sluice_ndjson]} (at $SCALE_ROWS rows)"
            STATUS[sluice_ndjson]=""
        fi
    fi
    if [[ -n ${STATUS[sluice_import_ndjson]} ]]; then
        IMPORT_SCALE_VERDICT="not run: sluice NDJSON import ${STATUS[sluice_import_ndjson]}"
    else
        ensure_inputs "$SCALE_TABLE" "$SCALE_ROWS" ndjson
        SCALE_NDJSON="$DATA/mariadb_$SCALE_TABLE.ndjson"
        cat "$SCALE_NDJSON" >/dev/null
        for (( rep = 1; rep <= REPS; rep++ )); do
            log "scale check rep $rep/$REPS: sluice_import_ndjson, $SCALE_ROWS rows into $SCALE_LOAD_TABLE"
            import_rep sluice_import_ndjson "$SCALE_LOAD_TABLE" "" "$SCALE_NDJSON" "$SCALE_ROWS"
            if [[ -n ${STATUS[sluice_import_ndjson]} ]]; then
                # A failure here is the scale check's, not the ROWS row's.
                IMPORT_SCALE_VERDICT="${STATUS[sluice_import_ndjson]} (at $SCALE_ROWS rows)"
                STATUS[sluice_import_ndjson]=""
                break
            fi
        done
        mdb -e "TRUNCATE TABLE $SCALE_LOAD_TABLE"   # give back the space
    fi
fi

# ---------------------------------------------------------------- report --

SETTINGS="ROWS=$ROWS REPS=$REPS"
[[ $SCALE_CHECK == 1 ]] && SETTINGS+=" SCALE_CHECK=1"
DATE=$(date -u +%Y-%m-%d)
REPORT="$RESULTS/mariadb-$DATE.md"
FAILED=0

# samples_of PART KEY: the samples file of KEY's runs at ROWS rows.
samples_of() {
    if [[ $1 == export ]]; then echo "$WORK/export.$2.payment_events.samples"
    else echo "$WORK/import.$2.$LOAD_TABLE.samples"
    fi
}
# show_export / show_import KEY: CMD as the report shows it (the timed runs').
# shellcheck disable=SC2317  # called by commands_block
show_export() { export_cmd "$1" payment_events /dev/null; }
# shellcheck disable=SC2317
show_import() { import_cmd "$1" "$LOAD_TABLE" "$CSV" "$NDJSON"; }

# results_table PART VARIANTS...: the table of one part (export or import),
# ratios against the first variant (the reference); sets REF_S, and RATIO[key].
declare -A RATIO=()
results_table() {
    local part=$1 key samples s ref="" extra_head="" extra_rule="" extra
    shift
    samples=$(samples_of "$part" "$1")
    if [[ -s $samples ]]; then ref=$(median 1 "$samples"); fi
    if [[ $part == export ]]; then extra_head=" output MB |"; extra_rule=" ---: |"; fi
    echo "| variant | median s | × reference | peak RSS MB |$extra_head round trips | note |"
    echo "| --- | ---: | ---: | ---: |$extra_rule ---: | --- |"
    for key in "$@"; do
        samples=$(samples_of "$part" "$key")
        extra=""
        if [[ $part == export ]]; then extra=" ${OUT_MB[$key]:-} |"; fi
        if [[ -n ${STATUS[$key]} || ! -s $samples ]]; then
            echo "| ${LABEL[$key]} | ${STATUS[$key]:-no data} | | |$extra ${TRIPS[$key]} | ${NOTE[$key]} |"
            [[ ${STATUS[$key]} == FAILED* ]] && FAILED=1
            continue
        fi
        s=$(median 1 "$samples")
        RATIO[$key]=$(ratio_of "$s" "$ref")
        printf '| %s | %.2f | %s | %s |%s %s | %s |\n' "${LABEL[$key]}" "$s" "${RATIO[$key]}" \
            "$(mb "$(median 2 "$samples")")" "$extra" "$(fmt_int "${TRIPS[$key]}")" "${NOTE[$key]}"
    done
}

# target_line WHAT KEY LIMIT: whether KEY's ratio is at most LIMIT.
target_line() {
    local ratio=${RATIO[$2]:-}
    if [[ -z $ratio || $ratio == "?" ]]; then
        echo "- $1: no data (${STATUS[$2]:-no samples})"
    elif awk -v r="${ratio%×}" -v l="$3" 'BEGIN { exit !(r <= l) }'; then
        echo "- $1: $ratio the reference, target ≤ $3×: **met**"
    else
        echo "- $1: $ratio the reference, target ≤ $3×: **NOT met**"
    fi
}

# scale_section PART TITLE VERDICT SAMPLES_ROWS SAMPLES_SCALE: a flatness table.
scale_section() {
    local verdict=$3
    echo "### $2"
    echo
    if [[ -z $verdict && -s $4 && -s $5 ]]; then
        flatness_table "$4" "$5" "$(fmt_int "$ROWS")" "$(fmt_int "$SCALE_ROWS")"
        verdict=$SCALE_VERDICT
        echo
    fi
    echo "Verdict: ${verdict:-no data}"
    echo
    SECTION_VERDICT=${verdict:-no data}
}

BUFFER_POOL_MB=$(mdb -e 'select @@innodb_buffer_pool_size div 1048576')
FLUSH_METHOD=$(mdb -e 'select @@innodb_flush_method')
TABLE_MB=$(table_mb payment_events)
POOL_NOTE=""
if (( TABLE_MB > BUFFER_POOL_MB )); then
    from_where=""
    if [[ $FLUSH_METHOD == O_DIRECT* ]]; then
        from_where=" — from the disk itself, as innodb_flush_method=$FLUSH_METHOD bypasses the OS cache"
    fi
    POOL_NOTE=" **The table is larger than the server's InnoDB buffer pool ($BUFFER_POOL_MB MB)**, so every scan reads pages from outside it$from_where, for every variant alike: the times include the server's I/O, and ratios are closer to 1 than the clients alone would make them."
fi
{
    echo "# sluice MariaDB benchmark — $DATE"
    echo
    echo "\`payment_events\` in MariaDB: $(fmt_int "$ROWS") rows, $TABLE_MB MB on disk (generated by bench/mariadb.sh; columns as the PostgreSQL table's).$POOL_NOTE"
    echo "Median of $REPS interleaved runs, after an untimed checked run of each variant; wall time and peak RSS of the client process from \`/usr/bin/time -f '%e %M'\`. Round trips are sluice's \`--stats\` (including connecting)."
    echo
    echo "## Export: \`select * from payment_events\` to /dev/null"
    echo
    results_table export "${EXPORT_VARIANTS[@]}"
    echo
    echo "## Import: $(fmt_int "$ROWS") rows into an empty \`$LOAD_TABLE\`"
    echo
    echo "Inputs written once by \`sluice export\` in id order: $(du -m "$CSV" | cut -f1) MB CSV, $(du -m "$NDJSON" | cut -f1) MB NDJSON. The target is \`CREATE TABLE … LIKE payment_events\` (primary key on id, JSON check), TRUNCATEd before every run. Each variant's untimed first run is checked row by row against the source; every timed run's row count is checked."
    echo
    results_table import "${IMPORT_VARIANTS[@]}"
    echo
    echo "## Targets"
    echo
    target_line "export, sluice NDJSON" sluice_ndjson 1.0
    target_line "import, sluice CSV" sluice_import_csv 1.1
    if [[ $SCALE_CHECK == 1 ]]; then
        echo "- peak RSS flat in the row count: see below"
    else
        echo "- peak RSS flat in the row count: not checked (SCALE_CHECK=1 does); the tables give each variant's peak RSS at $(fmt_int "$ROWS") rows"
    fi
    echo
    if [[ $SCALE_CHECK == 1 ]]; then
        echo "## Memory vs row count (sluice NDJSON)"
        echo
        scale_section export "Export of \`$SCALE_TABLE\`" "$EXPORT_SCALE_VERDICT" \
            "$WORK/export.sluice_ndjson.payment_events.samples" "$WORK/export.sluice_ndjson.$SCALE_TABLE.samples"
        EXPORT_SCALE_VERDICT=$SECTION_VERDICT
        scale_section import "Import of \`$SCALE_TABLE\` as NDJSON into \`$SCALE_LOAD_TABLE\`" "$IMPORT_SCALE_VERDICT" \
            "$WORK/import.sluice_import_ndjson.$LOAD_TABLE.samples" "$WORK/import.sluice_import_ndjson.$SCALE_LOAD_TABLE.samples"
        IMPORT_SCALE_VERDICT=$SECTION_VERDICT
    fi

    mdb_machine_section "$("$MPY" --version 2>&1), PyMySQL ${PYMYSQL_VERSION:-?}, mysqlclient ${MYSQLCLIENT_VERSION:-not installed}, ConnectorX ${CONNECTORX_VERSION:-?}, pyarrow ${PYARROW_VERSION:-?} (${MDB_VENV#"$ROOT"/})"
    mdb_reproduce_section mariadb.sh "$SETTINGS"
    echo
    echo "## Commands timed"
    echo
    echo "Passwords, if any, travel in MYSQL_PWD. The mariadb reference writes to standard output, which is /dev/null when timed."
    echo
    commands_block show_export "${EXPORT_VARIANTS[@]}"
    echo
    commands_block show_import "${IMPORT_VARIANTS[@]}"
    echo
    raw_samples_section "$WORK"/*.samples
    for key in "${EXPORT_VARIANTS[@]}" "${IMPORT_VARIANTS[@]}"; do
        if [[ -n ${STATS[$key]:-} ]]; then stats_block "\`--stats\` of $key (checked run):" "${STATS[$key]}"; fi
    done
} >"$REPORT"

show_report "$REPORT"

if (( FAILED )) || [[ $EXPORT_SCALE_VERDICT == FAILED* || $IMPORT_SCALE_VERDICT == FAILED* ]]; then exit 1; fi
if [[ $EXPORT_SCALE_VERDICT == NOT* || $IMPORT_SCALE_VERDICT == NOT* ]]; then exit 3; fi
exit 0
