#!/usr/bin/env bash
# bench/lob.sh — large-object export benchmark for sluice (`export --lob inline`).
#
# One command, run from anywhere:
#
#     bash bench/lob.sh
#
# Environment (all optional; the same conventions as bench/run.sh):
#   SLUICE_BENCH_PG_URL  database URL      (default postgres://postgres@127.0.0.1:5432/test)
#   REPS                 timed repetitions on the 10,000-row table (default 3); medians
#   HUGE_REPS            timed repetitions on the 1.5 GB object (default REPS)
#   HUGE=0               skip the 1.5 GB object (table, checks and runs)
#   SKIP_BUILD=1         do not run `cargo build --release -p sluice-cli`
#   SLUICE_BIN           sluice binary to use (default <target dir>/release/sluice)
#   PYTHON               interpreter used to create bench/.venv (default python3)
#   PROXY_PORT           port of the counting `sluice proxy` (default 6498)
#   PGSSLMODE            sslmode of every client (default disable: see below)
#
# What it does, in order:
#   1. makes sure table lob_bench holds 10,000 rows (id int primary key, t text,
#      b bytea, doc oid): t 10 KB of text, b 10 KB of incompressible bytes, both
#      SET STORAGE EXTERNAL (out of line, uncompressed), doc a large object of
#      another 10 KB of such bytes; and (unless HUGE=0) table lob_huge with one
#      row whose doc is a 1.5 GB large object (750,000,000 'y' bytes, then
#      750,000,000 'z'). Both are generated on the server, deterministically,
#      and kept between runs (recreated, large objects unlinked, when the
#      marker comment, the row count or the object size is off);
#   2. builds sluice in release mode, makes bench/.venv with psycopg 3;
#   3. runs every variant once, untimed, through `sluice proxy` (a counting
#      proxy without added latency): the output is checked -- every row's
#      values against md5s computed by the server, the 1.5 GB object's bytes
#      streamed through a checker -- and the proxy's report gives the round
#      trips of every client, psql and psycopg included;
#   4. warms up (one untimed psql run), then times REPS repetitions of the
#      10,000-row variants, interleaved, and HUGE_REPS of the two 1.5 GB ones,
#      interleaved, under /usr/bin/time, output to /dev/null, directly to the
#      server (no proxy);
#   5. prints a Markdown table and writes it to bench/results/lob-<date>.md.
#
# Variants on lob_bench (~30 KB a row, ~300 MB in all):
#   psql        `\copy (select id, t, b, lo_get(doc) from lob_bench) to '/dev/null'
#               (format binary)`: the reference, no text encoding at all
#   sluice      NDJSON of `select id, t, b` (bytea inline, no large object)
#               and of `select id, t, b, doc` with `--lob inline`
#   psycopg     bench/psycopg_lob.py: inline (`lo_get(doc) as doc` through a
#               named cursor, itersize 1000) and the locator pattern (the rows
#               through the named cursor, then `select lo_get(%s)` per row: one
#               extra round trip per row)
# On lob_huge: sluice `--lob inline` against psycopg reading the object with
# `select lo_get(%s, %s, %s)` in 64 MiB pieces (psycopg 3 has no large-object
# API, and one bytea can't hold 1.5 GB), both writing NDJSON with base64.
#
# Round trips: sluice's own `--stats` (`round trips:`, including connecting);
# for psql and psycopg the proxy's count from the untimed checked run (the
# sluice runs' proxy counts are in the report's raw section, for comparison).
#
# TLS: every client here (psql, psycopg, and sluice, which reads PGSSLMODE as
# libpq does) defaults to sslmode=prefer, so against a server with ssl=on each
# would encrypt everything; PGSSLMODE defaults to disable here, plain TCP for
# all, unless set (the report says what each client used). An sslmode in the URL
# wins over PGSSLMODE.
#
# Exit status: 0 if all went well (missing the 1.3× target is reported, not an
# error); 1 if a variant failed its run or its output check (the results file
# is still written, with the failure in it); 4 if /dev/null stopped being a
# device.

set -euo pipefail

# ---------------------------------------------------------------- settings --

