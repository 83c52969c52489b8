#!/usr/bin/env bash
# Fails when a C/C++ file tracked by git differs from what clang-format (.clang-format) makes of it.
# Usage: scripts/check_format.sh          (check; CI)
#        scripts/check_format.sh --fix    (rewrite the files in place)
set -euo pipefail
cd "$(dirname "$0")/.."
command -v clang-format >/dev/null || { echo "check_format: clang-format is not installed" >&2; exit 1; }
mapfile -t files < <(git ls-files '*.c' '*.cc' '*.cpp' '*.h' '*.hpp' '*.inl' '*.cu' '*.cuh')
if [ "${1:-}" = "--fix" ]; then
  clang-format -i "${files[@]}"
  exit 0
fi
bad=0
for f in "${files[@]}"; do
  if ! clang-format "$f" | cmp -s - "$f"; then
    echo "check_format: $f is not formatted (scripts/check_format.sh --fix)" >&2
    bad=1
  fi
done
[ "$bad" = 0 ] && echo "check_format: ${#files[@]} files formatted" >&2
exit "$bad"
