#!/usr/bin/env bash
# bench/import.sh — import benchmark for sluice (the export one is run.sh).
#
# One command, run from anywhere:
#
#     bash bench/import.sh
#
# Environment (all optional; the same conventions as bench/run.sh):
#   SLUICE_BENCH_PG_URL  database URL      (default postgres://postgres@127.0.0.1:5432/test)
#   ROWS                 rows to load      (default 1000000)
#   REPS                 timed repetitions (default 3); medians are reported
#   SCALE_CHECK=1        also load a 5,000,000-row NDJSON file and compare sluice
#                        NDJSON peak RSS at ROWS vs 5M rows (must be flat)
#   SKIP_BUILD=1         do not run `cargo build --release -p sluice-cli`
#   SLUICE_BIN           sluice binary to use (default <target dir>/release/sluice)
#   PYTHON               interpreter used to create bench/.venv (default python3)
#   EXECUTEMANY_ROWS     rows loaded by the psycopg executemany variant (default 100000)
#   SINGLE_INSERT_ROWS   rows loaded by sluice --insert-rows 1 (default 20000)
#   CONTENT_CHECK=0      skip the row-by-row comparison after each variant's first run
#   ONLY                 run only these variants (space-separated keys, e.g.
#                        "psql sluice_csv sluice_csv_text"); default: all
#
# What it does, in order:
#   1. makes sure table payment_events holds exactly ROWS rows of generated,
#      deterministic data (the generator in bench/lib/payment_events.sh, so
#      run.sh and this script share the table);
#   2. builds sluice in release mode and makes bench/.venv with psycopg 3;
#   3. exports the table once, ordered by id, to bench/data/payment_events.csv
#      (psql \copy, with header) and bench/data/payment_events.ndjson (sluice
#      export); both are reused while their line count and the table's marker
#      still match;
#   4. creates the target payment_events_load (like payment_events including
#      all: same columns, primary key) and, before every timed run, untimed,
#      TRUNCATEs it and runs CHECKPOINT, so no load pays for the previous one's
#      dirty pages and every run starts from the same state;
#   5. warms up (input files into the page cache, one untimed psql load), then
#      times REPS repetitions of every variant, interleaved, under
#      /usr/bin/time; after each run counts the rows in the target (untimed) and,
#      after the first, compares them with the source row by row;
#   6. prints a Markdown table and writes it to bench/results/import-<date>.md.
#
# Two variants are too slow to run on ROWS rows and load a prefix of the file
# instead (EXECUTEMANY_ROWS, SINGLE_INSERT_ROWS); their time and round trips
# are extrapolated linearly to ROWS and the table says so.
#
# Exit status: 0 if all went well; 1 if a variant failed its run or its row
# check (the results file is still written, with the failure in it); 3 if
# SCALE_CHECK=1 found sluice's memory growing with the row count.

set -euo pipefail

# ---------------------------------------------------------------- settings --

LOG_PREFIX=bench
# Shared settings (URL, ROWS, REPS, SKIP_BUILD, SLUICE, ...), scratch WORK,
# log, pg, plain TCP, timing and report helpers.
# shellcheck source=lib/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/common.sh"
# The table generator and its settings (SCALE_CHECK, SCALE_ROWS), shared with
# the other bench scripts.
# shellcheck source=lib/payment_events.sh
source "$BENCH/lib/payment_events.sh"
CONTENT_CHECK=${CONTENT_CHECK:-1}
EXECUTEMANY_ROWS=${EXECUTEMANY_ROWS:-100000}
SINGLE_INSERT_ROWS=${SINGLE_INSERT_ROWS:-20000}
LOAD_TABLE=payment_events_load
require_positive_integers ROWS REPS EXECUTEMANY_ROWS SINGLE_INSERT_ROWS
# A prefix can't be longer than the file.
(( EXECUTEMANY_ROWS <= ROWS )) || EXECUTEMANY_ROWS=$ROWS
(( SINGLE_INSERT_ROWS <= ROWS )) || SINGLE_INSERT_ROWS=$ROWS

LOAD_AVG_START=$(load_average)

ensure_tables

# ------------------------------------------------------------------ sluice --

build_sluice
# Unlike run.sh, sluice is required: it writes the NDJSON input every other
# variant reads, and it is what this benchmark is about.
if ! [[ -x $SLUICE ]] || ! "$SLUICE" import --help >/dev/null 2>&1; then
    echo "$SLUICE is missing or has no import command: build it (cargo build --release -p sluice-cli) or set SLUICE_BIN" >&2
    exit 2
