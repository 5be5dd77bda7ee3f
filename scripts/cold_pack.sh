#!/usr/bin/env bash
# scripts/cold_pack.sh LIB CACHE_DIR NAME...: the rewrite time served from a class cache whose
# pack is not in the kernel's page cache, against the same right after. Per workload: the pages
# of CACHE_DIR's packs are dropped (posix_fadvise POSIX_FADV_DONTNEED), then one run of
# scripts/rewrite_time.sh with LIB and cache=CACHE_DIR (cold), then another (warm); prints the
# seconds of CPU per 10k classes of both. The cache should have been filled before (one round of
# scripts/rewrite_time.sh "LIB+cache=CACHE_DIR" NAME...). Variables: WL_KIT, WL_DIR as there.
set -uo pipefail
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)
[[ $# -ge 3 ]] || { echo "usage: $0 LIB CACHE_DIR NAME..." >&2; exit 2; }
lib=$1 cache=$2
shift 2
compgen -G "$cache/*.pack" >/dev/null || { echo "no pack in $cache: fill it first" >&2; exit 2; }
one() {
  ROUNDS=1 "$REPO/scripts/rewrite_time.sh" "$lib+cache=$cache" "$1" 2>/dev/null | awk -v n="$1" '$1 == n && $2 == "lib1" && $3 ~ /^[0-9]+$/ { print $4 }'
}
printf '%-14s %10s %10s\n' workload cold warm
for name in "$@"; do
  python3 - "$cache"/*.pack <<'PY'
import os, sys
for p in sys.argv[1:]:
    fd = os.open(p, os.O_RDONLY)
    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    os.close(fd)
PY
  cold=$(one "$name")
  warm=$(one "$name")
  printf '%-14s %10s %10s\n' "$name" "${cold:-failed}" "${warm:-failed}"
done
