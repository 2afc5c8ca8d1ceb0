#!/bin/sh
# npm run test:rust: every crate's tests. Their build (the test profile, which the release builds'
# cache cannot give) goes to a target directory kept beside the Rust cache (scripts/lib.sh), so a
# fresh clone compiles only what changed instead of every dependency again; cargo's lock on the
# directory keeps two clones from building in it at once.
set -eu
cd "$(dirname "$0")/.."
. scripts/lib.sh
with_cargo_on_path
CARGO_TARGET_DIR="$(dirname "$rust_cache_root")/test-target"
export CARGO_TARGET_DIR
exec cargo test --workspace --quiet "$@"
