#!/usr/bin/env bash
# bench/copy.sh — database to database: `sluice copy` PostgreSQL → PostgreSQL
# against psql's COPY pipe, pg_dump | psql and pgcopydb.
#
# One command, run from anywhere:
#
#     bash bench/copy.sh
#
# Environment (all optional; see bench/lib/common.sh):
#   SLUICE_BENCH_PG_URL, ROWS (1000000), REPS (3), SKIP_BUILD=1, SLUICE_BIN
#   TARGET_DB   the database on the same server the rows go into
#               (default sluice_copy_target; created when missing)
#
# What it does:
#   1. makes sure payment_events holds ROWS generated rows and that the target
#      database holds an empty payment_events of the same definition;
#   2. builds sluice (release);
#   3. runs every variant once, untimed, and checks the target then holds ROWS
#      rows (and reads sluice's --stats for round trips on each side);
#   4. times REPS interleaved repetitions of every variant under /usr/bin/time,
#      the target table emptied (untimed) before each;
#   5. prints a Markdown table and writes bench/results/copy-<date>.md.
#
# The reference is what a user types without sluice:
#   psql SOURCE -c "\copy (select * from payment_events) to stdout" |
#     psql TARGET -c "\copy payment_events from stdin"
# Peak RSS of a pipeline is its largest process's (GNU time of `bash -c`).
# pgcopydb (Debian package pgcopydb) copies the table's data only
# (`pgcopydb copy table-data`); it is skipped when not installed.
#
# Exit status: 0; 1 if a variant failed its run or its row check.

set -euo pipefail

LOG_PREFIX=copy
# shellcheck source=lib/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/common.sh"
# shellcheck source=lib/payment_events.sh
source "$BENCH/lib/payment_events.sh"
require_positive_integers ROWS REPS
SCALE_CHECK=0
LOAD_AVG_START=$(load_average)

TARGET_DB=${TARGET_DB:-sluice_copy_target}
# The source URL with its database replaced by the target's.
TARGET_URL=$(sed -E "s#^(postgres(ql)?://[^/]*/)[^?]*#\1$TARGET_DB#" <<<"$URL")
tpg() { psql "$TARGET_URL" -X -q -v ON_ERROR_STOP=1 -At "$@"; }

ensure_tables
build_sluice

if [[ $(pg -c "select count(*) from pg_database where datname = '$TARGET_DB'") == 0 ]]; then
    log "creating database $TARGET_DB"
    pg -c "create database $TARGET_DB"
fi
log "target: payment_events as defined in the source"
tpg -c "drop table if exists payment_events"
pg_dump "$URL" --schema-only --no-owner -t payment_events | grep -v '^SET transaction_timeout' | tpg >/dev/null

SOURCE_SQL="select * from payment_events"
VARIANTS=(psql sluice_jobs1 sluice_jobs2 pg_dump)
command -v pgcopydb >/dev/null && VARIANTS+=(pgcopydb)
declare -A LABEL=(
    [psql]='psql `\copy … to stdout` \| psql `\copy … from stdin` (reference)'
    [sluice_jobs1]='sluice copy `--jobs 1`'
    [sluice_jobs2]='sluice copy `--jobs 2`'
    [pg_dump]='pg_dump `--data-only -t payment_events` \| psql'
    [pgcopydb]="pgcopydb $(pgcopydb --version 2>/dev/null | head -n 1 | awk '{print $NF}') \`copy table-data\`"
)
# cmd_for KEY: CMD copies payment_events into the target's.
cmd_for() {
    case $1 in
        psql) CMD=(bash -c "psql '$URL' -X -c '\\copy ($SOURCE_SQL) to stdout' |
                            psql '$TARGET_URL' -X -c '\\copy payment_events from stdin'") ;;
        sluice_jobs*) CMD=("$SLUICE" copy --from "$URL" --table payment_events --to "$TARGET_URL"
                           --jobs "${1#sluice_jobs}") ;;
        pg_dump) CMD=(bash -c "pg_dump '$URL' --data-only -t payment_events | psql '$TARGET_URL' -X -q") ;;
        pgcopydb) CMD=(pgcopydb copy table-data --source "$URL" --target "$TARGET_URL"
                       --dir "$WORK/pgcopydb" --filters "$WORK/pgcopydb.filters"
                       --table-jobs 1 --not-consistent) ;;
    esac
}
# pgcopydb copies every table of the source database unless told otherwise.
printf '[include-only-table]\npublic.payment_events\n' >"$WORK/pgcopydb.filters"
empty_target() { tpg -c "truncate payment_events"; rm -rf "$WORK/pgcopydb"; }

declare -A STATUS=() TRIPS=()
for key in "${VARIANTS[@]}"; do
    empty_target
    cmd_for "$key"
    [[ $key == sluice_* ]] && CMD+=(--stats)
    log "row check: $key"
    if ! "${CMD[@]}" >/dev/null 2>"$WORK/$key.err"; then
        STATUS[$key]="FAILED: $(tail -n 1 "$WORK/$key.err")"
    elif [[ $(tpg -c "select count(*) from payment_events") != "$ROWS" ]]; then
        STATUS[$key]="FAILED: $(tpg -c "select count(*) from payment_events") rows, want $ROWS"
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
        empty_target
        cmd_for "$key"
        if timed_run "${CMD[@]}" 2>"$WORK/$key.run.err"; then
            echo "$TIME_SAMPLE" >>"$WORK/$key.samples"
        else
            STATUS[$key]="FAILED: timed run ($(tail -n 1 "$WORK/$key.run.err"))"
        fi
    done
done
empty_target

REF_S=$(median 1 "$WORK/psql.samples")
DATE=$(date -u +%Y-%m-%d)
REPORT="$RESULTS/copy-$DATE.md"
FAILED=0
{
    echo "# Database to database benchmark — $DATE"
    echo
    echo "\`payment_events\` ($(fmt_int "$ROWS") rows) from database \`$(sed -E 's#.*/([^/?]*).*#\1#' <<<"$URL")\` into an empty table of the same definition in \`$TARGET_DB\`, same server. Median of $REPS interleaved runs after an untimed run; wall time and peak RSS (\`/usr/bin/time -f '%e %M'\`; a pipeline's largest process)."
    echo
    echo "| variant | median s | × reference | peak RSS MB | round trips (source / target) |"
    echo "| --- | ---: | ---: | ---: | ---: |"
    for key in "${VARIANTS[@]}"; do
        samples="$WORK/$key.samples"
        if [[ -n ${STATUS[$key]} || ! -s $samples ]]; then
            echo "| ${LABEL[$key]} | ${STATUS[$key]:-no data} | | | |"
            FAILED=1
            continue
        fi
        s=$(median 1 "$samples")
        printf '| %s | %.2f | %s | %s | %s |\n' "${LABEL[$key]}" "$s" "$(ratio_of "$s" "$REF_S")" \
            "$(mb "$(median 2 "$samples")")" "${TRIPS[$key]}"
    done
    echo
    # shellcheck disable=SC2119
    machine_section --load-average
    echo
    reproduce_section copy.sh "ROWS=$ROWS REPS=$REPS"
    echo
    raw_samples_section "$WORK"/*.samples
} >"$REPORT"

show_report "$REPORT"
if (( FAILED )); then exit 1; fi
exit 0