fi

# ---------------------------------------------------------------- psycopg --

ensure_psycopg
PSYCOPG_PIPELINE=$("$PY" -c 'import psycopg; print("yes" if psycopg.Pipeline.is_supported() else "no")')

# ------------------------------------------------------------- input files --

# ensure_files TABLE N FORMATS...: $DATA/TABLE.csv (psql \copy, header) and/or
# $DATA/TABLE.ndjson (sluice export), ordered by id. Reused while the line
# count matches and $DATA/TABLE.marker equals the table's generator marker
# (so a regenerated table with the same row count also gets fresh files).
ensure_files() {
    local table=$1 n=$2 marker fmt file want lines tmp
    shift 2
    marker=$(pg -c "select coalesce(obj_description('$table'::regclass, 'pg_class'), '')")
    for fmt in "$@"; do
        file="$DATA/$table.$fmt"
        if [[ $fmt == csv ]]; then want=$((n + 1)); else want=$n; fi
        if [[ -s $file && -f $DATA/$table.marker && $(cat "$DATA/$table.marker") == "$marker" ]]; then
            lines=$(wc -l <"$file")
            if [[ $lines == "$want" ]]; then
                log "input ${file#"$ROOT"/}: $n rows, up to date"
                continue
            fi
        fi
        log "input ${file#"$ROOT"/}: exporting $table"
        tmp="$file.tmp"
        rm -f "$tmp"
        if [[ $fmt == csv ]]; then
            psql "$URL" -X -q -v ON_ERROR_STOP=1 \
                -c "\\copy (select * from $table order by id) to '$tmp' csv header"
        else
            "$SLUICE" export --db "$URL" --query "select * from $table order by id" \
                --format ndjson --output "$tmp"
        fi
        lines=$(wc -l <"$tmp")
        [[ $lines == "$want" ]] || { echo "export of $table to $fmt wrote $lines lines, want $want" >&2; exit 1; }
        mv -f "$tmp" "$file"
    done
    printf '%s\n' "$marker" >"$DATA/$table.marker"
}

ensure_files payment_events "$ROWS" csv ndjson
CSV="$DATA/payment_events.csv"
NDJSON="$DATA/payment_events.ndjson"
# The first SINGLE_INSERT_ROWS records for sluice --insert-rows 1 (cheap to
# remake every time; the psycopg script takes --limit instead).
NDJSON_HEAD="$DATA/payment_events.head$SINGLE_INSERT_ROWS.ndjson"
head -n "$SINGLE_INSERT_ROWS" "$NDJSON" >"$NDJSON_HEAD"
if [[ $SCALE_CHECK == 1 ]]; then
    ensure_files "$SCALE_TABLE" "$SCALE_ROWS" ndjson
fi

# ----------------------------------------------------------- load targets --

# make_target NAME: an empty NAME shaped like payment_events, with its primary
# key (and its comment overwritten, so it isn't mistaken for a source table).
make_target() {
    pg -c "SET client_min_messages = warning" \
       -c "DROP TABLE IF EXISTS $1" \
       -c "CREATE TABLE $1 (LIKE payment_events INCLUDING ALL)" \
       -c "COMMENT ON TABLE $1 IS 'sluice-bench import target (bench/import.sh)'"
}
make_target "$LOAD_TABLE"
SCALE_LOAD_TABLE="${LOAD_TABLE}_5m"
[[ $SCALE_CHECK == 1 ]] && make_target "$SCALE_LOAD_TABLE"

# CHECKPOINT needs superuser or pg_checkpoint; without it runs just TRUNCATE.
CHECKPOINT_OK=1
if ! pg -c CHECKPOINT 2>/dev/null; then
    CHECKPOINT_OK=0
    log "WARNING: CHECKPOINT not permitted: runs will not start from a clean checkpoint"
fi

# reset TABLE: untimed, before every timed run.
reset() {
    pg -c "TRUNCATE $1"
    if (( CHECKPOINT_OK )); then pg -c CHECKPOINT; fi
}

# --------------------------------------------------------------- variants --

# Every variant is a key; cmd_for KEY TARGET INPUT_NDJSON sets CMD to the argv
# that loads it into TARGET, and N_FOR[KEY] is how many rows that loads.
VARIANTS=(psql sluice_csv sluice_csv_text sluice_ndjson sluice_ndjson_text psycopg_copy
          psycopg_executemany sluice_insert1000 sluice_insert1)
if [[ -n ${ONLY:-} ]]; then
    read -r -a VARIANTS <<<"$ONLY"
