#!/usr/bin/env bash
# Builds the Debian package: <target dir>/debian/pptune_<version>-1_<arch>.deb
# (or into -o DIR). Extra arguments go to cargo-deb.
#
#   packaging/deb/build.sh                 # release build + .deb
#   packaging/deb/build.sh -o /tmp/out     # somewhere else
#
# cargo-deb is installed from crates.io when missing (compiles in ~2 min).
# The man pages and completions are committed (packaging/deb/man,
# packaging/deb/completions; tests/tests/packaging_manpage.rs keeps them in
# step with the CLI), so no generation step runs here.
set -euo pipefail
cd "$(dirname "$0")/../.."

if ! cargo deb --version >/dev/null 2>&1; then
  echo "packaging/deb/build.sh: installing cargo-deb (cargo install cargo-deb --locked)" >&2
  cargo install cargo-deb --locked --version '^3' >&2
fi
exec cargo deb -p pptune --locked "$@"
