#!/usr/bin/env bash
# The host's tokenizing of 144 decide suffixes (bench/suffix_tokens.c) linked against build/'s core library: plain
# td_tokenize and through the decider's suffix cache. Needs `make` done. Usage: bash bench/suffix_tokens.sh [MODEL_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
out=${TMPDIR:-/tmp}/td-suffix-tokens
cc -O2 -std=c11 -Iinclude -Isrc bench/suffix_tokens.c -o "$out" build/libtypedecide_core.a -lpcre2-8 -lutf8proc \
    -ljansson -lpthread -lm
"$out" "$@"
