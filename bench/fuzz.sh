#!/usr/bin/env bash
# Runs one cargo-fuzz target (fuzz/fuzz_targets/TARGET.rs) for SECONDS, from
# its seeds (fuzz/seeds/TARGET, when it has any) and the corpus kept between
# runs in fuzz/corpus/TARGET (git-ignored). A crash leaves its input in
# fuzz/artifacts/TARGET/ and exits non-zero: minimise it with
# `cargo fuzz tmin TARGET FILE` and commit it as a regression test.
#
#   bash bench/fuzz.sh TARGET SECONDS      e.g. bash bench/fuzz.sh csv_decoder 600
#   bash bench/fuzz.sh --list              the targets
#   bash bench/fuzz.sh --all SECONDS       every target, one after another
#
# Settings (environment): FUZZ_RSS_MB (libFuzzer's -rss_limit_mb, default
# 1024) and FUZZ_MALLOC_MB (-malloc_limit_mb: one allocation larger than this
# is a finding, so memory sized by a hostile length field shows up; default
# 256). cargo-fuzz is installed (cargo install --locked) when missing.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
FUZZ="$ROOT/fuzz"
# cargo fuzz needs nightly-only flags (-Zsanitizer=address); this machine has
# one stable toolchain, and RUSTC_BOOTSTRAP=1 lets it accept them.
export RUSTC_BOOTSTRAP=1

targets() { ls "$FUZZ/fuzz_targets" | sed 's/\.rs$//'; }

usage() { sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }

[[ $# -ge 1 ]] || usage
if [[ $1 == --list ]]; then targets; exit 0; fi

if ! cargo fuzz --version >/dev/null 2>&1; then
    echo "fuzz: installing cargo-fuzz" >&2
    cargo install cargo-fuzz --locked --quiet
fi

run() {
    local target=$1 seconds=$2
    [[ -f "$FUZZ/fuzz_targets/$target.rs" ]] || { echo "fuzz: no target $target (see --list)" >&2; exit 2; }
    (cd "$FUZZ" && python3 seeds.py)
    mkdir -p "$FUZZ/corpus/$target"
    local seeds=()
    [[ -d "$FUZZ/seeds/$target" ]] && seeds=("seeds/$target")
    echo "fuzz: $target for ${seconds}s" >&2
    (cd "$FUZZ" && cargo fuzz run -O "$target" "corpus/$target" "${seeds[@]}" -- \
        -max_total_time="$seconds" -timeout=20 \
        -rss_limit_mb="${FUZZ_RSS_MB:-1024}" -malloc_limit_mb="${FUZZ_MALLOC_MB:-256}" \
        -print_final_stats=1 2>&1) | grep -E "^(#[0-9]+[[:space:]]+DONE|stat::number_of_executed_units|==[0-9]+==|SUMMARY|Test unit written|thread .* panicked)" || true
    # grep's status is not the fuzzer's: a finding leaves an artifact.
    if compgen -G "$FUZZ/artifacts/$target/*" >/dev/null; then
        echo "fuzz: $target found inputs that fail, in fuzz/artifacts/$target/" >&2
        return 1
    fi
}

if [[ $1 == --all ]]; then
    [[ $# -eq 2 && $2 =~ ^[1-9][0-9]*$ ]] || usage
    status=0
    for target in $(targets); do run "$target" "$2" || status=1; done
    exit "$status"
fi
[[ $# -eq 2 && $2 =~ ^[1-9][0-9]*$ ]] || usage
run "$1" "$2"
