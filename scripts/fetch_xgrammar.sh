#!/usr/bin/env bash
# Fetches xgrammar's source distribution (Apache-2.0) into a git-ignored cache; CMake builds its
# C++ core (cpp/, without the Python bindings) into libcactus for constrained decoding
# (src/sampling/grammar_constraint.*). The sources are never committed.
#   usage: scripts/fetch_xgrammar.sh [cache_dir]   (default ~/.cache/cactus/xgrammar)
# `--no-binary xgrammar` takes xgrammar as an sdist; its build requirements (needed by pip only to
# read the metadata) may come as wheels: `--no-binary :all:` would compile cmake itself from source.
set -euo pipefail
VERSION=0.2.9
CACHE=${1:-${CACTUS_XGRAMMAR_CACHE:-$HOME/.cache/cactus/xgrammar}}
DIR="$CACHE/xgrammar-$VERSION"
if [ -f "$DIR/cpp/grammar_matcher.cc" ]; then
  exit 0
fi
mkdir -p "$CACHE"
if [ ! -f "$CACHE/xgrammar-$VERSION.tar.gz" ]; then
  python3 -m pip download --disable-pip-version-check -q --no-deps --no-binary xgrammar \
    "xgrammar==$VERSION" -d "$CACHE"
fi
tar -xzf "$CACHE/xgrammar-$VERSION.tar.gz" -C "$CACHE"
test -f "$DIR/cpp/grammar_matcher.cc"
echo "fetch_xgrammar: sources in $DIR" >&2
