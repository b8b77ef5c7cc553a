#!/usr/bin/env bash
# bench/ab.sh — two sluice binaries against each other (and psql), interleaved,
# on the same machine and server: is a change within noise?
#
#     SLUICE_OLD=/path/to/old/sluice bash bench/ab.sh
#
# Environment: SLUICE_OLD (required: e.g. a release build of an earlier commit
# in a worktree), SLUICE_NEW (default target/release/sluice), SLUICE_BENCH_PG_URL
# (default postgres://postgres@127.0.0.1:5432/test), REPS (default 5).
# Needs the tables and input files bench/import.sh leaves (payment_events,
# bench/data/payment_events.{csv,ndjson}); run that once first.
# Measures import (CSV, NDJSON), export (CSV, NDJSON, Arrow, Parquet) and a
# PostgreSQL → PostgreSQL copy. Prints, per variant, the median wall time,
# every run, and the median peak RSS, then each new/old ratio of medians.
# Every client on plain TCP (PGSSLMODE=disable).
set -euo pipefail
BENCH=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
URL=${SLUICE_BENCH_PG_URL:-postgres://postgres@127.0.0.1:5432/test}
export PGSSLMODE=disable
OLD=${SLUICE_OLD:?set SLUICE_OLD to the sluice binary to compare against}
NEW=${SLUICE_NEW:-$BENCH/../target/release/sluice}
DATA=$BENCH/data
REPS=${REPS:-5}
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
OUT=$WORK/samples
: >"$OUT"
pg() { psql "$URL" -X -q -At -c "$1" >/dev/null; }
pg "create table if not exists payment_events_load (like payment_events including all)"
sample() { # label cmd...
    local label=$1; shift
    local t
    /usr/bin/time -f "%e %M" -o "$WORK/time" "$@" >/dev/null 2>/dev/null
    echo "$label $(tail -n 1 "$WORK/time")" >>"$OUT"
}
for (( rep = 1; rep <= REPS; rep++ )); do
    for variant in psql old new; do
        pg "truncate payment_events_load"; pg "checkpoint"
        case $variant in
            psql) sample import_csv.psql psql "$URL" -X -c "\\copy payment_events_load from '$DATA/payment_events.csv' csv header" ;;
            old)  sample import_csv.old "$OLD" import --db "$URL" --table payment_events_load "$DATA/payment_events.csv" ;;
            new)  sample import_csv.new "$NEW" import --db "$URL" --table payment_events_load "$DATA/payment_events.csv" ;;
        esac
    done
    for variant in old new; do
        bin=$OLD; [[ $variant == new ]] && bin=$NEW
        pg "truncate payment_events_load"; pg "checkpoint"
        sample import_ndjson.$variant "$bin" import --db "$URL" --table payment_events_load "$DATA/payment_events.ndjson"
    done
    sample export_csv.psql psql "$URL" -X -c "\\copy (select * from payment_events) to '/dev/null' csv"
    for variant in old new; do
        bin=$OLD; [[ $variant == new ]] && bin=$NEW
        sample export_csv.$variant "$bin" export --db "$URL" --query "select * from payment_events" --format csv --output /dev/null
        sample export_ndjson.$variant "$bin" export --db "$URL" --query "select * from payment_events" --format ndjson --output /dev/null
        sample export_arrow.$variant "$bin" export --db "$URL" --query "select * from payment_events" --format arrow --output /dev/null
        sample export_parquet.$variant "$bin" export --db "$URL" --query "select * from payment_events" --format parquet --output "$WORK/out.parquet"
    done
    for variant in old new; do
        bin=$OLD; [[ $variant == new ]] && bin=$NEW
        pg "truncate payment_events_load"; pg "checkpoint"
        sample copy.$variant "$bin" copy --from "$URL" --table payment_events --to "$URL" --table payment_events_load
    done
done
python3 - "$OUT" <<'PY'
import sys, statistics, collections
samples = collections.defaultdict(list)
for line in open(sys.argv[1]):
    label, seconds, rss = line.split()
    samples[label].append((float(seconds), int(rss)))
for label in sorted(samples):
    times = [s for s, _ in samples[label]]
    print(f"{label:22} median {statistics.median(times):6.2f} s  runs {' '.join(f'{t:.2f}' for t in times)}  peak RSS {statistics.median([r for _, r in samples[label]])/1024:.1f} MB")
for label in sorted(samples):
    if label.endswith(".new") and label[:-4] + ".old" in samples:
        median = lambda key: statistics.median(s for s, _ in samples[key])
        print(f"{label[:-4]:22} new/old {median(label) / median(label[:-4] + '.old'):.3f}")
PY
