#!/usr/bin/env bash
# Builds the Debian package: <target dir>/debian/pptune_<version>-1_<arch>.deb
# (or into -o DIR). Extra arguments go to cargo-deb.
#
#   packaging/deb/build.sh                 # release build + .deb
#   packaging/deb/build.sh -o /tmp/out     # somewhere else
#
# cargo-deb is installed from crates.io when missing (compiles in ~2 min).
# The man pages and completions are committed (packaging/deb/man,
# packaging/deb/completions; tests/tests/packaging/packaging_manpage.rs keeps them in
# step with the CLI). Generated here, for each build:
# - the copyright file, from Cargo.lock (packaging/deb/copyright.py): every
#   crate linked into /usr/bin/pptune with its authors and license;
# - after cargo-deb, what it does not write: DEBIAN/md5sums (as dh_md5sums
#   does) and the documentation compressed (gzip -9n, Debian Policy 12.3;
#   install.md stays plain, the unit's Documentation= links it).
set -euo pipefail
cd "$(dirname "$0")/../.."

if ! cargo deb --version >/dev/null 2>&1; then
  echo "packaging/deb/build.sh: installing cargo-deb (cargo install cargo-deb --locked)" >&2
  cargo install cargo-deb --locked --version '^3' >&2
fi
mkdir -p packaging/deb/generated
python3 packaging/deb/copyright.py > packaging/deb/generated/copyright.new
mv packaging/deb/generated/copyright.new packaging/deb/generated/copyright

deb=$(cargo deb -p pptune --locked "$@" | tail -n 1)
[ -f "$deb" ] || { echo "packaging/deb/build.sh: cargo deb printed no package path (got '$deb')" >&2; exit 1; }

tree=$(mktemp -d)
trap 'rm -rf "$tree"' EXIT
dpkg-deb -R "$deb" "$tree/pkg"
doc="$tree/pkg/usr/share/doc/pptune"
packaging/deb/compressed-docs.sh "$doc" | while read -r name; do
  gzip -9n "$doc/$name"
done
(cd "$tree/pkg" && find . -path ./DEBIAN -prune -o -type f -printf '%P\0' \
  | LC_ALL=C sort -z | xargs -0 md5sum > DEBIAN/md5sums)
chmod 644 "$tree/pkg/DEBIAN/md5sums"
dpkg-deb --root-owner-group -Zxz -b "$tree/pkg" "$deb" >/dev/null
echo "$deb"
