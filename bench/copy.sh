#!/usr/bin/env bash
# bench/copy.sh — database to database: `sluice copy` into PostgreSQL from
# PostgreSQL (against psql's COPY pipe, pg_dump | psql and pgcopydb), from
# SQLite (the demo file, against pgloader) and from MariaDB (against pgloader),
# in one run and one report, each source with its own table and reference.
#
# One command, run from anywhere:
#
#     bash bench/copy.sh
#
# Environment (all optional; see bench/lib/common.sh):
#   SLUICE_BENCH_PG_URL, ROWS (1000000), REPS (3), SKIP_BUILD=1, SLUICE_BIN
#   TARGET_DB   the database on the same server the rows go into
#               (default sluice_copy_target; created when missing)
#   PATHS       which sources to run, any of "pg sqlite mariadb"
#               (default all three)
#   SLUICE_BENCH_MARIADB_URL  the MariaDB source (default
#               mariadb://root@127.0.0.1:3306/test; see
#               bench/lib/mariadb_payment_events.sh)
#   DEMO_PORT   a free local port for `sluice serve --demo` while it makes the
#               SQLite file (default 18765)
#
# What it does:
#   1. makes sure the sources hold their rows: PostgreSQL's payment_events ROWS
#      generated rows (bench/lib/payment_events.sh); MariaDB's payment_events
#      ROWS rows (bench/lib/mariadb_payment_events.sh, the generator
#      bench/mariadb.sh uses too); the SQLite demo file
#      bench/data/payment_events_demo.sqlite, made by
#      `sluice serve --demo --demo-file FILE` on first use (the server is
#      stopped once /health answers) and reused afterwards. The demo always
#      has 1,000,000 rows, whatever ROWS says;
#   2. makes the target tables in TARGET_DB, all of one definition, the
#      PostgreSQL source's (pg_dump --schema-only: bigint id with its primary
#      key, numeric(12,2), char(3), text, timestamptz, jsonb): payment_events
#      (from PostgreSQL), payment_events_sqlite and payment_events_mariadb
#      (`create table … (like payment_events including all)`);
#   3. builds sluice (release);
#   4. runs every variant once, untimed, and checks its target table then
#      holds the source's row count (and reads sluice's --stats for round
#      trips on each side);
#   5. times REPS interleaved repetitions of every variant of every path under
#      /usr/bin/time, the target table emptied (TRUNCATE, untimed) before each;
#   6. prints a Markdown table per path and writes bench/results/copy-<date>.md.
#
# PostgreSQL → PostgreSQL. The reference is what a user types without sluice:
#   psql SOURCE -c "\copy (select * from payment_events) to stdout" |
#     psql TARGET -c "\copy payment_events from stdin"
# Peak RSS of a pipeline is its largest process's (GNU time of `bash -c`).
# pgcopydb (Debian package pgcopydb) copies the table's data only
# (`pgcopydb copy table-data`); it is skipped when not installed.
#
# SQLite → PostgreSQL and MariaDB → PostgreSQL: the reference is pgloader
# (Debian package pgloader), skipped loudly (its rows say so) when it is not
# installed. Fairness, so both tools do the same work:
#   - both load into the same existing, empty table of the definition above
#     (primary key in place, so both maintain the index during the load);
#     sluice without --create and without --truncate, pgloader
#     `WITH data only, create no tables, create no indexes, reset no sequences`
#     (no truncate option either: the harness empties the table untimed
#     before every run, for both). Neither creates, drops or indexes anything;
#   - pgloader otherwise runs with its defaults (workers, concurrency, batch
#     sizes), as a user would type it; sluice with its defaults (--jobs 1);
#   - pgloader picks the table with `INCLUDING ONLY TABLE NAMES …` and loads it
#     into the target's table with `ALTER TABLE NAMES MATCHING … RENAME TO …`
#     (and, from MariaDB, `ALTER SCHEMA '<database>' RENAME TO 'public'`); its
#     command files are in the report;
#   - plain TCP for every client: PGSSLMODE (default disable) for psql, and the
#     same value as pgloader's `?sslmode=`; sluice reads PGSSLMODE as libpq does
#     and connects to MariaDB with ssl-mode=DISABLED; pgloader's MySQL driver has
#     no TLS;
#   - a MariaDB password, if the URL has one, reaches pgloader in MYSQL_PWD
#     (which it reads when its URL has none; untested here, root has none).
# Both send the values as text: pgloader warns that its casts (SQLite's
# "DECIMAL TEXT", MariaDB's CHAR/VARCHAR/DATETIME/JSON) differ from the target
# columns' types, and PostgreSQL's input functions convert them; on this
# machine both produced identical rows (EXCEPT on the loaded tables).
#
# Exit status: 0; 1 if a variant failed its run or its row check; 2 for a bad
# setting or a missing tool.

