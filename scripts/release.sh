#!/usr/bin/env bash
# Builds the release binary once and packs it: the Python wheel (pip install
# target/dist/sluice-*.whl) and the Debian package (dpkg -i
# target/dist/sluice_*.deb). Prints each artifact with its size.
#
#   bash scripts/release.sh
set -euo pipefail
cd "$(dirname "$0")/.."
target=${CARGO_TARGET_DIR:-target}
cargo build --release --locked -p sluice-cli
binary="$target/release/sluice"
mkdir -p "$target/dist"
wheel=$(python3 scripts/build_wheel.py "$binary" "$target/dist")
deb=$(bash scripts/build_deb.sh "$binary" "$target/dist")
for artifact in "$binary" "$wheel" "$deb"; do
  printf '%s\t%s\n' "$(du -h "$artifact" | cut -f1)" "$artifact"
done