LOG_PREFIX=lob-bench
# Shared settings (URL, REPS, SKIP_BUILD, SLUICE, ...), scratch WORK, log, pg,
# plain TCP, timing and report helpers.
# shellcheck source=lib/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/common.sh"
HUGE_REPS=${HUGE_REPS:-$REPS}
HUGE=${HUGE:-1}
PROXY_PORT=${PROXY_PORT:-6498}
LOB_ROWS=10000
HUGE_HALF=750000000         # bytes of each half of the big object
HUGE_BYTES=$((2 * HUGE_HALF))
PSYCOPG_PIECE=$((64 * 1024 * 1024))
# Bump when the generator SQL changes, so existing tables get regenerated.
LOB_GEN_VERSION=1
require_positive_integers REPS HUGE_REPS PROXY_PORT

LOAD_AVG_START=$(load_average)

PROXY_PID=
# shellcheck disable=SC2317  # called on exit by common.sh
stop_background() {
    if [[ -n $PROXY_PID ]]; then kill "$PROXY_PID" 2>/dev/null || true; wait "$PROXY_PID" 2>/dev/null || true; fi
}

# ----------------------------------------------------------- test tables --

# drop_lob_table NAME: unlink NAME's large objects and drop it, but only if
# this script made it (its comment says so): never another table's objects.
drop_lob_table() {
    local table=$1 comment
    [[ -n $(pg -c "select to_regclass('$table')") ]] || return 0
    comment=$(pg -c "select coalesce(obj_description('$table'::regclass, 'pg_class'), '')")
    if [[ $comment != "sluice-bench lob "* ]]; then
        echo "table $table exists but was not made by bench/lob.sh (comment '$comment'): drop it or use another database" >&2
        exit 2
    fi
    pg -1 -c "select count(lo_unlink(doc)) from $table
              where doc in (select oid from pg_largeobject_metadata)" \
          -c "drop table $table" >/dev/null
}