fi
# shellcheck disable=SC2016  # the backticks are Markdown code spans
declare -A LABEL=(
    [psql]='psql `\copy ... from csv` (reference)'
    [sluice_csv]='sluice CSV'
    [sluice_ndjson]='sluice NDJSON'
    [sluice_csv_text]='sluice CSV `--copy-format text`'
    [sluice_ndjson_text]='sluice NDJSON `--copy-format text`'
    [psycopg_copy]="psycopg $PSYCOPG_VERSION \`copy.write_row\` from NDJSON"
    [psycopg_executemany]="psycopg $PSYCOPG_VERSION \`executemany\` INSERT from NDJSON"
    [sluice_insert1000]='sluice NDJSON `--method insert --insert-rows 1000`'
    [sluice_insert1]='sluice NDJSON `--method insert --insert-rows 1`'
)
declare -A N_FOR=(
    [psql]=$ROWS [sluice_csv]=$ROWS [sluice_ndjson]=$ROWS [psycopg_copy]=$ROWS
    [sluice_csv_text]=$ROWS [sluice_ndjson_text]=$ROWS
    [psycopg_executemany]=$EXECUTEMANY_ROWS [sluice_insert1000]=$ROWS
    [sluice_insert1]=$SINGLE_INSERT_ROWS
)
cmd_for() {
    local key=$1 target=$2 ndjson=$3
    case $key in
        psql)                CMD=(psql "$URL" -X -c "\\copy $target from '$CSV' csv header") ;;
        sluice_csv)          CMD=("$SLUICE" import --db "$URL" --table "$target" "$CSV" --stats) ;;
        sluice_ndjson)       CMD=("$SLUICE" import --db "$URL" --table "$target" "$ndjson" --stats) ;;
        sluice_csv_text)     CMD=("$SLUICE" import --db "$URL" --table "$target" "$CSV" --stats
                                  --copy-format text) ;;
        sluice_ndjson_text)  CMD=("$SLUICE" import --db "$URL" --table "$target" "$ndjson" --stats
                                  --copy-format text) ;;
        psycopg_copy)        CMD=("$PY" "$BENCH/psycopg_import.py" "$URL" "$ndjson" --table "$target" --method copy) ;;
        psycopg_executemany) CMD=("$PY" "$BENCH/psycopg_import.py" "$URL" "$ndjson" --table "$target"
                                  --method executemany --limit "$EXECUTEMANY_ROWS") ;;
        sluice_insert1000)   CMD=("$SLUICE" import --db "$URL" --table "$target" "$ndjson" --stats
                                  --method insert --insert-rows 1000) ;;
        sluice_insert1)      CMD=("$SLUICE" import --db "$URL" --table "$target" "$NDJSON_HEAD" --stats
                                  --method insert --insert-rows 1) ;;
    esac
}
# shown_command KEY: cmd_for as the report shows it, with a literal $URL.
# shellcheck disable=SC2016,SC2317  # a literal $URL on purpose; called by commands_block, in a subshell
shown_command() { URL='$URL'; cmd_for "$1" "$LOAD_TABLE" "$NDJSON"; }
is_sluice() { [[ $1 == sluice_* ]]; }
# factor KEY: ROWS / rows the variant loads (1 unless it loads a prefix).
factor() { awk -v a="$ROWS" -v b="${N_FOR[$1]}" 'BEGIN { print a / b }'; }

declare -A STATUS=()   # key -> "" (ok) | "FAILED: why"
declare -A STATS=()    # key.table -> --stats stderr of the last run
for key in "${VARIANTS[@]}"; do STATUS[$key]=""; done

