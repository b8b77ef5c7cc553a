#!/usr/bin/env bash
# Packs BINARY into the sluice wheel (scripts/build_wheel.py) and checks it as
# a user without Rust would meet it: installed into a fresh virtualenv with a
# PATH that has no cargo or rustc, `sluice --version` answers, `import sluice`
# finds the installed binary, and `sluice.read_arrow` reads the tests'
# PostgreSQL (SLUICE_TEST_PG_URL). Prints the install time.
#
#   bash scripts/check_wheel.sh BINARY
set -euo pipefail
cd "$(dirname "$0")/.."
binary=${1:?usage: check_wheel.sh BINARY}
[[ -n ${SLUICE_TEST_PG_URL:-} ]] || { echo "check_wheel: SLUICE_TEST_PG_URL is not set" >&2; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

wheel=$(python3 scripts/build_wheel.py "$binary" "$work/dist")
echo "check_wheel: built $(basename "$wheel") ($(du -m "$wheel" | cut -f1) MB)"
python3 -m venv "$work/venv"
# The pinned pyarrow the Python tests use, fetched once into pip's cache.
pyarrow=$(grep -i '^pyarrow==' python/tests/requirements.txt)
started=$(date +%s.%N)
"$work/venv/bin/pip" install -q --disable-pip-version-check "$wheel" "$pyarrow"
finished=$(date +%s.%N)
echo "check_wheel: pip install took $(awk -v a="$started" -v b="$finished" 'BEGIN { printf "%.1f", b - a }') s"

# Only the virtualenv and the system's own directories: no cargo, no rustc.
clean_path="$work/venv/bin:/usr/bin:/bin"
if PATH=$clean_path command -v cargo >/dev/null 2>&1; then
  echo "check_wheel: cargo is still on the clean PATH" >&2
  exit 1
fi
env -i HOME="$HOME" PATH="$clean_path" SLUICE_TEST_PG_URL="$SLUICE_TEST_PG_URL" \
  "$work/venv/bin/python" - <<'PY'
import os, shutil, subprocess, sys
import sluice
binary = shutil.which("sluice")
assert binary and binary.startswith(sys.prefix), f"sluice on PATH is {binary}, not the wheel's"
version = subprocess.run([binary, "--version"], capture_output=True, text=True, check=True).stdout
assert version.startswith("sluice "), version
table = sluice.read_arrow(os.environ["SLUICE_TEST_PG_URL"], "select n, n * 2 as twice from generate_series(1, 1000) n")
assert table.num_rows == 1000 and table.column("twice").to_pylist()[-1] == 2000, table
print(f"check_wheel: {version.strip()}: read_arrow returned {table.num_rows} rows")
PY