ensure_lob_bench() {
    local marker="sluice-bench lob v$LOB_GEN_VERSION rows=$LOB_ROWS" have_marker have_rows
    if [[ -n $(pg -c "select to_regclass('lob_bench')") ]]; then
        have_marker=$(pg -c "select coalesce(obj_description('lob_bench'::regclass, 'pg_class'), '')")
        # Rows with their large object present.
        have_rows=$(pg -c "select count(*) from lob_bench
                           where doc in (select oid from pg_largeobject_metadata)")
        if [[ $have_marker == "$marker" && $have_rows == "$LOB_ROWS" ]]; then
            log "table lob_bench: $LOB_ROWS rows, up to date"
            return
        fi
        log "table lob_bench: has $have_rows rows / '$have_marker', want $LOB_ROWS / '$marker': recreating"
        drop_lob_table lob_bench
    else
        log "table lob_bench: creating with $LOB_ROWS rows (about a minute)"
    fi
    # sha256 of distinct inputs: incompressible bytes, the same on every
    # machine. t is hex text (10,240 characters), b and the object 10,240
    # bytes each. One transaction: all or nothing.
    pg -1 -v n="$LOB_ROWS" -f - <<SQL
SET client_min_messages = warning;
CREATE TABLE lob_bench (id int PRIMARY KEY, t text, b bytea, doc oid);
ALTER TABLE lob_bench ALTER COLUMN t SET STORAGE EXTERNAL, ALTER COLUMN b SET STORAGE EXTERNAL;
INSERT INTO lob_bench
SELECT g,
  (SELECT string_agg(encode(sha256(('t' || (g * 1000 + i))::bytea), 'hex'), '') FROM generate_series(1, 160) i),
  (SELECT string_agg(sha256((g * 1000 + i)::text::bytea), ''::bytea) FROM generate_series(1, 320) i),
  lo_from_bytea(0, (SELECT string_agg(sha256(('lo' || (g * 1000 + i))::bytea), ''::bytea) FROM generate_series(1, 320) i))
FROM generate_series(1, :n) AS g;
COMMENT ON TABLE lob_bench IS '$marker';
SQL
    pg -c "VACUUM ANALYZE lob_bench"
    log "table lob_bench: $(pg -c "select pg_size_pretty(pg_total_relation_size('lob_bench'))") on disk, plus $LOB_ROWS large objects"
}

# The size of lob_huge's object, or nothing (lo_open needs a transaction: the
# statement's own is enough).
huge_size() {
    pg -c "select lo_lseek64(lo_open(doc, 262144), 0, 2) from lob_huge
           where doc in (select oid from pg_largeobject_metadata)" 2>/dev/null || true
}

ensure_lob_huge() {
    local marker="sluice-bench lob v$LOB_GEN_VERSION bytes=$HUGE_BYTES" have_marker have_size
    if [[ -n $(pg -c "select to_regclass('lob_huge')") ]]; then
        have_marker=$(pg -c "select coalesce(obj_description('lob_huge'::regclass, 'pg_class'), '')")
        have_size=$(huge_size)
        if [[ $have_marker == "$marker" && $have_size == "$HUGE_BYTES" ]]; then
            log "table lob_huge: one $HUGE_BYTES-byte object, up to date"
            return
        fi
        log "table lob_huge: has a '$have_size'-byte object / '$have_marker', want $HUGE_BYTES / '$marker': recreating"
        drop_lob_table lob_huge
    else
        log "table lob_huge: creating a $HUGE_BYTES-byte large object (about a minute)"
    fi
    # Two halves because one bytea can't exceed 1 GB; different bytes so a
    # half out of place fails the check.
    pg -1 -v half="$HUGE_HALF" -f - >/dev/null <<SQL
SET client_min_messages = warning;
CREATE TABLE lob_huge (id int PRIMARY KEY, doc oid);
INSERT INTO lob_huge VALUES (1, lo_from_bytea(0, convert_to(repeat('y', :half), 'UTF8')));
SELECT lo_put(doc, :half, convert_to(repeat('z', :half), 'UTF8')) FROM lob_huge;
COMMENT ON TABLE lob_huge IS '$marker';
SQL
    pg -c "VACUUM ANALYZE lob_huge"
    have_size=$(huge_size)
    [[ $have_size == "$HUGE_BYTES" ]] || { echo "lob_huge: object has '$have_size' bytes after creation, want $HUGE_BYTES" >&2; exit 1; }
}

ensure_lob_bench
[[ $HUGE == 0 ]] || ensure_lob_huge

# ------------------------------------------------------------------ sluice --

build_sluice
# sluice is required: it is what this benchmark is about, and its proxy
# counts the other clients' round trips.
if ! [[ -x $SLUICE ]] || ! "$SLUICE" export --help 2>/dev/null | grep -q -- '--lob'; then
    echo "$SLUICE is missing or has no export --lob: build it (cargo build --release -p sluice-cli) or set SLUICE_BIN" >&2
    exit 2
fi

# ---------------------------------------------------------------- psycopg --

ensure_psycopg

# ------------------------------------------------------------------ proxy --

# Where the proxy forwards to (host:port of the URL), and the URL through it.
# Without a TCP host in a postgres:// URL (a socket, a key=value string)
# there is no proxy: round trips of psql and psycopg are then "—".
UPSTREAM=$("$PY" -c '
import sys, urllib.parse as u
p = u.urlparse(sys.argv[1])
if p.scheme in ("postgres", "postgresql") and p.hostname and "host=" not in p.query:
    print((p.hostname or "127.0.0.1") + ":" + str(p.port or 5432))' "$URL" 2>/dev/null || true)
PROXY_URL=""
if [[ -n $UPSTREAM ]]; then
    PROXY_URL=$("$PY" -c '
import sys, urllib.parse as u
p = u.urlparse(sys.argv[1])
user = p.netloc.rsplit("@", 1)[0] + "@" if "@" in p.netloc else ""
print(p._replace(netloc=f"{user}127.0.0.1:{sys.argv[2]}").geturl())' "$URL" "$PROXY_PORT")
    if (exec 3<>"/dev/tcp/127.0.0.1/$PROXY_PORT") 2>/dev/null; then
        echo "port $PROXY_PORT is in use: set PROXY_PORT to a free one" >&2
        exit 2
    fi
else
    log "WARNING: no TCP host in the URL: psql and psycopg round trips won't be counted"
fi

# proxy_start REPORT: a counting proxy (no added latency) writing REPORT when
# stopped. Ready once it has printed its banner.
proxy_start() {
    local report=$1 plog="$WORK/proxy.$RANDOM.log" i
    "$SLUICE" proxy --listen "127.0.0.1:$PROXY_PORT" --upstream "$UPSTREAM" --output "$report" 2>"$plog" &
    PROXY_PID=$!
    for (( i = 0; i < 100; i++ )); do
        grep -q '^sluice proxy:' "$plog" 2>/dev/null && return 0
        kill -0 "$PROXY_PID" 2>/dev/null || break
        sleep 0.05
    done
    echo "sluice proxy did not start: $(cat "$plog")" >&2
    exit 1
}
# proxy_stop: SIGINT makes the proxy write its report and exit.
proxy_stop() {
    kill -INT "$PROXY_PID"
    wait "$PROXY_PID" || true
    PROXY_PID=
}
# proxy_trips REPORT: total round trips over all connections.
proxy_trips() {
    "$PY" -c 'import json, sys; print(json.load(open(sys.argv[1]))["round_trips"])' "$1" 2>/dev/null || echo "?"
}

# ---------------------------------------------------------------- checker --

# One Python checker for every output:
#   copy FILE MD5S         binary COPY file: every tuple's fields vs the md5s
#   ndjson FILE MD5S KEYS  NDJSON: keys in order, t/b/doc decoded vs the md5s
#   huge HALF              NDJSON on stdin: one row {id: 1, doc: base64}, the
#                          object's bytes (HALF 'y' then HALF 'z') checked as
#                          they stream by
# MD5S is `id|md5(t)|md5(b)|md5(lo_get(doc))` per row, from the server. Prints
# nothing (huge: the bytes it read) and exits 0 if all is well, else exits 1
# with one line on stderr saying what is wrong.
cat >"$WORK/check.py" <<'PY'
import base64, hashlib, json, struct, sys

def expected(path):
    want = {}
    for line in open(path):
        i, t, b, d = line.rstrip("\n").split("|")
        want[int(i)] = (t, b, d)
    return want

def md5(data):
    return hashlib.md5(data).hexdigest()

def check_rows(seen, want):
    if seen != set(want):
        sys.exit(f"{len(seen)} distinct ids, want {len(want)}")

def copy(path, md5s):
    want, seen = expected(md5s), set()
    with open(path, "rb") as f:
        if f.read(11) != b"PGCOPY\n\xff\r\n\0":
            sys.exit("not a binary COPY file")
        _flags, ext = struct.unpack(">ii", f.read(8))
        f.read(ext)
        while True:
            (n,) = struct.unpack(">h", f.read(2))
            if n == -1:
                break
            fields = []
            for _ in range(n):
                (size,) = struct.unpack(">i", f.read(4))
                fields.append(f.read(size) if size >= 0 else None)
            i = struct.unpack(">i", fields[0])[0]
            if (md5(fields[1]), md5(fields[2]), md5(fields[3])) != want.get(i):
                sys.exit(f"row {i} differs")
            seen.add(i)
    check_rows(seen, want)

def ndjson(path, md5s, keys):
    want, seen, keys = expected(md5s), set(), keys.split(",")
    with open(path, "rb") as f:
        for line in f:
            row = json.loads(line)
            if list(row) != keys:
                sys.exit(f"keys {list(row)}, want {keys}")
            i = row["id"]
            got = (md5(row["t"].encode()), md5(base64.b64decode(row["b"])),
                   md5(base64.b64decode(row["doc"])) if "doc" in row else want.get(i, ("",) * 3)[2])
            if got != want.get(i):
                sys.exit(f"row {i} differs")
            if i in seen:
                sys.exit(f"row {i} twice")
            seen.add(i)
    check_rows(seen, want)

def huge(half):
    half = int(half)
    stream = sys.stdin.buffer
    head = b""
    while b'"doc"' not in head:
        block = stream.read(4096)
        if not block:
            sys.exit(f"no doc column in {head[:200]!r}")
        head += block
    # The text up to the opening quote of the doc value.
    start = head.index(b'"doc"') + 5
    rest = head[start:].lstrip()
    if not rest.startswith(b":"):
        sys.exit("bad JSON after doc")
    rest = rest[1:].lstrip()
    if not rest.startswith(b'"'):
        sys.exit("doc is not a string")
    prefix = head[: len(head) - len(rest)]
    pending, text, size, digest, suffix = b"", rest[1:], 0, hashlib.md5(), None
    total = len(head)
    while True:
        end = text.find(b'"')
        chunk = text if end < 0 else text[:end]
        pending += chunk
        cut = len(pending) - len(pending) % 4 if end < 0 else len(pending)
        data = base64.b64decode(pending[:cut], validate=True)
        pending = pending[cut:]
        size += len(data)
        digest.update(data)
        if end >= 0:
            suffix = text[end + 1 :]
            break
        text = stream.read(1 << 23)
        total += len(text)
        if not text:
            sys.exit("output ended inside the doc value")
    tail = stream.read()
    total += len(tail)
    suffix += tail
    row = json.loads(prefix + b'""' + suffix)
    if list(row) != ["id", "doc"] or row["id"] != 1 or suffix.count(b"\n") != 1:
        sys.exit(f"row {row}, want one row with keys id, doc and id 1")
    want = hashlib.md5()
    for byte in (b"y", b"z"):
        block = byte * (1 << 24)
        left = half
        while left:
            step = min(left, len(block))
            want.update(block[:step])
            left -= step
    if size != 2 * half:
        sys.exit(f"object has {size} bytes, want {2 * half}")
    if digest.hexdigest() != want.hexdigest():
        sys.exit("object bytes differ")
    print(total)

{"copy": copy, "ndjson": ndjson, "huge": huge}[sys.argv[1]](*sys.argv[2:])
PY

log "md5s of every lob_bench row, from the server"
pg -c "select id, md5(t), md5(b), md5(lo_get(doc)) from lob_bench order by id" >"$WORK/lob_bench.md5"

# --------------------------------------------------------------- variants --

# Every variant is a key; cmd_for KEY OUT [URL] sets CMD to the argv that
# exports to OUT (/dev/null when timed; - for standard output) from URL
# (default $URL).
VARIANTS=(psql sluice_bytea sluice_lob psycopg_inline psycopg_locator)
HUGE_VARIANTS=(sluice_huge psycopg_huge)
# shellcheck disable=SC2016  # the backticks are Markdown code spans
declare -A LABEL=(
    [psql]='psql `\copy (… lo_get(doc) …) to … (format binary)` (reference)'
    [sluice_bytea]='sluice NDJSON, bytea inline (`select id, t, b`)'
    [sluice_lob]='sluice NDJSON, large objects inline (`--lob inline`)'
    [psycopg_inline]="psycopg $PSYCOPG_VERSION inline fetch (\`lo_get(doc)\`, named cursor)"
    [psycopg_locator]="psycopg $PSYCOPG_VERSION locator pattern (\`select lo_get(%s)\` per row)"
    [sluice_huge]='sluice NDJSON `--lob inline`'
    [psycopg_huge]="psycopg $PSYCOPG_VERSION \`lo_get(doc, offset, 64 MiB)\` loop"
)
declare -A NOTE=(
    [psql]="reference: binary COPY, no text encoding"
    [sluice_bytea]="no large object: 20 of the reference's 30 KB per row"
    [sluice_lob]="target ≤ 1.3× reference"
    [psycopg_inline]="itersize 1000, binary format"
    [psycopg_locator]="rows through a named cursor (itersize 1000), then one \`select lo_get(%s)\` per row; binary format"
    [sluice_huge]="1 MiB pieces in one query"
    [psycopg_huge]="one query per 64 MiB piece, base64 written piece by piece; binary format"
)
cmd_for() {
    local key=$1 out=$2 url=${3:-$URL} o
    o=(--output "$out")
    [[ $out == - ]] && o=()
    case $key in
        psql)            CMD=(psql "$url" -X -c "\\copy (select id, t, b, lo_get(doc) from lob_bench) to '$out' (format binary)") ;;
        sluice_bytea)    CMD=("$SLUICE" export --db "$url" --query "select id, t, b from lob_bench" --format ndjson "${o[@]}" --stats) ;;
        sluice_lob)      CMD=("$SLUICE" export --db "$url" --query "select id, t, b, doc from lob_bench" --lob inline --format ndjson "${o[@]}" --stats) ;;
        psycopg_inline)  CMD=("$PY" "$BENCH/psycopg_lob.py" "$url" "$out" --mode inline
                              --query "select id, t, b, lo_get(doc) as doc from lob_bench" --itersize 1000) ;;
        psycopg_locator) CMD=("$PY" "$BENCH/psycopg_lob.py" "$url" "$out" --mode locator
                              --query "select id, t, b, doc from lob_bench" --locator lo_get --itersize 1000) ;;
        sluice_huge)     CMD=("$SLUICE" export --db "$url" --query "select id, doc from lob_huge" --lob inline --format ndjson "${o[@]}" --stats) ;;
        psycopg_huge)    CMD=("$PY" "$BENCH/psycopg_lob.py" "$url" "$out" --mode locator
                              --query "select id, doc from lob_huge" --piece "$PSYCOPG_PIECE") ;;
    esac
}
# shown_command KEY: cmd_for as the report shows it, with a literal $URL.
# shellcheck disable=SC2016,SC2317  # a literal $URL on purpose; called by commands_block
shown_command() { cmd_for "$1" /dev/null '$URL'; }
is_sluice() { [[ $1 == sluice_* ]]; }

