#!/usr/bin/env bash
# What a new user waits for, measured on this machine:
#   1. a fresh clone (no target/, no cargo cache of this repository's crates)
#      to the demo's first answer: `./demo` until `curl` gets a row;
#   2. the release binary's size;
#   3. from a built wheel (scripts/build_wheel.py of that binary) to the first
#      `sluice.read_arrow`: a new virtualenv, `pip install` of the wheel with
#      pyarrow (from pip's cache when it has it), `import sluice`, one read.
# Prints a Markdown table; nothing is written to the repository. The clone and
# its target/ go in a temporary directory removed at the end.
#
#   bash bench/first_run.sh        (SLUICE_BENCH_PG_URL: the database for step 3)
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
URL=${SLUICE_BENCH_PG_URL:-postgres://postgres@127.0.0.1:5432/test}
PORT=${PORT:-18080}
work=$(mktemp -d)
demo=
cleanup() {
  [[ -n $demo ]] && kill "$demo" 2>/dev/null && wait "$demo" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT
now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }

git clone -q "$ROOT" "$work/clone"
cd "$work/clone"
# The demo's database file, made afresh as a new user's would be.
export XDG_DATA_HOME="$work/data"
started=$(now)
./demo --listen "127.0.0.1:$PORT" > "$work/demo.log" 2>&1 &
demo=$!
# A row of the demo's small query (a pipe into `head` would fail under
# pipefail when curl is cut off).
answers() {
  local body
  body=$(curl -sf --max-time 5 "http://127.0.0.1:$PORT/queries/daily_totals" 2>/dev/null) || return 1
  [[ $body == *'{'* ]]
}
until answers; do
  kill -0 "$demo" 2>/dev/null || { cat "$work/demo.log" >&2; exit 1; }
  sleep 0.2
done
first_answer=$(since "$started")
build=$(grep -o 'Finished `release` profile .* in [0-9.a-z ]*' "$work/demo.log" | sed 's/.* in //')
kill "$demo"; wait "$demo" 2>/dev/null || true; demo=

binary="$work/clone/target/release/sluice"
size=$(du -m "$binary" | cut -f1)
wheel=$(python3 scripts/build_wheel.py "$binary" "$work/dist")
wheel_size=$(du -m "$wheel" | cut -f1)
pyarrow=$(grep -i '^pyarrow==' python/tests/requirements.txt)
started=$(now)
python3 -m venv "$work/venv"
"$work/venv/bin/pip" install -q --disable-pip-version-check "$wheel" "$pyarrow"
"$work/venv/bin/python" -c "
import sluice
table = sluice.read_arrow('$URL', 'select n from generate_series(1, 1000) n')
assert table.num_rows == 1000
"
wheel_first_read=$(since "$started")

cat <<TEXT
| step | figure |
|---|---|
| fresh clone → demo's first answer (\`./demo\`, cold build) | ${first_answer} s (cargo: ${build:-?}) |
| release binary (stripped) | ${size} MB |
| wheel | ${wheel_size} MB |
| wheel → first \`read_arrow\` (venv, pip install with pyarrow, import, read) | ${wheel_first_read} s |
TEXT