# timed KEY TARGET NDJSON WANT CHECK: reset TARGET, one run under GNU time
# (appends "elapsed_s max_rss_kb" to $WORK/KEY.TARGET.samples), then count the
# rows in TARGET, and with CHECK=1 compare them with the source rows 1..WANT.
timed() {
    local key=$1 target=$2 ndjson=$3 want=$4 check=$5
    local err="$WORK/$key.$target.err" have bad source
    reset "$target"
    cmd_for "$key" "$target" "$ndjson"
    if ! timed_run "${CMD[@]}" 2>"$err"; then
        STATUS[$key]="FAILED: $(head -n 1 "$TIME_FILE") ($(tail -n 1 "$err"))"
        log "$key: ${STATUS[$key]}"
        return
    fi
    if is_sluice "$key"; then STATS[$key.$target]=$(cat "$err"); fi
    have=$(pg -c "select count(*) from $target")
    if [[ $have != "$want" ]]; then
        STATUS[$key]="FAILED: $have rows in $target after the run, want $want"
        log "$key: ${STATUS[$key]}"
        return
    fi
    if [[ $check == 1 ]]; then
        # Every loaded row equal to its source row, none missing or extra.
        source=$(table_for "$( [[ $target == "$LOAD_TABLE" ]] && echo "$ROWS" || echo "$SCALE_ROWS")")
        bad=$(pg -c "select count(*) from $target l
                     full join (select * from $source where id <= $want) p on p.id = l.id
                     where l.id is null or p.id is null or row(l.*) is distinct from row(p.*)")
        if [[ $bad != 0 ]]; then
            STATUS[$key]="FAILED: $bad rows differ from the source"
            log "$key: ${STATUS[$key]}"
            return
        fi
    fi
    echo "$TIME_SAMPLE" >>"$WORK/$key.$target.samples"
}

# Warm-up: the input files into the page cache, and one untimed reference load
# so the first timed variant doesn't pay for cold server state.
log "warm-up: reading input files, one untimed psql load"
cat "$CSV" "$NDJSON" >/dev/null
reset "$LOAD_TABLE"
cmd_for psql "$LOAD_TABLE" "$NDJSON"
"${CMD[@]}" >/dev/null

# Interleaved: rep 1 of every variant, then rep 2, ... so a burst of machine
# noise (another process, a build) hits all variants alike instead of all
# repetitions of one. A variant that failed is not run again.
for (( rep = 1; rep <= REPS; rep++ )); do
    for key in "${VARIANTS[@]}"; do
        [[ -z ${STATUS[$key]} ]] || continue
        check=0
        [[ $rep == 1 && $CONTENT_CHECK == 1 ]] && check=1
        log "rep $rep/$REPS: $key (${N_FOR[$key]} rows)"
        timed "$key" "$LOAD_TABLE" "$NDJSON" "${N_FOR[$key]}" "$check"
    done
done

# ------------------------------------------------------------- scale check --

SCALE_VERDICT=""
if [[ $SCALE_CHECK == 1 ]]; then
    if [[ -n ${STATUS[sluice_ndjson]} ]]; then
        SCALE_VERDICT="not run: sluice NDJSON ${STATUS[sluice_ndjson]}"
    else
        SCALE_NDJSON="$DATA/$SCALE_TABLE.ndjson"
        cat "$SCALE_NDJSON" >/dev/null
        for (( rep = 1; rep <= REPS; rep++ )); do
            log "scale check rep $rep/$REPS: sluice_ndjson, $SCALE_ROWS rows into $SCALE_LOAD_TABLE"
            timed sluice_ndjson "$SCALE_LOAD_TABLE" "$SCALE_NDJSON" "$SCALE_ROWS" 0
            if [[ -n ${STATUS[sluice_ndjson]} ]]; then
                # A failure here is the scale check's, not the ROWS row's.
                SCALE_VERDICT="${STATUS[sluice_ndjson]} (at $SCALE_ROWS rows)"
                STATUS[sluice_ndjson]=""
                break
            fi
        done
    fi
fi

# ---------------------------------------------------------------- report --

REF_S=""
if [[ -s $WORK/psql.$LOAD_TABLE.samples ]]; then
    REF_S=$(median 1 "$WORK/psql.$LOAD_TABLE.samples")
fi

SETTINGS="ROWS=$ROWS REPS=$REPS"
[[ $SCALE_CHECK == 1 ]] && SETTINGS+=" SCALE_CHECK=1"
[[ $EXECUTEMANY_ROWS != 100000 ]] && SETTINGS+=" EXECUTEMANY_ROWS=$EXECUTEMANY_ROWS"
[[ $SINGLE_INSERT_ROWS != 20000 ]] && SETTINGS+=" SINGLE_INSERT_ROWS=$SINGLE_INSERT_ROWS"
DATE=$(date -u +%Y-%m-%d)
REPORT="$RESULTS/import-$DATE.md"
FAILED=0

{
    echo "# sluice import benchmark — $DATE"
    echo
    echo "Loading $(fmt_int "$ROWS") rows of \`payment_events\` ($(du -m "$CSV" | cut -f1) MB as CSV, $(du -m "$NDJSON" | cut -f1) MB as NDJSON, in id order) into an empty \`$LOAD_TABLE\` (\`LIKE payment_events INCLUDING ALL\`: primary key on id), TRUNCATEd$( (( CHECKPOINT_OK )) && echo " and CHECKPOINTed") before every run."
    echo "Median of $REPS interleaved runs after a warm-up; wall time and peak RSS of the client process from \`/usr/bin/time -f '%e %M'\`. Every run's row count is checked, and after each variant's first run$( [[ $CONTENT_CHECK == 1 ]] || echo " (not this time: CONTENT_CHECK=0)") every row is compared with its source row."
    echo
    echo "| variant | median s | × psql reference | peak RSS MB | round trips | note |"
    echo "| --- | ---: | ---: | ---: | ---: | --- |"
    for key in "${VARIANTS[@]}"; do
        samples="$WORK/$key.$LOAD_TABLE.samples"
        n=${N_FOR[$key]}
        f=$(factor "$key")
        trips="—"
        if is_sluice "$key" && [[ -n ${STATS[$key.$LOAD_TABLE]:-} ]]; then
            stats=${STATS[$key.$LOAD_TABLE]}
            total=$(stat_of "$stats" 'round trips')
            connect=$(stat_of "$stats" 'round trips connecting')
            query=$(stat_of "$stats" 'round trips for the query')
            if [[ $n == "$ROWS" ]]; then
                trips=$(fmt_int "${total:-?}")
            elif [[ -n $connect && -n $query ]]; then
                trips="~$(fmt_int "$(awk -v c="$connect" -v q="$query" -v f="$f" 'BEGIN { printf "%.0f", c + q * f }')")"
            else
                trips="?"
            fi
        fi
        note=""
        case $key in
            psql) note="reference" ;;
            psycopg_executemany) note="pipeline mode: $PSYCOPG_PIPELINE" ;;
        esac
        if [[ $n != "$ROWS" ]]; then
            note+="${note:+; }**extrapolated**: ran on the first $(fmt_int "$n") rows"
        fi
        if [[ -n ${STATUS[$key]} || ! -s $samples ]]; then
            echo "| ${LABEL[$key]} | ${STATUS[$key]:-no data} | | | $trips | $note |"
            [[ ${STATUS[$key]} == FAILED* ]] && FAILED=1
            continue
        fi
        measured=$(median 1 "$samples")
        s=$(awk -v m="$measured" -v f="$f" 'BEGIN { print m * f }')
        if [[ $n != "$ROWS" ]]; then
            note+=" (median $(printf '%.2f' "$measured") s) and scaled ×$f linearly to $(fmt_int "$ROWS"); round trips scaled the same way (connecting + query × $f); RSS as measured on the prefix"
        fi
        printf '| %s | %.2f | %s | %s | %s | %s |\n' "${LABEL[$key]}" "$s" "$(ratio_of "$s" "$REF_S")" "$(mb "$(median 2 "$samples")")" "$trips" "$note"
    done
    echo

    if [[ $SCALE_CHECK == 1 ]]; then
        echo "## Memory vs row count (sluice NDJSON import)"
        echo
        s1="$WORK/sluice_ndjson.$LOAD_TABLE.samples"
        s5="$WORK/sluice_ndjson.$SCALE_LOAD_TABLE.samples"
        if [[ -z $SCALE_VERDICT && -s $s1 && -s $s5 ]]; then
            echo "\`$SCALE_TABLE\` exported to NDJSON ($(du -m "$DATA/$SCALE_TABLE.ndjson" | cut -f1) MB) and loaded into an empty \`$SCALE_LOAD_TABLE\`, $REPS runs."
            echo
            flatness_table "$s1" "$s5" "$(fmt_int "$ROWS")" "$(fmt_int "$SCALE_ROWS")"
            echo
        fi
        echo "Verdict: ${SCALE_VERDICT:-no data}"
        echo
    fi

    machine_section --load-average --psycopg-detail --pg-settings \
        'shared_buffers max_wal_size wal_level synchronous_commit fsync full_page_writes wal_compression'
    reproduce_section import.sh "$SETTINGS"
    echo
    echo "## Commands timed"
    echo
    commands_block shown_command "${VARIANTS[@]}"
    echo
    raw_samples_section "$WORK"/*.samples
    for key in "${VARIANTS[@]}"; do
        for target in "$LOAD_TABLE" "$SCALE_LOAD_TABLE"; do
            if [[ -n ${STATS[$key.$target]:-} ]]; then
                stats_block "\`--stats\` of $key into $target (last run):" "${STATS[$key.$target]}"
            fi
        done
    done
} >"$REPORT"

show_report "$REPORT"

if (( FAILED )) || [[ $SCALE_VERDICT == FAILED* ]]; then exit 1; fi
if [[ $SCALE_VERDICT == NOT* ]]; then exit 3; fi
exit 0
