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

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BENCH="$ROOT/bench"
URL=${SLUICE_BENCH_PG_URL:-postgres://postgres@127.0.0.1:5432/test}
ROWS=${ROWS:-1000000}
REPS=${REPS:-3}
SCALE_CHECK=${SCALE_CHECK:-0}
SKIP_BUILD=${SKIP_BUILD:-0}
SCALE_ROWS=5000000
TARGET_DIR=${CARGO_TARGET_DIR:-$ROOT/target}
SLUICE=${SLUICE_BIN:-$TARGET_DIR/release/sluice}
VENV="$BENCH/.venv"
DATA="$BENCH/data"          # scratch output for the row checks (git-ignored)
RESULTS="$BENCH/results"
# Bump when the generator SQL changes, so existing tables get regenerated.
GEN_VERSION=1

[[ $ROWS =~ ^[1-9][0-9]*$ ]] || { echo "ROWS must be a positive integer" >&2; exit 2; }
[[ $REPS =~ ^[1-9][0-9]*$ ]] || { echo "REPS must be a positive integer" >&2; exit 2; }
LOG_PREFIX=bench
# Tool checks, URL masking, log, pg, plain TCP, report helpers.
source "$ROOT/bench/lib/common.sh"

WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
mkdir -p "$DATA" "$RESULTS"

# The table generator is shared with the other bench scripts.
source "$ROOT/bench/lib/payment_events.sh"

ensure_table payment_events "$ROWS"
if [[ $SCALE_CHECK == 1 ]]; then
    SCALE_TABLE=$(table_for "$SCALE_ROWS")
    ensure_table "$SCALE_TABLE" "$SCALE_ROWS"
fi

# ------------------------------------------------------------------ sluice --

if [[ $SKIP_BUILD != 1 ]]; then
    log "cargo build --release -p sluice-cli"
    (cd "$ROOT" && cargo build --release -p sluice-cli)
fi
# With SKIP_BUILD=1 and no usable binary the sluice rows say "not built"
# instead of aborting, so the baselines can be measured on their own.
SLUICE_OK=0
if [[ -x $SLUICE ]] && "$SLUICE" export --help >/dev/null 2>&1; then
    SLUICE_OK=1
else
    log "WARNING: $SLUICE missing or not runnable: sluice rows will be skipped"
fi

# ---------------------------------------------------------------- psycopg --

PY="$VENV/bin/python"
if ! [[ -x $PY ]] || ! "$PY" -c 'import psycopg' 2>/dev/null; then
    log "creating $VENV with psycopg[binary]"
    "${PYTHON:-python3}" -m venv "$VENV"
    "$PY" -m pip install --quiet 'psycopg[binary]>=3.1,<4'
fi
PSYCOPG_VERSION=$("$PY" -c 'import psycopg; print(psycopg.__version__)')

# --------------------------------------------------------------- variants --

# Every variant is a key; cmd_for KEY TABLE OUT sets CMD to the argv that
# exports `select * from TABLE` to OUT (/dev/null when timed).
VARIANTS=(psql sluice_csv sluice_ndjson sluice_ndjson_fs1000 psycopg)
# shellcheck disable=SC2016  # the backticks are Markdown code spans
declare -A LABEL=(
    [psql]='psql `\copy ... csv` (reference)'
    [sluice_csv]='sluice CSV'
    [sluice_ndjson]='sluice NDJSON'
    [sluice_ndjson_fs1000]='sluice NDJSON `--fetch-size 1000`'
    [psycopg]="psycopg $PSYCOPG_VERSION named cursor NDJSON"
)
cmd_for() {
    local key=$1 table=$2 out=$3 q="select * from $2"
    case $key in
        psql)                 CMD=(psql "$URL" -X -c "\\copy ($q) to '$out' csv") ;;
        sluice_csv)           CMD=("$SLUICE" export --db "$URL" --query "$q" --format csv --output "$out") ;;
        sluice_ndjson)        CMD=("$SLUICE" export --db "$URL" --query "$q" --format ndjson --output "$out") ;;
        sluice_ndjson_fs1000) CMD=("$SLUICE" export --db "$URL" --query "$q" --format ndjson --output "$out" --fetch-size 1000) ;;
        psycopg)              CMD=("$PY" "$BENCH/psycopg_export.py" "$URL" "$out" --query "$q" --itersize 1000) ;;
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
        *csv|psql)
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
# "elapsed_s max_rss_kb" to $WORK/KEY.TABLE.samples. stdout and stderr of the
# tool go to a log so progress output can't slow it down or clutter ours.
timed() {
    local key=$1 table=$2 tf="$WORK/time.out"
    cmd_for "$key" "$table" /dev/null
    if /usr/bin/time -f '%e %M' -o "$tf" "${CMD[@]}" >/dev/null 2>>"$WORK/$key.run.err"; then
        tail -n 1 "$tf" >>"$WORK/$key.$table.samples"
    else
        STATUS[$key]="FAILED: timed run exited non-zero ($(tail -n 1 "$WORK/$key.run.err"))"
        log "$key: ${STATUS[$key]}"
    fi
    # An exporter that writes a temp file and renames it over --output would,
    # run as root, replace /dev/null with a regular file and quietly change
    # every later measurement (and the machine). Stop right there if so.
    if [[ ! -c /dev/null ]]; then
        echo "ABORT: /dev/null is no longer a character device after '$key';" \
             "restore it with: rm -f /dev/null && mknod -m 666 /dev/null c 1 3" >&2
        exit 4
    fi
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

# median COLUMN FILE: median of one column of a samples file (mean of the
# middle two for an even count).
median() {
    awk -v c="$1" '{ print $c }' "$2" | sort -g | awk '
        { v[NR] = $1 }
        END { if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

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

PG_VERSION=$(pg -c 'show server_version')
CPU=$(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo 2>/dev/null || true)
MEM_GB=$(awk '/^MemTotal/ { printf "%.0f", $2 / 1048576 }' /proc/meminfo 2>/dev/null || true)
GIT_REV=$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo "no commit")
GIT_DIRTY=""
if [[ -n $(git -C "$ROOT" status --porcelain 2>/dev/null) ]]; then GIT_DIRTY=" (with uncommitted changes)"; fi
REPRO="SLUICE_BENCH_PG_URL='$URL_SHOWN' ROWS=$ROWS REPS=$REPS"
[[ $SCALE_CHECK == 1 ]] && REPRO+=" SCALE_CHECK=1"
[[ -n ${SLUICE_BIN:-} ]] && REPRO+=" SLUICE_BIN='$SLUICE_BIN'"
REPRO+=" bash bench/run.sh"
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
        ratio="?"
        [[ -n $REF_S ]] && ratio=$(awk -v a="$s" -v b="$REF_S" 'BEGIN { if (b > 0) printf "%.2f×", a / b; else print "?" }')
        printf '| %s | %.2f | %s | %s | %s |\n' "${LABEL[$key]}" "$s" "$ratio" "$(mb "$(median 2 "$samples")")" "${TRIPS[$key]}"
    done
    echo

    if [[ $SCALE_CHECK == 1 ]]; then
        echo "## Memory vs row count (sluice NDJSON)"
        echo
        s1="$WORK/sluice_ndjson.payment_events.samples"
        s5="$WORK/sluice_ndjson.$SCALE_TABLE.samples"
        if [[ -z $SCALE_VERDICT && -s $s1 && -s $s5 ]]; then
            r1=$(median 2 "$s1"); r5=$(median 2 "$s5")
            echo "| rows | median s | peak RSS MB |"
            echo "| ---: | ---: | ---: |"
            printf '| %s | %.2f | %s |\n' "$ROWS" "$(median 1 "$s1")" "$(mb "$r1")"
            printf '| %s | %.2f | %s |\n' "$SCALE_ROWS" "$(median 1 "$s5")" "$(mb "$r5")"
            # "Flat": at most 25% or 8 MB (allocator noise) above, whichever
            # is larger. Anything proportional to rows would be ~5x.
            if awk -v a="$r1" -v b="$r5" 'BEGIN { exit !(b <= a * 1.25 || b - a <= 8192) }'; then
                SCALE_VERDICT="flat: peak RSS at $SCALE_ROWS rows is $(awk -v a="$r1" -v b="$r5" 'BEGIN { printf "%.2f", b / a }')× that at $ROWS rows"
            else
                SCALE_VERDICT="NOT FLAT: peak RSS at $SCALE_ROWS rows is $(awk -v a="$r1" -v b="$r5" 'BEGIN { printf "%.2f", b / a }')× that at $ROWS rows"
            fi
        fi
        echo
        echo "Verdict: ${SCALE_VERDICT:-no data}"
        echo
    fi

    echo "## Machine"
    echo
    echo "- CPUs (nproc): $(nproc)${CPU:+ — $CPU}"
    [[ -n $MEM_GB ]] && echo "- memory: $MEM_GB GiB"
    echo "- kernel: $(uname -sr)"
    echo "- PostgreSQL server: $PG_VERSION, at $URL_SHOWN (client and server on the same machine unless the URL says otherwise)"
    echo "- psql: $(psql --version)"
    if (( SLUICE_OK )); then sluice_at=${SLUICE#"$ROOT"/}; else sluice_at="not built"; fi
    echo "- sluice: $GIT_REV$GIT_DIRTY, $sluice_at"
    echo "- Python: $("$PY" --version 2>&1), psycopg $PSYCOPG_VERSION"
    echo
    echo "## Reproduce"
    echo
    echo '```'
    echo "$REPRO"
    echo '```'
    echo
    echo "## Raw samples (elapsed s, max RSS KB)"
    echo
    for f in "$WORK"/*.samples; do
        [[ -e $f ]] || continue
        name=$(basename "$f" .samples)
        echo "- $name: $(awk '{ printf "%s%s s / %s KB", (NR > 1 ? "; " : ""), $1, $2 }' "$f")"
    done
    for key in "${VARIANTS[@]}"; do
        if [[ -n ${STATS[$key]:-} ]]; then
            echo
            echo "\`--stats\` of $key:"
            echo
            echo '```'
            echo "${STATS[$key]}"
            echo '```'
        fi
    done
} >"$REPORT"

cat "$REPORT"
log "written to ${REPORT#"$ROOT"/}"

if (( FAILED )); then exit 1; fi
if [[ $SCALE_VERDICT == NOT* ]]; then exit 3; fi
exit 0
