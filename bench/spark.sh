#!/usr/bin/env bash
# bench/spark.sh — Spark actions over payment_events: sluice.spark (the
# "sluice" Python data source reading `sluice serve`'s Arrow Flight plan, one
# partition per endpoint) against Spark's own JDBC reader with pgjdbc.
#
# One command, run from anywhere:
#
#     bash bench/spark.sh                  # 5M rows
#     ROWS=1000000 bash bench/spark.sh     # a quicker run
#
# Environment (all optional; see bench/lib/common.sh):
#   SLUICE_BENCH_PG_URL, ROWS (5000000), REPS (3), SKIP_BUILD=1, SLUICE_BIN, PYTHON
#   PARTS        the numbers of partitions (default "1 2 4")
#   PGJDBC_JAR   pgjdbc (default /usr/share/java/postgresql.jar, Debian's
#                libpostgresql-jdbc-java); java (17 or later) must be on PATH
#   TIMING=0     skip the timing: the consistency run alone
#   ACCOUNTS (100000), READS (5)   the consistency run's table and reads
#
# What it does:
#   1. makes sure payment_events holds ROWS rows, builds sluice (release) and
#      bench/.venv-spark with the pinned PySpark and pyarrow;
#   2. starts `sluice serve` (release) with [flight] and the named query
#      `payment_events` (the table, cut by its storage);
#   3. in ONE Spark session (local[4]; its start is not timed), times the
#      actions count() and sum(amount) alone, REPS interleaved repetitions of
#      each reader and partition count, every result checked against psql's:
#      sluice.spark on every column and with option columns "id, amount"
#      (a Python data source is told no columns, while Spark's JDBC reader
#      prunes them), the JDBC reader, and PostgreSQL alone;
#   4. while a writer commits transfers between the accounts of
#      bench_accounts, reads it READS times with each reader in 4 partitions
#      and records the totals (a consistent read always totals 100 × ACCOUNTS);
#   5. prints Markdown tables of the medians and the totals and writes
#      bench/results/spark-<rows>-<date>.md (TIMING=0:
#      bench/results/spark-consistency-<date>.md).

set -euo pipefail

LOG_PREFIX=spark
ROWS=${ROWS:-5000000}
# shellcheck source=lib/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/common.sh"
# shellcheck source=lib/payment_events.sh
source "$BENCH/lib/payment_events.sh"
PARTS=${PARTS:-1 2 4}
TIMING=${TIMING:-1}           # TIMING=0: the consistency run alone
ACCOUNTS=${ACCOUNTS:-100000}  # accounts of the consistency run
READS=${READS:-5}             # reads of each reader while the writer runs
PGJDBC_JAR=${PGJDBC_JAR:-/usr/share/java/postgresql.jar}
require_positive_integers ROWS REPS ACCOUNTS READS

command -v java >/dev/null || { echo "java is required: apt-get install openjdk-17-jre-headless" >&2; exit 2; }
[[ -f $PGJDBC_JAR ]] || { echo "no pgjdbc at $PGJDBC_JAR: apt-get install libpostgresql-jdbc-java (or set PGJDBC_JAR)" >&2; exit 2; }

SPARK_VENV="$BENCH/.venv-spark"
PEER_PINS=(pyspark==4.1.4 pyarrow==21.0.0 pandas==2.3.3)
LOAD_AVG_START=$(load_average)

ensure_tables
build_sluice
ensure_peer_venv "$SPARK_VENV" "pyspark, pyarrow.flight, pandas" "${PEER_PINS[@]}"

# The consistency run's accounts (the server's start-up checks prepare its query).
pg -c "drop table if exists bench_accounts, bench_stop;
       create table bench_accounts (id int8 primary key, balance int8 not null);
       insert into bench_accounts select g, 100 from generate_series(1, $ACCOUNTS) g;
       create table bench_stop (now bool); analyze bench_accounts"

