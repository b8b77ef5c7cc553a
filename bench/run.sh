#!/usr/bin/env bash
# bench/run.sh — export benchmark for sluice.
#
# One command, run from anywhere:
#
#     bash bench/run.sh
#
# Environment (all optional):
#   SLUICE_BENCH_PG_URL  database URL      (default postgres://postgres@127.0.0.1:5432/test)
#   ROWS                 rows in the table (default 1000000)
#   REPS                 timed repetitions (default 3); medians are reported
#   SCALE_CHECK=1        also build a 5,000,000-row table and compare sluice
#                        NDJSON peak RSS at ROWS vs 5M rows (must be flat)
#   SKIP_BUILD=1         do not run `cargo build --release -p sluice-cli`
#   SLUICE_BIN           sluice binary to use (default <target dir>/release/sluice)
#   PYTHON               interpreter used to create bench/.venv (default python3)
#
# What it does, in order:
#   1. makes sure table payment_events holds exactly ROWS rows of generated,
#      deterministic data (recreated if not);
#   2. builds sluice in release mode;
#   3. makes bench/.venv with psycopg 3 for the Python baseline;
#   4. warms the cache with one untimed psql run, then runs every variant once
#      untimed to a file to check it outputs ROWS rows (a fast exporter that
#      drops rows must not make it into the table) and, for sluice, to read
#      `--stats`;
#   5. times REPS repetitions of every variant, interleaved, under
#      /usr/bin/time, output to /dev/null;
#   6. prints a Markdown table and writes it to bench/results/export-<date>.md.
#
# Exit status: 0 if all went well; 1 if a variant failed its run or its row
# check (the results file is still written, with the failure in it); 3 if
# SCALE_CHECK=1 found sluice's memory growing with the row count; 4 if
# /dev/null stopped being a device (see timed()).

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
require_positive_integers ROWS REPS

ensure_tables

# ------------------------------------------------------------------ sluice --

build_sluice
# With SKIP_BUILD=1 and no usable binary the sluice rows say "not built"
# instead of aborting, so the baselines can be measured on their own.
SLUICE_OK=0
if [[ -x $SLUICE ]] && "$SLUICE" export --help >/dev/null 2>&1; then
    SLUICE_OK=1
else
    log "WARNING: $SLUICE missing or not runnable: sluice rows will be skipped"
fi

# ---------------------------------------------------------------- psycopg --

ensure_psycopg

# --------------------------------------------------------------- variants --

# Every variant is a key; cmd_for KEY TABLE OUT sets CMD to the argv that
# exports `select * from TABLE` to OUT (/dev/null when timed).
VARIANTS=(psql sluice_csv sluice_ndjson sluice_ndjson_fs1000 psycopg)
# The TLS pair (both clients with sslmode=require), when the server speaks TLS.
TLS_NOTE=""
if [[ $(pg -c "show ssl") == on ]]; then
    VARIANTS+=(psql_tls sluice_ndjson_tls)
else
    TLS_NOTE="not measured: the server has ssl = off"
fi
# shellcheck disable=SC2016  # the backticks are Markdown code spans
declare -A LABEL=(
    [psql]='psql `\copy ... csv` (reference)'
    [sluice_csv]='sluice CSV'
    [sluice_ndjson]='sluice NDJSON'
    [sluice_ndjson_fs1000]='sluice NDJSON `--fetch-size 1000`'
    [psycopg]="psycopg $PSYCOPG_VERSION named cursor NDJSON"
    [psql_tls]='psql `\copy ... csv`, `sslmode=require` (TLS reference)'
    [sluice_ndjson_tls]='sluice NDJSON, `sslmode=require`'
)
cmd_for() {
    local key=$1 table=$2 out=$3 q="select * from $2"
    case $key in
        psql)                 CMD=(psql "$URL" -X -c "\\copy ($q) to '$out' csv") ;;
        sluice_csv)           CMD=("$SLUICE" export --db "$URL" --query "$q" --format csv --output "$out") ;;
        sluice_ndjson)        CMD=("$SLUICE" export --db "$URL" --query "$q" --format ndjson --output "$out") ;;
        sluice_ndjson_fs1000) CMD=("$SLUICE" export --db "$URL" --query "$q" --format ndjson --output "$out" --fetch-size 1000) ;;
        psycopg)              CMD=("$PY" "$BENCH/psycopg_export.py" "$URL" "$out" --query "$q" --itersize 1000) ;;
        psql_tls)             CMD=(env PGSSLMODE=require psql "$URL" -X -c "\\copy ($q) to '$out' csv") ;;
        sluice_ndjson_tls)    CMD=(env PGSSLMODE=require "$SLUICE" export --db "$URL" --query "$q" --format ndjson --output "$out") ;;
    esac
}
is_sluice() { [[ $1 == sluice_* ]]; }

