#!/usr/bin/env bash
# bench/fuzz_http.sh — the schema-driven fuzzer against `sluice serve` for
# longer than CI runs it: the same harness (crates/sluice-server/tests/
# schemathesis/run.sh: a real server over PostgreSQL and SQLite, every route,
# valid and invalid requests), with more test cases per operation and a seed
# of its own each run unless one is given.
#
#     bash bench/fuzz_http.sh                 # 500 cases per operation and phase
#     EXAMPLES=2000 SEED=7 bash bench/fuzz_http.sh
#
# Environment: EXAMPLES (default 500), SEED (default: random, printed),
# SLUICE_TEST_PG_URL (default: the test kit's throwaway PostgreSQL),
# SLUICE_BIN (default: the debug binary; `cargo build -p sluice-cli` first).
set -euo pipefail
cd "$(dirname "$0")/.."
export EXAMPLES=${EXAMPLES:-500}
export SEED=${SEED:-$RANDOM}
echo "fuzz_http: $EXAMPLES cases per operation and phase, seed $SEED" >&2
exec bash crates/sluice-server/tests/schemathesis/run.sh "$@"