CONFIG="$WORK/sluice.toml"
cat >"$CONFIG" <<TOML
[server]
listen = "127.0.0.1:0"
[databases.main]
url = "$PLAIN_URL"
pool_size = 8
[queries.payment_events]
table = "payment_events"
[queries.accounts]
table = "bench_accounts"
[flight]
listen = "127.0.0.1:0"
TOML
SERVER_LOG="$WORK/serve.log"
"$SLUICE" serve --config "$CONFIG" 2>"$SERVER_LOG" &
SERVER_PID=$!
stop_background() { kill "$SERVER_PID" 2>/dev/null || true; wait "$SERVER_PID" 2>/dev/null || true; }
flight_location "$SERVER_LOG"

# pgjdbc's URL for the same server, user and database, on plain TCP.
JDBC_URL=$("$PY" - "$URL" <<'PY'
import sys
from urllib.parse import quote, urlsplit
url = urlsplit(sys.argv[1])
query = f"user={quote(url.username or 'postgres')}&sslmode=disable"
if url.password:
    query += f"&password={quote(url.password)}"
print(f"jdbc:postgresql://{url.hostname}:{url.port or 5432}{url.path or '/postgres'}?{query}")
PY
)

PGJDBC_VERSION=$("$PY" - "$PGJDBC_JAR" <<'PY'
import sys, zipfile
manifest = zipfile.ZipFile(sys.argv[1]).read("META-INF/MANIFEST.MF").decode()
print(next((line.split(":", 1)[1].strip() for line in manifest.splitlines()
            if line.startswith(("Bundle-Version:", "Implementation-Version:"))), "?"))
PY
)
read -r EXPECTED_COUNT EXPECTED_SUM < <(pg -F ' ' -c "select count(*), sum(amount) from payment_events")
export EXPECTED_COUNT EXPECTED_SUM PGJDBC_JAR PLAIN_URL
export PYSPARK_PYTHON="$PY" PYTHONPATH="$ROOT/python${PYTHONPATH:+:$PYTHONPATH}"
if (( TIMING )); then
    log "one Spark session: count() and sum(amount), $REPS repetitions of partitions $PARTS"
    "$PY" "$BENCH/spark_read.py" "$LOCATION" "$JDBC_URL" "$ROWS" "$REPS" "$PARTS" "$WORK"
fi

# Consistency: READS reads of bench_accounts by each reader while transfers commit.
pg -c "do \$\$ declare i int8 := 0; begin
         loop
           i := i + 1;
           update bench_accounts set balance = balance - 1 where id = (i * 7919) % $ACCOUNTS + 1;
           update bench_accounts set balance = balance + 1 where id = (i * 104729) % $ACCOUNTS + 1;
           commit;
           exit when exists (select 1 from bench_stop);
         end loop; end \$\$" &
WRITER_PID=$!
log "consistency: $READS reads of bench_accounts by each reader while transfers commit"
(cd "$BENCH" && "$PY" spark_consistency.py "$LOCATION" "$JDBC_URL" "$ACCOUNTS" "$READS" "$WORK/consistency.out")
pg -c "insert into bench_stop values (true)"
wait "$WRITER_PID"
TRANSFERS=$(pg -c "select count(*) from bench_accounts where balance <> 100")
pg -c "drop table bench_accounts, bench_stop"

# consistency_section: the totals each reader saw, against the one a consistent read sees.
consistency_section() {
    local expected=$(( ACCOUNTS * 100 ))
    echo "## Under concurrent writes"
    echo
    echo "$(fmt_int "$ACCOUNTS") accounts of 100 each (every consistent read totals $(fmt_int "$expected")), read $READS times by each reader in 4 partitions while a writer commits transfers between them ($(fmt_int "$TRANSFERS") accounts had moved from 100 by the end)."
    echo
    echo "| reader | reads | reads totalling $(fmt_int "$expected") | totals seen |"
    echo "|---|---:|---:|---|"
    for reader in jdbc sluice; do
        awk -v r="$reader" -v want="$expected" -v label="$([[ $reader == jdbc ]] && echo "Spark's JDBC reader (a query per partition)" || echo "sluice.spark (one snapshot)")" '
            $1 == r { n++; if ($3 == want) ok++; seen = seen (seen ? ", " : "") $3 }
            END { printf "| %s | %d | %d | %s |\n", label, n, ok, seen }' "$WORK/consistency.out"
    done
    echo
}

