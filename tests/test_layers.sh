#!/usr/bin/env bash
# The layers point one way, and the command-line tool is a client of the public header alone:
#  - every file under cli/ compiles with only include/ and cli/ on its include path (no src/), and includes no
#    project header but typedecide.h and cli/'s own;
#  - no file under src/ includes anything from cli/;
#  - util -> kernels -> model/tokenizer -> engine -> decide/eval/generate -> run/server: each directory under src/ includes
#    project headers only from itself and the layers below it (model may use the tokenizer it owns; the tokenizer
#    knows no model).
set -uo pipefail
ROOT=${TD_ROOT:-$(cd "$(dirname "$0")/.." && pwd)}
cd "$ROOT"
fails=0
fail() { echo "FAIL: $*" >&2; fails=$((fails + 1)); }

# 1. cli/ against include/ alone: compile every file for syntax with no src/ on the path
flags="-std=c11 -D_DEFAULT_SOURCE -fsyntax-only -Wall -Werror -Iinclude -Icli $(pkg-config --cflags jansson)"
for f in cli/*.c; do
    cc $flags "$f" 2>"/tmp/td_layers.$$" || fail "$f does not compile with only include/ and cli/: $(head -3 /tmp/td_layers.$$)"
done
rm -f "/tmp/td_layers.$$"
bad=$(grep -Hn '#include "' cli/*.c cli/*.h | grep -v '"typedecide.h"' | while IFS= read -r line; do
    inc=$(printf '%s' "$line" | sed -E 's/.*#include "([^"]+)".*/\1/')
    [ -f "cli/$inc" ] || printf '%s\n' "$line"
done)
[ -z "$bad" ] || fail "cli/ includes a private header: $bad"

# 2. nothing under src/ reaches into the tool
bad=$(grep -rn '#include "' src | grep -E '"(cli/|cli\.h|commands\.h)' || true)
[ -z "$bad" ] || fail "src/ includes the command-line tool: $bad"

# 3. the layers: directory -> the directories it may include from
declare -A may=(
    [util]="util"
    [kernels]="util kernels"
    [tokenizer]="util tokenizer"
    [model]="util kernels tokenizer model"
    [engine]="util kernels model engine"
    [decide]="util tokenizer decide"
    [eval]="util eval"
    [generate]="util generate"
    [run]="util run"
    [server]="util server"
)
for dir in src/*/; do
    d=$(basename "$dir")
    [ -n "${may[$d]:-}" ] || { fail "src/$d is not a known layer (add it to this test's table)"; continue; }
    while IFS= read -r line; do
        inc=$(printf '%s' "$line" | sed -E 's/.*#include "([^"]+)".*/\1/')
        top=${inc%%/*}
        [ "$inc" = "typedecide.h" ] && continue
        [ "$top" = "$inc" ] && { fail "$line: project headers are included by their path from src/"; continue; }
        case " ${may[$d]} " in *" $top "*) ;; *) fail "$line: src/$d may include only from: ${may[$d]}" ;; esac
    done < <(grep -rn '#include "' "$dir" || true)
done

# 4. the core library (CMake's typedecide_core: the directories of TD_CORE_SOURCES) is those below the applications:
#    none of its files includes evaluation, corpus-run or server headers (the core builds and links without them)
core=$(sed -n '/^file(GLOB TD_CORE_SOURCES/,/)/p' CMakeLists.txt | grep -o 'src/[a-z]*' | sed 's|src/||' | sort -u | tr '\n' ' ')
[ "$core" = "decide engine generate kernels model tokenizer util " ] ||
    fail "CMakeLists.txt's TD_CORE_SOURCES covers '$core' (want decide engine generate kernels model tokenizer util)"
for d in $core; do
    bad=$(grep -rn '#include "\(eval\|run\|server\)/' "src/$d" || true)
    [ -z "$bad" ] || fail "the core (src/$d) includes an application's header: $bad"
done

[ "$fails" -eq 0 ] && echo "test_layers: cli/ on the public header; layers util -> kernels -> model/tokenizer -> engine -> decide/eval/generate -> run/server hold; the core includes no application"
exit $((fails > 0))
