# shellcheck shell=bash
# shellcheck disable=SC2034  # the settings and results are read by the sourcing scripts
# What every bench script shares, sourced right after `set -euo pipefail` (and
# LOG_PREFIX, optionally): the settings every script takes from the
# environment, tool checks, a scratch directory, the URL with its password
# masked, `log`, `pg`, plain TCP for libpq clients, building sluice, the
# psycopg venv, runs under GNU time, and the parts of the Markdown reports that
# read the same in every script. What is particular to a script (its variants,
# checks and tables) stays in the script.

# ---------------------------------------------------------------- settings --

# The settings shared by the scripts (each script's header lists those it
# reads); a script sets anything else it needs itself.
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
BENCH="$ROOT/bench"
URL=${SLUICE_BENCH_PG_URL:-postgres://postgres@127.0.0.1:5432/test}
# URL on plain TCP whatever PGSSLMODE says (every client of a comparison on
# the same footing; ConnectorX and asyncpg read only the URL). SSL_OFF is the
# suffix, for reports that show the URL masked.
if [[ $URL == *\?* ]]; then SSL_OFF="&sslmode=disable"; else SSL_OFF="?sslmode=disable"; fi
PLAIN_URL="$URL$SSL_OFF"
ROWS=${ROWS:-1000000}        # rows in payment_events (not read by lob.sh)
REPS=${REPS:-3}
SKIP_BUILD=${SKIP_BUILD:-0}
TARGET_DIR=${CARGO_TARGET_DIR:-$ROOT/target}
SLUICE=${SLUICE_BIN:-$TARGET_DIR/release/sluice}
VENV="$BENCH/.venv"
DATA="$BENCH/data"          # scratch files and import inputs (git-ignored)
RESULTS="$BENCH/results"

# require_positive_integers NAME...: exit 2 unless every named setting is one.
require_positive_integers() {
    local name
    for name in "$@"; do
        [[ ${!name} =~ ^[1-9][0-9]*$ ]] || { echo "$name must be a positive integer" >&2; exit 2; }
    done
}

[[ -x /usr/bin/time ]] || { echo "/usr/bin/time (GNU time) is required: apt-get install time" >&2; exit 2; }
# A script that talks to no PostgreSQL (mariadb.sh) sets BENCH_NO_PSQL=1 first.
if [[ ${BENCH_NO_PSQL:-0} != 1 ]]; then
    command -v psql >/dev/null || { echo "psql is required: apt-get install postgresql-client" >&2; exit 2; }
fi

# WORK: scratch space for one run, removed on exit. A script that starts a
# background process (server, proxy) defines `stop_background`, run first.
WORK=$(mktemp -d)
# shellcheck disable=SC2317  # called by the trap
remove_work() {
    if declare -F stop_background >/dev/null; then stop_background || true; fi
    rm -rf "$WORK"
}
trap remove_work EXIT
mkdir -p "$DATA" "$RESULTS"

# The same URL with any password masked, for everything we print or commit.
URL_SHOWN=$(sed -E 's#^([a-z]+://[^:/@]+):[^@]*@#\1:***@#' <<<"$URL")

log() { printf '[%s] %s\n' "${LOG_PREFIX:-bench}" "$*" >&2; }

# psql for the harness's own SQL: no ~/.psqlrc, stop on the first error,
# unaligned tuples-only output so results can be read into variables.
pg() { psql "$URL" -X -q -v ON_ERROR_STOP=1 -At "$@"; }

# libpq's sslmode=prefer is every client's default (psql, psycopg, and sluice,
# which reads PGSSLMODE too): each would encrypt when the server offers TLS.
# Compare like with like: plain TCP for every client unless PGSSLMODE is set.
export PGSSLMODE=${PGSSLMODE:-disable}

# ------------------------------------------------------------------ clients --

# build_sluice: `cargo build --release -p sluice-cli`, unless SKIP_BUILD=1.
build_sluice() {
    [[ $SKIP_BUILD != 1 ]] || return 0
    log "cargo build --release -p sluice-cli"
    (cd "$ROOT" && cargo build --release -p sluice-cli)
}

# ensure_psycopg: PY, the interpreter of bench/.venv with psycopg 3 (the venv
# made with PYTHON, default python3, on first use), and PSYCOPG_VERSION.
ensure_psycopg() { ensure_peer_venv "$VENV" psycopg 'psycopg[binary]>=3.1,<4'; }

# ensure_peer_venv DIR IMPORTS PIN...: PY, the interpreter of the virtualenv
# DIR with the pinned PINs (made with PYTHON, default python3, unless IMPORTS,
# a comma-separated module list, already import), and PSYCOPG_VERSION (empty
# when the venv has no psycopg).
ensure_peer_venv() {
    local venv=$1 imports=$2
    shift 2
    PY="$venv/bin/python"
    if ! [[ -x $PY ]] || ! "$PY" -c "import $imports" 2>/dev/null; then
        log "creating $venv with $*"
        "${PYTHON:-python3}" -m venv "$venv"
        "$PY" -m pip install --quiet "$@"
    fi
    PSYCOPG_VERSION=$("$PY" -c 'import psycopg; print(psycopg.__version__)' 2>/dev/null || true)
}

# peer_version NAME: the version of package NAME in PY's environment, or "?".
peer_version() { "$PY" -c "import importlib.metadata as m; print(m.version('$1'))" 2>/dev/null || echo "?"; }

# load_average: the 1, 5 and 15 minute load averages, or "?".
load_average() { cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || echo "?"; }

# ------------------------------------------------------------------- timing --

# timed_run CMD...: one run of CMD under GNU time, its standard output to
# /dev/null (the caller redirects standard error). On success TIME_SAMPLE is
# "elapsed_s max_rss_kb", the line format of the samples files; on failure the
# status is CMD's and TIME_FILE holds what GNU time said about it.
TIME_FILE="$WORK/time.out"
timed_run() {
    /usr/bin/time -f '%e %M' -o "$TIME_FILE" "$@" >/dev/null || return
    TIME_SAMPLE=$(tail -n 1 "$TIME_FILE")
}

# assert_dev_null KEY: an exporter that writes a temp file and renames it over
# --output would, run as root, replace /dev/null with a regular file and
# quietly change every later measurement (and the machine). Stop right there
# (exit 4) if KEY's run did that.
assert_dev_null() {
    [[ ! -c /dev/null ]] || return 0
    echo "ABORT: /dev/null is no longer a character device after '$1';" \
         "restore it with: rm -f /dev/null && mknod -m 666 /dev/null c 1 3" >&2
    exit 4
}

# median COLUMN FILE: median of one column of a samples file (mean of the
# middle two for an even count).
median() {
    awk -v c="$1" '{ print $c }' "$2" | sort -g | awk '
        { v[NR] = $1 }
        END { if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

# ratio_of A B: A / B as "1.23×", or "?" when B is not positive.
ratio_of() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f×", a / b; else print "?" }'; }

# flight_location LOG: LOCATION, the grpc:// address `sluice serve` says
# (in LOG, its standard error) its Arrow Flight listener took, waiting up to
# 10 s for it; exits showing LOG if the server never says.
flight_location() {
    LOCATION=
    for _ in $(seq 1 100); do
        LOCATION=$(sed -n 's/.*Arrow Flight on \(grpc:\/\/[^,]*\),.*/\1/p' "$1")
        [[ -z $LOCATION ]] || break
        sleep 0.1
    done
    [[ -n $LOCATION ]] || { log "sluice serve did not start:"; cat "$1" >&2; exit 1; }
    log "sluice serve: Flight on $LOCATION"
}

# report_path NAME: where a run's report goes, RESULTS/NAME-DATE.md, with the
# row count before the date when it is not the default 1,000,000
# (NAME-5000000-DATE.md), so a scale run keeps the main run's report.
report_path() {
    local rows=""
    if [[ $ROWS != 1000000 ]]; then rows="-$ROWS"; fi
    echo "$RESULTS/$1$rows-$(date -u +%F).md"
}

# tree_run KEY OUT: one run of CMD (set by the caller for KEY) under
# bench/lib/tree_rss.py, its standard output to OUT; appends "elapsed_s
# peak_tree_kb" to WORK/KEY.samples. Exits, showing the command's standard
# error, if it fails.
tree_run() {
    if ! "$PY" "$BENCH/lib/tree_rss.py" "$WORK/sample" "${CMD[@]}" >"$2" 2>"$WORK/err"; then
        log "$1 failed:"; tail -c 2000 "$WORK/err" >&2; exit 1
    fi
    assert_dev_null "$1"
    cat "$WORK/sample" >>"$WORK/$1.samples"
}

# check_then_time KEY...: the caller's `check KEY` for every KEY (one
# untimed run each), then REPS interleaved repetitions of the caller's
# `run KEY`.
check_then_time() {
    local key rep
    for key in "$@"; do
        log "checking $key"
        check "$key"
    done
    for (( rep = 1; rep <= REPS; rep++ )); do
        for key in "$@"; do
            log "repetition $rep/$REPS: $key"
            run "$key"
        done
    done
}

# ratio_table KEY...: the Markdown table of the samples' medians, a row per
# KEY: LABEL[KEY], seconds, the ratio to REFERENCE[KEY]'s seconds, peak RSS
# and its ratio (LABEL and REFERENCE are the caller's associative arrays).
ratio_table() {
    local key reference seconds reference_seconds rss reference_rss
    echo "| variant | seconds | × reference | peak RSS MB | × reference RSS |"
    echo "|---|---:|---:|---:|---:|"
    for key in "$@"; do
        reference=${REFERENCE[$key]}
        seconds=$(median 1 "$WORK/$key.samples")
        reference_seconds=$(median 1 "$WORK/$reference.samples")
        rss=$(median 2 "$WORK/$key.samples")
        reference_rss=$(median 2 "$WORK/$reference.samples")
        printf '| %s | %.2f | %s | %s | %s |\n' "${LABEL[$key]}" "$seconds" \
            "$(ratio_of "$seconds" "$reference_seconds")" "$(mb "$rss")" "$(ratio_of "$rss" "$reference_rss")"
    done
}

# stat_of TEXT NAME: the value of the `NAME: value` line of a --stats output.
stat_of() { sed -n "s/^$2: //p" <<<"$1" | head -n 1; }

# flatness_table SAMPLES SCALE_SAMPLES ROWS_SHOWN SCALE_ROWS_SHOWN: the
# SCALE_CHECK table (median time and peak RSS at ROWS and at SCALE_ROWS rows)
# and its verdict in SCALE_VERDICT. "Flat": at most 25% or 8 MB (allocator
# noise) above, whichever is larger. Anything proportional to rows would be ~5x.
flatness_table() {
    local rss scale_rss factor
    rss=$(median 2 "$1")
    scale_rss=$(median 2 "$2")
    echo "| rows | median s | peak RSS MB |"
    echo "| ---: | ---: | ---: |"
    printf '| %s | %.2f | %s |\n' "$3" "$(median 1 "$1")" "$(mb "$rss")"
    printf '| %s | %.2f | %s |\n' "$4" "$(median 1 "$2")" "$(mb "$scale_rss")"
    factor=$(awk -v a="$rss" -v b="$scale_rss" 'BEGIN { printf "%.2f", b / a }')
    if awk -v a="$rss" -v b="$scale_rss" 'BEGIN { exit !(b <= a * 1.25 || b - a <= 8192) }'; then
        SCALE_VERDICT="flat: peak RSS at $SCALE_ROWS rows is ${factor}× that at $ROWS rows"
    else
        SCALE_VERDICT="NOT FLAT: peak RSS at $SCALE_ROWS rows is ${factor}× that at $ROWS rows"
    fi
}

# ------------------------------------------------------------------ reports --

# mb KB -> megabytes with one decimal.
mb() { awk -v k="$1" 'BEGIN { printf "%.1f", k / 1024 }'; }
# fmt_int 1234567 -> 1,234,567 (not locale-dependent).
fmt_int() { sed -E ':a; s/([0-9])([0-9]{3})($|,)/\1,\2\3/; ta' <<<"$1"; }

# shell_words ARG...: the args as a readable, copy-pasteable command line.
shell_words() {
    local a
    for a in "$@"; do
        # shellcheck disable=SC2016  # the literal placeholder $URL
        if [[ $a == '$URL' ]]; then printf ' "$URL"'
        elif [[ $a =~ ^[][A-Za-z0-9_./=:@%+,-]+$ ]]; then printf ' %s' "$a"
        elif [[ $a != *\'* ]]; then printf " '%s'" "$a"
        elif [[ $a != *[\"\$\`]* ]]; then printf ' "%s"' "$a"
        elif [[ $a != *$'\n'* && $a != *'!'* ]]; then
            # Both quote kinds (e.g. SQL with '"'): double quotes, escaped.
            a=${a//\\/\\\\}; a=${a//\"/\\\"}; a=${a//\$/\\\$}; a=${a//\`/\\\`}
            printf ' "%s"' "$a"
        else printf ' %q' "$a"
        fi
    done
}

# machine_section [--load-average] [--pg-settings 'NAME...'] [--tls]
#                 [--psycopg-detail]: the report's "## Machine" section.
# --load-average adds the load at start (LOAD_AVG_START) and now; --pg-settings
# the values of those server settings; --tls what libpq clients connect with;
# --psycopg-detail psycopg's implementation and libpq version. The sluice line
# says "not built" when SLUICE_OK=0; the Python line needs ensure_psycopg.
machine_section() {
    local load_average=0 settings="" tls=0 detail=0 cpu mem_gb server dirty="" sluice_at python
    while (( $# )); do
        case $1 in
            --load-average)   load_average=1 ;;
            --pg-settings)    settings=$2; shift ;;
            --tls)            tls=1 ;;
            --psycopg-detail) detail=1 ;;
        esac
        shift
    done
    cpu=$(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo 2>/dev/null || true)
    mem_gb=$(awk '/^MemTotal/ { printf "%.0f", $2 / 1048576 }' /proc/meminfo 2>/dev/null || true)
    server="$(pg -c 'show server_version'), at $URL_SHOWN (client and server on the same machine unless the URL says otherwise)"
    if [[ -n $settings ]]; then
        settings=$(sed -E "s/([^ ]+)/'\1'/g; s/ +/, /g" <<<"$settings")
        server+="; $(pg -c "select string_agg(name || '=' || setting || coalesce(unit, ''), ', ' order by name)
                            from pg_settings where name in ($settings)")"
    fi
    if [[ -n $(git -C "$ROOT" status --porcelain 2>/dev/null) ]]; then dirty=" (with uncommitted changes)"; fi
    if (( ${SLUICE_OK:-1} )); then sluice_at=${SLUICE#"$ROOT"/}; else sluice_at="not built"; fi
    # A script that runs no Python peer (copy.sh) leaves PY unset.
    if [[ -n ${PY:-} ]]; then python="$("$PY" --version 2>&1)${PSYCOPG_VERSION:+, psycopg $PSYCOPG_VERSION}"; fi
    if (( detail )); then
        python+=" ($("$PY" -c 'import psycopg; print(psycopg.pq.__impl__)') implementation, libpq $("$PY" -c 'import psycopg; v = psycopg.pq.version(); print(f"{v // 10000}.{v % 100}")'))"
    fi
    echo "## Machine"
    echo
    echo "- CPUs (nproc): $(nproc)${cpu:+ — $cpu}"
    if [[ -n $mem_gb ]]; then echo "- memory: $mem_gb GiB"; fi
    echo "- kernel: $(uname -sr)"
    if (( load_average )); then
        echo "- load average (1/5/15 min) at start: $LOAD_AVG_START; at end: $(load_average)"
    fi
    echo "- PostgreSQL server: $server"
    if (( tls )); then
        echo "- connections: sluice without TLS (it has none); psql and psycopg with PGSSLMODE=$PGSSLMODE: $(pg -c "select case when ssl then 'TLS ' || version else 'no TLS' end from pg_stat_ssl where pid = pg_backend_pid()")"
    fi
    echo "- psql: $(psql --version)"
    echo "- sluice: $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo "no commit")$dirty, $sluice_at"
    if [[ -n ${PY:-} ]]; then echo "- Python: $python"; fi
    echo
}

# reproduce_section SCRIPT SETTINGS [VARIABLE URL]: "## Reproduce" with the
# command line that repeats this run: the masked URL (VARIABLE=URL, default
# SLUICE_BENCH_PG_URL and this run's), SETTINGS, SLUICE_BIN if set, the script.
reproduce_section() {
    local line="${3:-SLUICE_BENCH_PG_URL}='${4:-$URL_SHOWN}' $2"
    if [[ -n ${SLUICE_BIN:-} ]]; then line+=" SLUICE_BIN='$SLUICE_BIN'"; fi
    echo "## Reproduce"
    echo
    echo '```'
    echo "$line bash bench/$1"
    echo '```'
}

# commands_block SHOW KEY...: a fenced block with every KEY's command line, as
# the function SHOW KEY sets it in CMD (with the literal placeholder $URL for
# the URL, so no password gets into the file), paths relative to the
# repository.
commands_block() {
    local show=$1 key width=0
    shift
    for key in "$@"; do
        if (( ${#key} + 1 > width )); then width=$(( ${#key} + 1 )); fi
    done
    echo '```'
    for key in "$@"; do
        printf "%-${width}s" "$key:"
        ( "$show" "$key"; shell_words "${CMD[@]}" ) | sed "s#$ROOT/##g"
        echo
    done
    echo '```'
}

# raw_samples_section FILE...: "## Raw samples" with every run of every
# samples file that exists, each named by its file name without .samples.
raw_samples_section() {
    local file
    echo "## Raw samples (elapsed s, max RSS KB)"
    echo
    for file in "$@"; do
        [[ -e $file ]] || continue
        echo "- $(basename "$file" .samples): $(awk '{ printf "%s%s s / %s KB", (NR > 1 ? "; " : ""), $1, $2 }' "$file")"
    done
}

# stats_block TITLE TEXT: a sluice --stats output under its title.
stats_block() {
    echo
    echo "$1"
    echo
    echo '```'
    echo "$2"
    echo '```'
}

# show_report FILE: print the written report and say where it is.
show_report() {
    cat "$1"
    log "written to ${1#"$ROOT"/}"
}