declare -A STATUS=()     # key -> "" (ok) | "FAILED: why"
declare -A STATS=()      # key -> sluice --stats (last timed run)
declare -A PTRIPS=()     # key -> round trips the proxy counted
declare -A OWN=()        # key -> psycopg_lob.py's own count of queries and fetches
declare -A OUT_MB=()     # key -> output size of the checked run
for key in "${VARIANTS[@]}" "${HUGE_VARIANTS[@]}"; do STATUS[$key]=""; PTRIPS[$key]="—"; done
[[ $HUGE == 0 ]] && HUGE_VARIANTS=()

# checked KEY: one untimed run through the proxy (when there is one), output
# checked; records the proxy's round trips.
checked() {
    local key=$1
    local out="$DATA/lob.$key.out" err="$WORK/$key.check.err" report="$WORK/$key.proxy.json"
    local url=$URL rc=0 why="" huge=0
    [[ $key == *_huge ]] && huge=1
    if [[ -n $PROXY_URL ]]; then proxy_start "$report"; url=$PROXY_URL; fi
    rm -f "$out"   # a stale file from an interrupted run must not pass the check
    if (( huge )); then
        # 2 GB of base64: checked as it streams, never stored.
        cmd_for "$key" - "$url"
        set +e
        "${CMD[@]}" 2>"$err" | "$PY" "$WORK/check.py" huge "$HUGE_HALF" >"$WORK/$key.bytes" 2>"$WORK/$key.why"
        local codes=("${PIPESTATUS[@]}")
        set -e
        rc=${codes[0]}
        (( codes[1] == 0 )) || why=$(tail -n 1 "$WORK/$key.why")
        OUT_MB[$key]=$(awk '{ printf "%.0f", $1 / 1048576 }' "$WORK/$key.bytes" 2>/dev/null || echo "?")
    else
        cmd_for "$key" "$out" "$url"
        "${CMD[@]}" >/dev/null 2>"$err" || rc=$?
        if (( rc == 0 )); then
            if [[ $key == psql ]]; then
                why=$("$PY" "$WORK/check.py" copy "$out" "$WORK/lob_bench.md5" 2>&1) || true
            elif [[ $key == sluice_bytea ]]; then
                why=$("$PY" "$WORK/check.py" ndjson "$out" "$WORK/lob_bench.md5" id,t,b 2>&1) || true
            else
                why=$("$PY" "$WORK/check.py" ndjson "$out" "$WORK/lob_bench.md5" id,t,b,doc 2>&1) || true
            fi
        fi
        OUT_MB[$key]=$(du -m --apparent-size "$out" 2>/dev/null | cut -f1 || echo "?")
        rm -f "$out"   # a few hundred MB each
    fi
    if [[ -n $PROXY_URL ]]; then proxy_stop; PTRIPS[$key]=$(proxy_trips "$report"); fi
    if (( rc != 0 )); then
        STATUS[$key]="FAILED: exit status $rc ($(tail -n 1 "$err"))"
    elif [[ -n $why ]]; then
        STATUS[$key]="FAILED: output check: ${why##*$'\n'}"
    fi
    OWN[$key]=$(sed -n 's/^queries and fetches: //p' "$err")
    [[ -z ${STATUS[$key]} ]] || log "$key: ${STATUS[$key]}"
}

