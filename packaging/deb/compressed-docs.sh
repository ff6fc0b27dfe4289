#!/usr/bin/env bash
# The documentation files in DIR that the package ships gzipped, one name a
# line: every *.md over 4096 bytes (Debian Policy 12.3) but install.md, which
# the unit's Documentation= links and so stays plain. The one place of this
# rule: build.sh compresses what it prints, and the man page generator
# (tests/tests/packaging/packaging_manpage.rs) names those files with .gz.
set -euo pipefail
dir=${1:?usage: compressed-docs.sh DIR}
for f in "$dir"/*.md; do
  [ "$(basename "$f")" = install.md ] && continue
  if [ "$(stat -c %s "$f")" -gt 4096 ]; then
    basename "$f"
  fi
done
