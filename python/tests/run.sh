#!/usr/bin/env bash
# The Python package's tests, as CI runs them: the module straight from the
# source tree (PYTHONPATH=python) driving the debug `sluice` binary that
# `cargo test --workspace` built (SLUICE_BIN, default target/debug/sluice), in a
# virtualenv of the pinned requirements.txt made once under the target
# directory (a new one whenever the pins change).
#
# The database is SLUICE_TEST_PG_URL when set; otherwise the test kit's
# throwaway PostgreSQL, stopped on exit. Anything missing is a loud failure.
#
#   bash python/tests/run.sh [pytest arguments…]
set -euo pipefail
cd "$(dirname "$0")/../.."

target=${CARGO_TARGET_DIR:-target}
export SLUICE_BIN=${SLUICE_BIN:-$target/debug/sluice}
if ! [[ -x $SLUICE_BIN ]]; then
  echo "python tests: no sluice binary at $SLUICE_BIN: run cargo build (or cargo test --workspace) first" >&2
  exit 1
fi
SLUICE_BIN=$(realpath "$SLUICE_BIN")

requirements=python/tests/requirements.txt
venv="$target/python-test-venv-$(sha256sum "$requirements" | cut -c1-16)"
if ! [[ -f $venv/.sluice-ready ]]; then
  echo "python tests: making $venv"
  rm -rf "$venv"
  python3 -m venv "$venv" || {
    echo "python tests: python3 -m venv failed (Debian/Ubuntu: apt-get install python3-venv)" >&2
    exit 1
  }
  "$venv/bin/pip" install -q --disable-pip-version-check -r "$requirements"
  touch "$venv/.sluice-ready"
fi

# Without a server named, the test kit's throwaway PostgreSQL
# (sluice-test-servers, built beside sluice by `cargo test --workspace`), which
# stops when this script ends and closes its standard input.
if [[ -z ${SLUICE_TEST_PG_URL:-} ]]; then
  servers="$target/debug/sluice-test-servers"
  [[ -x $servers ]] || { echo "python tests: no $servers: run cargo test --workspace --no-run first" >&2; exit 1; }
  coproc SERVERS { exec "$servers"; }
  read -r -t 300 line <&"${SERVERS[0]}" || { echo "python tests: the test servers did not start" >&2; exit 1; }
  [[ $line =~ ^export\ SLUICE_TEST_PG_URL=\'[^\']*\'$ ]] || { echo "python tests: unexpected: $line" >&2; exit 1; }
  eval "$line"
fi

# pytest's temporary directories (tmp_path) go in one of this run's own,
# removed when it ends: pytest's default place keeps the last three runs'.
basetemp=$(mktemp -d)
trap 'rm -rf "$basetemp"' EXIT

export PYTHONPATH=$PWD/python${PYTHONPATH:+:$PYTHONPATH}
# --timeout: a test that hangs fails with its stack instead of holding the run.
"$venv/bin/python" -m pytest -q -n 2 --timeout=900 --basetemp="$basetemp/pytest" python/tests "$@"
