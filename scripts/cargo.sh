#!/bin/sh
# cargo, found on PATH or in rustup's default location (npm scripts do not source a login shell).
set -eu
. "$(dirname "$0")/lib.sh"
with_cargo_on_path
exec cargo "$@"