REPORT="$RESULTS/spark-$ROWS-$(date -u +%F).md"
(( TIMING )) || REPORT="$RESULTS/spark-consistency-$(date -u +%F).md"
{
    echo "# Spark: sluice.spark over Arrow Flight against Spark's JDBC reader"
    echo
    if (( ! TIMING )); then
        consistency_section
        machine_section --load-average
        reproduce_section spark.sh "TIMING=0 ACCOUNTS=$ACCOUNTS READS=$READS"
        exit 0
    fi
    echo "$(fmt_int "$ROWS") rows of payment_events; each Spark action timed alone (its planning, reads and aggregation, not Spark's start) in one local[4] session, median of $REPS interleaved runs, $(date -u '+%F %H:%M UTC')."
    echo
    echo "| partitions | action | sluice.spark, whole table, s | sluice.spark, \`columns\` id, amount, s | JDBC (pgjdbc $PGJDBC_VERSION), s | PostgreSQL alone, s | whole table ÷ JDBC | \`id, amount\` ÷ JDBC | PostgreSQL alone ÷ JDBC |"
    echo "|---:|---|---:|---:|---:|---:|---:|---:|---:|"
    for parts in $PARTS; do
        for action in count sum; do
            whole=$(median 1 "$WORK/sluice-$action-$parts.samples")
            cols=$(median 1 "$WORK/sluice_cols-$action-$parts.samples")
            jdbc=$(median 1 "$WORK/jdbc-$action-$parts.samples")
            alone=$(median 1 "$WORK/database-$action-$parts.samples")
            printf '| %s | %s | %.2f | %.2f | %.2f | %.2f | %s | %s | %s |\n' "$parts" "$action" "$whole" "$cols" "$jdbc" \
                "$alone" "$(ratio_of "$whole" "$jdbc")" "$(ratio_of "$cols" "$jdbc")" "$(ratio_of "$alone" "$jdbc")"
        done
    done
    echo
    echo "sluice.spark's partitions are the endpoints of one Flight plan (storage ranges"
    echo "of the table) read in one exported snapshot, each by a Python worker that hands"
    echo "Spark the Arrow record batches unchanged. Spark tells a Python data source no"
    echo "columns, so without the \`columns\` option every column is read; with it the"
    echo "database reads only \`id\` and \`amount\`. Spark's JDBC reader prunes to the"
    echo "columns the action needs (count(): none) and reads id ranges, each in its own"
    echo "transaction."
    echo
    echo "\"PostgreSQL alone\" runs no Spark: psql COPYs, in binary to /dev/null, what each"
    echo "of the JDBC reader's partitions asks for (\`select 1\` for count, \`amount\` for sum,"
    echo "the same id ranges, served by the primary key), every partition at once. psql's"
    echo "own work is next to nothing, so this is what the database alone takes to produce"
    echo "those rows on this machine: a floor for any reader of them, in the JVM or not."
    echo
    echo "Spark: PySpark $(peer_version pyspark) on $(java -version 2>&1 | head -n 1), pgjdbc $PGJDBC_VERSION ($PGJDBC_JAR)."
    echo
    consistency_section
    machine_section --load-average
    reproduce_section spark.sh "ROWS=$ROWS REPS=$REPS PARTS=\"$PARTS\""
    echo
    echo "## Raw samples (s)"
    echo
    for file in "$WORK"/*.samples; do
        echo "- $(basename "$file" .samples): $(paste -sd ' ' "$file")"
    done
} >"$REPORT"
show_report "$REPORT"