# timed KEY: one run to /dev/null under GNU time, directly to the server;
# appends "elapsed_s max_rss_kb" to $WORK/KEY.samples.
timed() {
    local key=$1 err="$WORK/$1.run.err"
    cmd_for "$key" /dev/null
    if timed_run "${CMD[@]}" 2>"$err"; then
        echo "$TIME_SAMPLE" >>"$WORK/$key.samples"
        if is_sluice "$key"; then STATS[$key]=$(cat "$err"); fi
    else
        STATUS[$key]="FAILED: timed run exited non-zero ($(tail -n 1 "$err"))"
        log "$key: ${STATUS[$key]}"
    fi
    assert_dev_null "$key"
}

# Checked runs first; they warm every variant too (binaries, Python imports,
# the objects' pages).
for key in "${VARIANTS[@]}" "${HUGE_VARIANTS[@]}"; do
    log "checked run (through the proxy): $key"
    checked "$key"
done

log "warm-up: psql reference (untimed)"
cmd_for psql /dev/null
"${CMD[@]}" >/dev/null

# Interleaved: rep 1 of every variant, then rep 2, ... so a burst of machine
# noise hits all variants alike. A variant that failed is not run again.
for (( rep = 1; rep <= REPS; rep++ )); do
    for key in "${VARIANTS[@]}"; do
        [[ -z ${STATUS[$key]} ]] || continue
        log "rep $rep/$REPS: $key"
        timed "$key"
    done