set -euo pipefail

LOG_PREFIX=copy
# shellcheck source=lib/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/common.sh"
# shellcheck source=lib/payment_events.sh
source "$BENCH/lib/payment_events.sh"
require_positive_integers ROWS REPS
SCALE_CHECK=0
LOAD_AVG_START=$(load_average)

PATHS=${PATHS:-pg sqlite mariadb}
declare -A ON=()
for path in $PATHS; do
    case $path in
        pg|sqlite|mariadb) ON[$path]=1 ;;
        *) echo "PATHS: unknown path '$path' (any of: pg sqlite mariadb)" >&2; exit 2 ;;
    esac
done
(( ${#ON[@]} )) || { echo "PATHS names no path (any of: pg sqlite mariadb)" >&2; exit 2; }
DEMO_PORT=${DEMO_PORT:-18765}
require_positive_integers DEMO_PORT

TARGET_DB=${TARGET_DB:-sluice_copy_target}
# The source URL with its database replaced by the target's.
TARGET_URL=$(sed -E "s#^(postgres(ql)?://[^/]*/)[^?]*#\1$TARGET_DB#" <<<"$URL")
tpg() { psql "$TARGET_URL" -X -q -v ON_ERROR_STOP=1 -At "$@"; }

if command -v pgloader >/dev/null; then
    PGLOADER_VERSION=$(pgloader --version 2>/dev/null | awk -F'"' 'NR == 1 { print $2 }')
else
    PGLOADER_VERSION=""
    if [[ -n ${ON[sqlite]:-} || -n ${ON[mariadb]:-} ]]; then
        log "WARNING: pgloader is not installed (apt-get install pgloader): its rows, the references of the SQLite and MariaDB tables, are SKIPPED"
    fi
fi

# --------------------------------------------------------------- sources --

ensure_tables
if [[ -n ${ON[mariadb]:-} ]]; then
    # shellcheck source=lib/mariadb_payment_events.sh
    source "$BENCH/lib/mariadb_payment_events.sh"
    mdb_check_server
    ensure_mdb_table payment_events "$ROWS"
fi
build_sluice

DEMO_FILE="$DATA/payment_events_demo.sqlite"
DEMO_PID=""
# shellcheck disable=SC2317  # called by common.sh's exit trap
stop_background() {
    if [[ -n $DEMO_PID ]]; then kill "$DEMO_PID" 2>/dev/null || true; wait "$DEMO_PID" 2>/dev/null || true; fi
    DEMO_PID=""
}
# ensure_demo_file: `sluice serve --demo` makes the file on first start (and
# checks it, reusing a complete one); stop it once /health answers.
ensure_demo_file() {
    local i
    log "SQLite demo file ${DEMO_FILE#"$ROOT"/}: sluice serve --demo (makes it unless it is there)"
    "$SLUICE" serve --demo --demo-file "$DEMO_FILE" --listen "127.0.0.1:$DEMO_PORT" >"$WORK/demo.log" 2>&1 &
    DEMO_PID=$!
    for (( i = 0; i < 600; i++ )); do
        if curl -sf "http://127.0.0.1:$DEMO_PORT/health" >/dev/null 2>&1; then break; fi
        if ! kill -0 "$DEMO_PID" 2>/dev/null; then
            echo "sluice serve --demo exited: $(tail -n 3 "$WORK/demo.log")" >&2
            exit 2
        fi
        sleep 0.5
    done
    stop_background
    (( i < 600 )) || { echo "sluice serve --demo did not answer /health within 300 s" >&2; exit 2; }
    grep -h 'demo database' "$WORK/demo.log" | sed 's/^/  /' >&2 || true
    SQLITE_ROWS=$(sqlite_count payment_events)
}
# sqlite_count TABLE: count(*) of the demo file's TABLE.
sqlite_count() {
    python3 -c 'import sqlite3, sys; print(sqlite3.connect(sys.argv[1]).execute(f"select count(*) from {sys.argv[2]}").fetchone()[0])' \
        "$DEMO_FILE" "$1"
}
if [[ -n ${ON[sqlite]:-} ]]; then ensure_demo_file; fi

# --------------------------------------------------------------- targets --

if [[ $(pg -c "select count(*) from pg_database where datname = '$TARGET_DB'") == 0 ]]; then
    log "creating database $TARGET_DB"
    pg -c "create database $TARGET_DB"
fi
log "targets: payment_events as defined in the source; payment_events_sqlite and payment_events_mariadb like it"
tpg -c "drop table if exists payment_events, payment_events_sqlite, payment_events_mariadb"
pg_dump "$URL" --schema-only --no-owner -t payment_events | grep -v '^SET transaction_timeout' | tpg >/dev/null
tpg -c "create table payment_events_sqlite (like payment_events including all)"
tpg -c "create table payment_events_mariadb (like payment_events including all)"

# ------------------------------------------------------------- variants --

SOURCE_SQL="select * from payment_events"
# Every variant: its path (PATH_OF), target table (TABLE_OF), label; the first
# of each path is its reference.
VARIANTS=()
declare -A PATH_OF=() TABLE_OF=() LABEL=() REF=() SKIPPED=()
add_variant() {   # KEY PATH TABLE LABEL
    VARIANTS+=("$1"); PATH_OF[$1]=$2; TABLE_OF[$1]=$3; LABEL[$1]=$4
    [[ -n ${REF[$2]:-} ]] || REF[$2]=$1
}
if [[ -n ${ON[pg]:-} ]]; then
    add_variant psql pg payment_events 'psql `\copy … to stdout` \| psql `\copy … from stdin` (reference)'
    add_variant sluice_jobs1 pg payment_events 'sluice copy `--jobs 1`'
    add_variant sluice_jobs2 pg payment_events 'sluice copy `--jobs 2`'
    add_variant pg_dump pg payment_events 'pg_dump `--data-only -t payment_events` \| psql'
    if command -v pgcopydb >/dev/null; then
        add_variant pgcopydb pg payment_events "pgcopydb $(pgcopydb --version 2>/dev/null | head -n 1 | awk '{print $NF}') \`copy table-data\`"
    fi
fi
PGLOADER_LABEL="pgloader ${PGLOADER_VERSION:-(not installed)} \`data only\` (reference)"
if [[ -n ${ON[sqlite]:-} ]]; then
    add_variant sqlite_pgloader sqlite payment_events_sqlite "$PGLOADER_LABEL"
    add_variant sqlite_sluice sqlite payment_events_sqlite 'sluice copy'
fi
if [[ -n ${ON[mariadb]:-} ]]; then
    add_variant mariadb_pgloader mariadb payment_events_mariadb "$PGLOADER_LABEL"
    add_variant mariadb_sluice mariadb payment_events_mariadb 'sluice copy'
fi
if [[ -z $PGLOADER_VERSION ]]; then
    for key in sqlite_pgloader mariadb_pgloader; do
        SKIPPED[$key]="SKIPPED: pgloader is not installed"
    done
fi

# pgloader's PostgreSQL URL: the target's, with sslmode from PGSSLMODE (its
# parser knows disable, allow, prefer and require).
PGLOADER_TARGET="${TARGET_URL%%\?*}?sslmode=$PGSSLMODE"
PGLOADER_TARGET=${PGLOADER_TARGET/#postgres:\/\//postgresql://}
# pgloader_file PATH: the command file for PATH's pgloader run, in WORK.
pgloader_file() {
    local file="$WORK/pgloader-$1.load"
    case $1 in
        sqlite) cat >"$file" <<EOF
LOAD DATABASE
     FROM sqlite://$DEMO_FILE
     INTO $PGLOADER_TARGET
 WITH data only, create no tables, create no indexes, reset no sequences
 INCLUDING ONLY TABLE NAMES LIKE 'payment_events'
 ALTER TABLE NAMES MATCHING 'payment_events' RENAME TO 'payment_events_sqlite';
EOF
        ;;
        mariadb) cat >"$file" <<EOF
LOAD DATABASE
     FROM mysql://$MDB_USER@$MDB_HOST:$MDB_PORT/$MDB_DB
     INTO $PGLOADER_TARGET
 WITH data only, create no tables, create no indexes, reset no sequences
 INCLUDING ONLY TABLE NAMES MATCHING 'payment_events'
 ALTER SCHEMA '$MDB_DB' RENAME TO 'public'
 ALTER TABLE NAMES MATCHING 'payment_events' RENAME TO 'payment_events_mariadb';
EOF
        ;;
    esac
    echo "$file"
}
[[ -z ${ON[sqlite]:-} ]] || pgloader_file sqlite >/dev/null
[[ -z ${ON[mariadb]:-} ]] || pgloader_file mariadb >/dev/null

# cmd_for KEY: CMD copies KEY's source rows into its target table.
cmd_for() {
    case $1 in
        psql) CMD=(bash -c "psql '$URL' -X -c '\\copy ($SOURCE_SQL) to stdout' | psql '$TARGET_URL' -X -c '\\copy payment_events from stdin'") ;;
        sluice_jobs*) CMD=("$SLUICE" copy --from "$URL" --table payment_events --to "$TARGET_URL"
                           --jobs "${1#sluice_jobs}") ;;
        pg_dump) CMD=(bash -c "pg_dump '$URL' --data-only -t payment_events | psql '$TARGET_URL' -X -q") ;;
        pgcopydb) CMD=(pgcopydb copy table-data --source "$URL" --target "$TARGET_URL"
                       --dir "$WORK/pgcopydb" --filters "$WORK/pgcopydb.filters"
                       --table-jobs 1 --not-consistent) ;;
        sqlite_pgloader|mariadb_pgloader)
            CMD=(pgloader --root-dir "$WORK/pgloader" "$WORK/pgloader-${PATH_OF[$1]}.load") ;;
        sqlite_sluice) CMD=("$SLUICE" copy --from "sqlite://$DEMO_FILE" --table payment_events
                            --to "$TARGET_URL" --table payment_events_sqlite) ;;
        mariadb_sluice) CMD=("$SLUICE" copy --from "$SLUICE_SURL" --table payment_events
                             --to "$TARGET_URL" --table payment_events_mariadb) ;;
    esac
}
# show_cmd KEY: cmd_for with placeholders for the report: SOURCE_URL and
# TARGET_URL for the PostgreSQL URLs (no password gets into the file), WORK for
# the scratch directory, REPO for the checkout.
show_cmd() {
    cmd_for "$1"
    local i
    for i in "${!CMD[@]}"; do
        CMD[i]=${CMD[i]//"$TARGET_URL"/TARGET_URL}
        CMD[i]=${CMD[i]//"$URL"/SOURCE_URL}
        CMD[i]=${CMD[i]//"$WORK"/WORK}
        CMD[i]=${CMD[i]//"$ROOT"/REPO}
    done
}
# pgcopydb copies every table of the source database unless told otherwise.
printf '[include-only-table]\npublic.payment_events\n' >"$WORK/pgcopydb.filters"
# want_rows KEY: the row count KEY's target must hold.
want_rows() { if [[ ${PATH_OF[$1]} == sqlite ]]; then echo "$SQLITE_ROWS"; else echo "$ROWS"; fi; }
empty_target() { tpg -c "truncate ${TABLE_OF[$1]}"; rm -rf "$WORK/pgcopydb" "$WORK/pgloader"; }

declare -A STATUS=() TRIPS=()
for key in "${VARIANTS[@]}"; do
    if [[ -n ${SKIPPED[$key]:-} ]]; then
        STATUS[$key]=${SKIPPED[$key]}; TRIPS[$key]="—"
        log "$key: ${SKIPPED[$key]}"
        continue
    fi
    empty_target "$key"
    cmd_for "$key"
    [[ $key == *sluice* ]] && CMD+=(--stats)
    log "row check: $key"
    want=$(want_rows "$key")
    if ! "${CMD[@]}" >"$WORK/$key.out" 2>"$WORK/$key.err"; then
        STATUS[$key]="FAILED: $(tail -n 1 "$WORK/$key.err")"
    elif [[ $(tpg -c "select count(*) from ${TABLE_OF[$key]}") != "$want" ]]; then
        STATUS[$key]="FAILED: $(tpg -c "select count(*) from ${TABLE_OF[$key]}") rows, want $want"
    else
        STATUS[$key]=""
    fi
    stats=$(cat "$WORK/$key.err")
    source_trips=$(stat_of "$stats" "source round trips")
    target_trips=$(stat_of "$stats" "target round trips")
    TRIPS[$key]="${source_trips:-—} / ${target_trips:-—}"
    [[ -z ${STATUS[$key]} ]] || log "$key: ${STATUS[$key]}"
done

for (( rep = 1; rep <= REPS; rep++ )); do
    for key in "${VARIANTS[@]}"; do
        [[ -z ${STATUS[$key]} ]] || continue
        log "rep $rep/$REPS: $key"
        empty_target "$key"
        cmd_for "$key"
        if timed_run "${CMD[@]}" 2>"$WORK/$key.run.err"; then
            echo "$TIME_SAMPLE" >>"$WORK/$key.samples"
        else
            STATUS[$key]="FAILED: timed run ($(tail -n 1 "$WORK/$key.run.err"))"
        fi
    done
done
for key in "${VARIANTS[@]}"; do empty_target "$key"; done

DATE=$(date -u +%Y-%m-%d)
REPORT="$RESULTS/copy-$DATE.md"
FAILED=0
# path_table PATH: PATH's variants, against its reference.
path_table() {
    local ref=${REF[$1]} ref_s="" key samples s
    if [[ -z ${STATUS[$ref]} && -s $WORK/$ref.samples ]]; then ref_s=$(median 1 "$WORK/$ref.samples"); fi
    echo "| variant | median s | × reference | peak RSS MB | round trips (source / target) |"
    echo "| --- | ---: | ---: | ---: | ---: |"
    for key in "${VARIANTS[@]}"; do
        [[ ${PATH_OF[$key]} == "$1" ]] || continue
        samples="$WORK/$key.samples"
        if [[ -n ${STATUS[$key]} || ! -s $samples ]]; then
            echo "| ${LABEL[$key]} | ${STATUS[$key]:-no data} | | | |"
            [[ -n ${SKIPPED[$key]:-} ]] || FAILED=1
            continue
        fi
        s=$(median 1 "$samples")
        if [[ -n $ref_s ]]; then ratio=$(ratio_of "$s" "$ref_s"); else ratio="— (no reference)"; fi
        printf '| %s | %.2f | %s | %s | %s |\n' "${LABEL[$key]}" "$s" "$ratio" \
            "$(mb "$(median 2 "$samples")")" "${TRIPS[$key]}"
    done
}
# shellcheck disable=SC2016  # the literal placeholders
{
    echo "# Database to database benchmark — $DATE"
    echo
    echo "Into PostgreSQL database \`$TARGET_DB\` (same server as the PostgreSQL source), each variant into an existing, empty table of one definition (the PostgreSQL source's: primary key on id, numeric(12,2), char(3), text, timestamptz, jsonb), emptied untimed before every run. Median of $REPS interleaved runs (all paths interleaved) after an untimed run whose row count was checked; wall time and peak RSS (\`/usr/bin/time -f '%e %M'\`; a pipeline's largest process). Round trips from sluice's \`--stats\`."
    if [[ -n ${ON[pg]:-} ]]; then
        echo
        echo "## PostgreSQL → PostgreSQL"
        echo
        echo "\`payment_events\` ($(fmt_int "$ROWS") rows) from database \`$(sed -E 's#.*/([^/?]*).*#\1#' <<<"$URL")\` into \`payment_events\`."
        echo
        path_table pg
    fi
    if [[ -n ${ON[sqlite]:-} ]]; then
        echo
        echo "## SQLite → PostgreSQL"
        echo
        echo "The \`sluice serve --demo\` file (\`bench/data/payment_events_demo.sqlite\`, $(fmt_int "$SQLITE_ROWS") rows, $(( $(stat -c %s "$DEMO_FILE") / 1048576 )) MB) into \`payment_events_sqlite\`; pgloader with \`data only\` into the same existing table (command file below)."
        echo
        path_table sqlite
    fi
    if [[ -n ${ON[mariadb]:-} ]]; then
        echo
        echo "## MariaDB → PostgreSQL"
        echo
        echo "MariaDB's \`payment_events\` ($(fmt_int "$ROWS") rows, bench/lib/mariadb_payment_events.sh, $(mdb -e 'select version()') at $MDB_URL_SHOWN) into \`payment_events_mariadb\`; pgloader with \`data only\` into the same existing table (command file below)."
        echo
        path_table mariadb
    fi
    echo
    echo "## Commands"
    echo
    echo "SOURCE_URL is the PostgreSQL source ($URL_SHOWN), TARGET_URL the same server's \`$TARGET_DB\`, WORK the run's scratch directory, REPO the checkout; the untimed row-check run of sluice adds \`--stats\`."
    echo
    commands_block show_cmd "${VARIANTS[@]}"
    for path in sqlite mariadb; do
        [[ -n ${ON[$path]:-} ]] || continue
        echo
        echo "pgloader command file, $path (WORK/pgloader-$path.load):"
        echo
        echo '```'
        sed -E -e 's#(://[^:/@]+):[^@]*@#\1:***@#' -e "s#$ROOT/#REPO/#g" "$WORK/pgloader-$path.load"
        echo '```'
    done
    echo
    # shellcheck disable=SC2119
    machine_section --load-average | sed '$d'
    echo "- sluice binary: $("$SLUICE" --version 2>/dev/null || echo "?"), modified $(date -u -r "$SLUICE" +%Y-%m-%dT%H:%M:%SZ)"
    echo "- pgloader: ${PGLOADER_VERSION:-not installed}$( [[ -z $PGLOADER_VERSION ]] || echo " ($(pgloader --version 2>/dev/null | sed -n 2p))")"
    if [[ -n ${ON[mariadb]:-} ]]; then echo "- MariaDB server: $(mdb -e 'select version()') at $MDB_URL_SHOWN"; fi
    echo "- connections: PGSSLMODE=$PGSSLMODE for psql, pg_dump and pgcopydb, \`?sslmode=$PGSSLMODE\` for pgloader; sluice without TLS (PostgreSQL) and with ssl-mode=DISABLED (MariaDB)"
    echo
    reproduce_section copy.sh "ROWS=$ROWS REPS=$REPS PATHS='$PATHS'"
    echo
    raw_samples_section "$WORK"/*.samples
} >"$REPORT"

show_report "$REPORT"
if (( FAILED )); then exit 1; fi
exit 0
