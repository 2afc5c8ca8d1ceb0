#!/bin/sh
# Prints the directory holding the previous release (scripts/lib/previous-release.ts names its tag
# and commit), built for the upgrade tests from that commit of this repository and cached outside
# it, keyed by tag and commit, so later runs skip the build: the commit's files (git archive), its
# own npm dependencies and Rust addon (its scripts/setup.sh), its executables, image and chart.
set -eu
. "$(dirname "$0")/lib.sh"
require_root "the previous release's build installs packages as scripts/setup.sh does"
repo="$(cd "$(dirname "$0")/.." && pwd)"
node="$repo/node_modules/.bin/node"
[ -x "$node" ] || node=node
settings=$("$node" "$repo/scripts/lib/previous-release.ts")
tag=$(echo "$settings" | sed -n 's/^tag=//p')
commit=$(echo "$settings" | sed -n 's/^commit=//p')
dir=$(echo "$settings" | sed -n 's/^dir=//p')
[ -f "$dir/complete" ] || cache_lock "$dir.lock"
if [ ! -f "$dir/complete" ]; then
  say "building the previous release $tag ($commit) into $dir"
  rm -rf "$dir.partial"
  mkdir -p "$dir.partial"
  git -C "$repo" archive "$commit" | tar -x -C "$dir.partial"
  (
    cd "$dir.partial"
    # Its own dependencies and addon, as a fresh clone of it gets them; then what its pretest and
    # README build: the executables, the image, the chart and its repository index.
    nice -n 10 sh scripts/setup.sh
    nice -n 10 node_modules/.bin/node scripts/build.ts
    node_modules/.bin/node scripts/build-image.ts
    node_modules/.bin/node scripts/build-chart.ts
    # The Rust build's intermediate files are not needed any more (some 500 MB).
    rm -rf target
  ) >&2
  touch "$dir.partial/complete"
  rm -rf "$dir"
  mv "$dir.partial" "$dir"
fi
echo "$dir"
