#!/usr/bin/env bash
# Builds the book (docs/, mdBook layout) into $CARGO_TARGET_DIR/book (default
# target/book) as its readers will get it, and fails when the book is not
# whole: a SUMMARY.md entry without its page (book.toml sets create-missing =
# false), a page of docs/src/ that SUMMARY.md does not list, or anything
# mdbook refuses. mdbook comes from crates.io, pinned, installed once under the
# target directory (about two minutes on two cores). Run by ./test.
set -euo pipefail
cd "$(dirname "$0")/.."
target=${CARGO_TARGET_DIR:-target}
version=0.5.4
tools="$target/tools/mdbook-$version"
if ! [[ -x $tools/bin/mdbook ]]; then
  echo "book: installing mdbook $version once (cargo install --locked)"
  cargo install mdbook --version "$version" --locked --no-default-features --root "$tools" --quiet
fi

orphans=0
for page in docs/src/*.md; do
  name=$(basename "$page")
  [[ $name == SUMMARY.md ]] && continue
  if ! grep -q "($name)" docs/src/SUMMARY.md; then
    echo "book: docs/src/$name is not listed in docs/src/SUMMARY.md" >&2
    orphans=$((orphans + 1))
  fi
done

mkdir -p "$target"
"$tools/bin/mdbook" build docs -d "$(realpath "$target")/book"
if (( orphans > 0 )); then
  exit 1
fi
echo "book: built into $target/book"