done
for (( rep = 1; rep <= HUGE_REPS; rep++ )); do
    for key in "${HUGE_VARIANTS[@]}"; do
        [[ -z ${STATUS[$key]} ]] || continue
        log "1.5 GB rep $rep/$HUGE_REPS: $key"
        timed "$key"
    done
done

# ---------------------------------------------------------------- report --

# trips_of KEY: the round-trips cell: sluice's --stats, else the proxy's.
trips_of() {
    local key=$1 t
    if is_sluice "$key" && [[ -n ${STATS[$key]:-} ]]; then
        t=$(stat_of "${STATS[$key]}" 'round trips')
        fmt_int "${t:-?}"
    elif [[ ${PTRIPS[$key]} =~ ^[0-9]+$ ]]; then
        echo "$(fmt_int "${PTRIPS[$key]}") (proxy)"
    else
        echo "${PTRIPS[$key]}"
    fi
}

# table_rows BASE KEY...: one Markdown row per variant, ratio against BASE's
# median.
FAILED=0
table_rows() {
    local base=$1 base_s="" key samples s note
    shift
    [[ -s $WORK/$base.samples ]] && base_s=$(median 1 "$WORK/$base.samples")
    for key in "$@"; do
        samples="$WORK/$key.samples"
        note=${NOTE[$key]}
        [[ -n ${OUT_MB[$key]:-} ]] && note+="; output $(fmt_int "${OUT_MB[$key]}") MB"
        if [[ -n ${STATUS[$key]} || ! -s $samples ]]; then
            echo "| ${LABEL[$key]} | ${STATUS[$key]:-no data} | | | $(trips_of "$key") | $note |"
            [[ ${STATUS[$key]} == FAILED* ]] && FAILED=1
            continue
        fi
        s=$(median 1 "$samples")
        printf '| %s | %.2f | %s | %s | %s | %s |\n' "${LABEL[$key]}" "$s" "$(ratio_of "$s" "$base_s")" "$(mb "$(median 2 "$samples")")" "$(trips_of "$key")" "$note"
    done
}

