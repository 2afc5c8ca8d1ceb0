#!/bin/sh
# Installs the named Debian packages that are missing (for tests that need more than setup.sh).
set -eu
. "$(dirname "$0")/lib.sh"
require_root "installs Debian packages"
ensure_debian_packages "$@"