declare -A STATUS=()   # key -> "" (ok) | "not built" | "FAILED: why"
declare -A TRIPS=()    # key -> round trips from --stats, "?" or "—"
declare -A STATS=()    # key -> full --stats stderr, for the results file

# Warm-up: one untimed reference run so the table is in the page cache and
# the first timed variant isn't charged for reading it from disk.
log "warm-up: psql reference on payment_events (untimed)"
cmd_for psql payment_events /dev/null
"${CMD[@]}" >/dev/null

# Row check: run each variant once, untimed, to a real file and count lines.
# NDJSON must have exactly ROWS lines with the 8 columns as keys; CSV ROWS
# lines or ROWS+1 with a header (the generated text contains no newlines, so
# lines = records). This also warms every variant (binary, Python imports).
check_output() {
    local key=$1 file=$2 lines
    lines=$(wc -l <"$file")
    case $key in
        *csv|psql|psql_tls)
            [[ $lines == "$ROWS" || $lines == $((ROWS + 1)) ]] ||
                { echo "$lines lines, want $ROWS (+1 header)"; return 1; } ;;
        *)
            [[ $lines == "$ROWS" ]] || { echo "$lines lines, want $ROWS"; return 1; }
            # First and last record parse as JSON objects with the columns as keys.
            local bad
            bad=$({ head -n 1 "$file"; tail -n 1 "$file"; } | "$PY" -c '
import json, sys
want = ["id", "account_id", "amount", "currency", "status", "created_at", "description", "payload"]
for line in sys.stdin:
    keys = list(json.loads(line))
    if keys != want:
        sys.exit(f"keys {keys}, want {want}")
' 2>&1) || { echo "${bad##*$'\n'}"; return 1; } ;;
    esac
    return 0
}

for key in "${VARIANTS[@]}"; do
    if is_sluice "$key" && (( ! SLUICE_OK )); then
        STATUS[$key]="not built"; TRIPS[$key]="—"; continue
    fi
    out="$DATA/$key.out"
    cmd_for "$key" payment_events "$out"
    # sluice's --stats run is this same run: it prints `key: value` lines on
    # stderr, of which we want `round trips: N`.
    is_sluice "$key" && CMD+=(--stats)
    log "row check: $key"
    rm -f "$out"   # a stale file from an interrupted run must not pass the check
    rc=0
    "${CMD[@]}" >/dev/null 2>"$WORK/$key.err" || rc=$?
    if (( rc != 0 )); then
        STATUS[$key]="FAILED: exit status $rc ($(tail -n 1 "$WORK/$key.err"))"
    elif ! why=$(check_output "$key" "$out"); then
        STATUS[$key]="FAILED: $why"
    else
        STATUS[$key]=""
    fi
    if is_sluice "$key"; then
        STATS[$key]=$(cat "$WORK/$key.err")
        # The total is the line `round trips: N`; should the format drift,
        # fall back to the first line mentioning round trip(s), else "?".
        TRIPS[$key]=$( { grep -iE '^round trips:' "$WORK/$key.err" ||
                          grep -iE 'round[ _-]?trips?' "$WORK/$key.err" || true; } |
                        head -n 1 | grep -oE '[0-9]+' | head -n 1 || true)
        TRIPS[$key]=${TRIPS[$key]:-?}
    else
        TRIPS[$key]="—"
    fi
    [[ -z ${STATUS[$key]} ]] || log "$key: ${STATUS[$key]}"
    rm -f "$out"   # up to a few hundred MB each
done

# ----------------------------------------------------------------- timing --

# timed KEY TABLE: one run to /dev/null under GNU time; appends
# "elapsed_s max_rss_kb" to $WORK/KEY.TABLE.samples. stderr of the tool goes
# to a log so progress output can't slow it down or clutter ours.
timed() {
    local key=$1 table=$2 err="$WORK/$1.run.err"
    cmd_for "$key" "$table" /dev/null
    if timed_run "${CMD[@]}" 2>"$err"; then
        echo "$TIME_SAMPLE" >>"$WORK/$key.$table.samples"
    else
        STATUS[$key]="FAILED: timed run exited non-zero ($(tail -n 1 "$err"))"
        log "$key: ${STATUS[$key]}"
    fi
    assert_dev_null "$key"
}

# Interleaved: rep 1 of every variant, then rep 2, ... so a burst of machine
# noise (another process, a checkpoint) hits all variants alike instead of
# all repetitions of one.
for (( rep = 1; rep <= REPS; rep++ )); do
    for key in "${VARIANTS[@]}"; do
        [[ -z ${STATUS[$key]} ]] || continue
        log "rep $rep/$REPS: $key"
        timed "$key" payment_events
    done