# The target: sluice --lob inline at most 1.3× the reference.
VERDICT="no data"
if [[ -z ${STATUS[sluice_lob]} && -s $WORK/sluice_lob.samples && -s $WORK/psql.samples ]]; then
    r=$(awk -v a="$(median 1 "$WORK/sluice_lob.samples")" -v b="$(median 1 "$WORK/psql.samples")" 'BEGIN { printf "%.2f", a / b }')
    if awk -v r="$r" 'BEGIN { exit !(r <= 1.3) }'; then VERDICT="met: sluice \`--lob inline\` is ${r}× the reference (target ≤ 1.3×)"
    else VERDICT="MISSED: sluice \`--lob inline\` is ${r}× the reference (target ≤ 1.3×)"; fi
fi

SETTINGS="REPS=$REPS HUGE_REPS=$HUGE_REPS"
[[ $HUGE == 0 ]] && SETTINGS+=" HUGE=0"
[[ $PGSSLMODE != disable ]] && SETTINGS+=" PGSSLMODE=$PGSSLMODE"
# In variant order (a glob would sort them by name).
SAMPLE_FILES=()
for key in "${VARIANTS[@]}" "${HUGE_VARIANTS[@]}"; do SAMPLE_FILES+=("$WORK/$key.samples"); done
DATE=$(date -u +%Y-%m-%d)
REPORT="$RESULTS/lob-$DATE.md"

