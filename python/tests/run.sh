#!/usr/bin/env bash
# The Python package's tests, as CI runs them: the module straight from the
# source tree (PYTHONPATH=python) driving the debug `sluice` binary that
# `cargo test --workspace` built (SLUICE_BIN, default target/debug/sluice), in a
# virtualenv of the pinned requirements.txt made once under the target
# directory (a new one whenever the pins change).
#
# The database is SLUICE_TEST_PG_URL when set; otherwise a throwaway PostgreSQL
# cluster in a temporary directory (run as `nobody` when this is root, since
# initdb refuses root), stopped on exit. Anything missing is a loud failure.
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

find_bin() {
  command -v "$1" 2>/dev/null && return
  compgen -G "/usr/lib/postgresql/*/bin/$1" | sort -V | tail -n 1
}

# A throwaway cluster on a free port, trust authentication on 127.0.0.1.
run_as=()
start_cluster() {
  local initdb
  initdb=$(find_bin initdb) pg_ctl=$(find_bin pg_ctl)
  if [[ -z $initdb || -z $pg_ctl ]]; then
    echo "python tests: PostgreSQL's initdb and pg_ctl are missing (apt-get install postgresql), or set SLUICE_TEST_PG_URL" >&2
    exit 1
  fi
  cluster=$(mktemp -d /tmp/sluice-python-tests.XXXXXX)
  if [[ $(id -u) -eq 0 ]]; then
    chown nobody "$cluster"
    run_as=(setpriv --reuid=nobody --regid="$(id -g nobody)" --clear-groups --)
  fi
  local port
  port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  "${run_as[@]}" "$initdb" -D "$cluster/data" -U postgres -A trust --no-sync >"$cluster/initdb.log" 2>&1 || {
    cat "$cluster/initdb.log" >&2
    exit 1
  }
  trap '"${run_as[@]}" "$pg_ctl" -D "$cluster/data" -m immediate stop >/dev/null 2>&1 || true; rm -rf "$cluster"' EXIT
  "${run_as[@]}" "$pg_ctl" -D "$cluster/data" -l "$cluster/server.log" -w \
    -o "-p $port -k $cluster -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=100" start >/dev/null || {
    cat "$cluster/server.log" >&2
    exit 1
  }
  "${run_as[@]}" psql -h 127.0.0.1 -p "$port" -U postgres -d postgres -qc 'create database test' >/dev/null
  export SLUICE_TEST_PG_URL="postgres://postgres@127.0.0.1:$port/test"
}

if [[ -z ${SLUICE_TEST_PG_URL:-} ]]; then
  start_cluster
fi

export PYTHONPATH=$PWD/python${PYTHONPATH:+:$PYTHONPATH}
"$venv/bin/python" -m pytest -q -n 2 python/tests "$@"