done

# ------------------------------------------------------------- scale check --

SCALE_VERDICT=""
if [[ $SCALE_CHECK == 1 ]]; then
    if (( ! SLUICE_OK )) || [[ -n ${STATUS[sluice_ndjson]:-} ]]; then
        SCALE_VERDICT="not run: sluice NDJSON ${STATUS[sluice_ndjson]:-unavailable}"
    else
        log "scale check: warm-up on $SCALE_TABLE (untimed)"
        cmd_for psql "$SCALE_TABLE" /dev/null
        "${CMD[@]}" >/dev/null
        for (( rep = 1; rep <= REPS; rep++ )); do
            log "scale check rep $rep/$REPS: sluice_ndjson on $SCALE_TABLE"
            timed sluice_ndjson "$SCALE_TABLE"
        done
    fi
fi

# ---------------------------------------------------------------- report --

REF_S=""
if [[ -s $WORK/psql.payment_events.samples ]]; then
    REF_S=$(median 1 "$WORK/psql.payment_events.samples")
fi

SETTINGS="ROWS=$ROWS REPS=$REPS"
[[ $SCALE_CHECK == 1 ]] && SETTINGS+=" SCALE_CHECK=1"
DATE=$(date -u +%Y-%m-%d)
REPORT="$RESULTS/export-$DATE.md"
FAILED=0

{
    echo "# sluice export benchmark — $DATE"
    echo
    echo "\`select * from payment_events\` ($ROWS rows, $(pg -c "select pg_size_pretty(pg_total_relation_size('payment_events'))") on disk), written to /dev/null."
    echo "Median of $REPS interleaved runs after a warm-up; wall time and peak RSS of the client process from \`/usr/bin/time -f '%e %M'\`."
    echo
    echo "| variant | median s | × psql reference | peak RSS MB | round trips |"
    echo "| --- | ---: | ---: | ---: | ---: |"
    for key in "${VARIANTS[@]}"; do
        samples="$WORK/$key.payment_events.samples"
        if [[ -n ${STATUS[$key]} || ! -s $samples ]]; then
            echo "| ${LABEL[$key]} | ${STATUS[$key]:-no data} | | | ${TRIPS[$key]} |"
            [[ ${STATUS[$key]} == FAILED* ]] && FAILED=1
            continue
        fi
        s=$(median 1 "$samples")
        printf '| %s | %.2f | %s | %s | %s |\n' "${LABEL[$key]}" "$s" "$(ratio_of "$s" "$REF_S")" "$(mb "$(median 2 "$samples")")" "${TRIPS[$key]}"
    done
    echo

    echo "## TLS"
    echo
    tls_s="$WORK/sluice_ndjson_tls.payment_events.samples"
    psql_tls_s="$WORK/psql_tls.payment_events.samples"
    plain_s="$WORK/sluice_ndjson.payment_events.samples"
    if [[ -z $TLS_NOTE && -s $tls_s && -s $psql_tls_s && -s $plain_s ]]; then
        t=$(median 1 "$tls_s")
        echo "Both clients with \`sslmode=require\` on the same server: sluice NDJSON over TLS takes $(ratio_of "$t" "$(median 1 "$psql_tls_s")") the time of psql over TLS, and $(ratio_of "$t" "$(median 1 "$plain_s")") its own plain-TCP time."
        echo "sluice's connection: $(grep -E '^encryption:' <<<"${STATS[sluice_ndjson_tls]:-}" | cut -d' ' -f2- || true)."
    else
        echo "${TLS_NOTE:-no data}"
    fi
    echo

    if [[ $SCALE_CHECK == 1 ]]; then
        echo "## Memory vs row count (sluice NDJSON)"
        echo
        s1="$WORK/sluice_ndjson.payment_events.samples"
        s5="$WORK/sluice_ndjson.$SCALE_TABLE.samples"
        if [[ -z $SCALE_VERDICT && -s $s1 && -s $s5 ]]; then
            flatness_table "$s1" "$s5" "$ROWS" "$SCALE_ROWS"
        fi
        echo
        echo "Verdict: ${SCALE_VERDICT:-no data}"
        echo
    fi

    # shellcheck disable=SC2119  # no options: the plain machine section
    machine_section
    reproduce_section run.sh "$SETTINGS"
    echo
    raw_samples_section "$WORK"/*.samples
    for key in "${VARIANTS[@]}"; do
        if [[ -n ${STATS[$key]:-} ]]; then stats_block "\`--stats\` of $key:" "${STATS[$key]}"; fi
    done
} >"$REPORT"

show_report "$REPORT"

if (( FAILED )); then exit 1; fi
if [[ $SCALE_VERDICT == NOT* ]]; then exit 3; fi
exit 0