{
    echo "# sluice large-object export benchmark — $DATE"
    echo
    echo "\`lob_bench\`: $(fmt_int "$LOB_ROWS") rows of \`id int, t text, b bytea, doc oid\` — t 10 KB of text, b 10 KB of incompressible bytes (both \`STORAGE EXTERNAL\`), doc a large object of another 10 KB; $(pg -c "select pg_size_pretty(pg_total_relation_size('lob_bench'))") on disk plus the objects. Output to /dev/null."
    echo "$( (( REPS == 1 )) && echo "One timed run each" || echo "Median of $REPS interleaved runs") after a warm-up; wall time and peak RSS of the client process from \`/usr/bin/time -f '%e %M'\`. Every variant's output was checked once first (every row's values against md5s from the server), in an untimed run through \`sluice proxy\`, which counted the round trips of psql and psycopg (marked \"proxy\"); sluice's are its own \`--stats\` (including connecting)."
    echo
    echo "| variant | median s | × reference | peak RSS MB | round trips | note |"
    echo "| --- | ---: | ---: | ---: | ---: | --- |"
    table_rows psql "${VARIANTS[@]}"
    echo
    echo "Target: $VERDICT."
    echo
    if [[ $HUGE != 0 ]]; then
        echo "## One 1.5 GB large object"
        echo
        echo "\`lob_huge\`: one row, \`doc\` a large object of $(fmt_int "$HUGE_BYTES") bytes (beyond bytea's 1 GB limit), written as one NDJSON row with the bytes in base64 (2 GB of text) to /dev/null. $( (( HUGE_REPS == 1 )) && echo "One timed run each" || echo "Median of $HUGE_REPS interleaved runs"). Both outputs were checked byte for byte (streamed through a checker, untimed, through the proxy)."
        echo
        echo "| variant | median s | × sluice | peak RSS MB | round trips | note |"
        echo "| --- | ---: | ---: | ---: | ---: | --- |"
        table_rows sluice_huge "${HUGE_VARIANTS[@]}"
        echo
    fi
    machine_section --load-average --pg-settings 'shared_buffers ssl work_mem' --tls --psycopg-detail
    reproduce_section lob.sh "$SETTINGS"
    echo
    echo "## Commands timed"
    echo
    echo "With \`PGSSLMODE=$PGSSLMODE\` in the environment."
    echo
    commands_block shown_command "${VARIANTS[@]}" "${HUGE_VARIANTS[@]}"
    echo
    echo "## Round trips as counted by the proxy (checked run)"
    echo
    for key in "${VARIANTS[@]}" "${HUGE_VARIANTS[@]}"; do
        line="- $key: ${PTRIPS[$key]}"
        [[ -n ${OWN[$key]:-} ]] && line+=" (psycopg_lob.py's own count of queries and fetches: ${OWN[$key]}, not counting connecting, BEGIN and the like)"
        findings=$("$PY" -c 'import json, sys; print("; ".join(f["finding"] for f in json.load(open(sys.argv[1]))["findings"]))' "$WORK/$key.proxy.json" 2>/dev/null || true)
        [[ -n $findings ]] && line+=" — proxy finding: $findings"
        echo "$line"
    done
    echo
    raw_samples_section "${SAMPLE_FILES[@]}"
    for key in "${VARIANTS[@]}" "${HUGE_VARIANTS[@]}"; do
        if [[ -n ${STATS[$key]:-} ]]; then
            stats_block "\`--stats\` of $key (last timed run):" "${STATS[$key]}"
        fi
    done
} >"$REPORT"

show_report "$REPORT"

if (( FAILED )); then exit 1; fi
exit 0
