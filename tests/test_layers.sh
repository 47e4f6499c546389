#!/usr/bin/env bash
# The layers point one way, and the command-line tool is a client of the public headers alone:
#  - every file under cli/ compiles with only include/ and cli/ on its include path (no src/), and includes no
#    project header but the public ones (include/typedecide*.h) and cli/'s own;
#  - no file under src/ includes anything from cli/;
#  - util -> kernels -> model/tokenizer -> engine -> decide/eval/generate -> run/server: each directory under src/ includes
#    project headers only from itself and the layers below it (model may use the tokenizer it owns; the tokenizer
#    knows no model).
#  - the public headers are layered too (typedecide.h the core; typedecide_eval.h, typedecide_run.h and
#    typedecide_server.h the applications on it): each header compiles alone, the core header declares nothing of
#    the applications, the core (src/util, kernels, model, tokenizer, engine, decide, generate, src/eval/rows.c) and
#    web/ include no application header, an application directory includes only its own, and every file that
#    includes an application header uses one of its names (each client includes only what it uses).
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
bad=$(grep -Hn '#include "' cli/*.c cli/*.h | grep -vE '"typedecide(_[a-z]+)?\.h"' | while IFS= read -r line; do
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
declare -A app_hdr=([eval]="typedecide_eval.h" [run]="typedecide_run.h" [server]="typedecide_server.h")
for dir in src/*/; do
    d=$(basename "$dir")
    [ -n "${may[$d]:-}" ] || { fail "src/$d is not a known layer (add it to this test's table)"; continue; }
    while IFS= read -r line; do
        inc=$(printf '%s' "$line" | sed -E 's/.*#include "([^"]+)".*/\1/')
        top=${inc%%/*}
        [ "$inc" = "typedecide.h" ] && continue
        case "$inc" in typedecide_*.h)
            # a public application header: only the application's own directory includes it
            [ "$inc" = "typedecide_$d.h" ] || fail "$line: src/$d may include of the public headers only typedecide.h${app_hdr[$d]:+ and ${app_hdr[$d]}}"
            continue ;;
        esac
        if [ "$top" = "$inc" ]; then
            # a header the build generates (web/'s relaxed_wasm_module.h) lives in a build directory, not under src/
            [ -z "$(find src include -name "$inc" -print -quit)" ] && continue
            fail "$line: project headers are included by their path from src/"
            continue
        fi
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

# 5. the public headers: the core (typedecide.h) and the applications on it (include/typedecide_*.h)
apps=$(cd include && ls typedecide_*.h 2>/dev/null | tr '\n' ' ')
[ "$apps" = "typedecide_eval.h typedecide_run.h typedecide_server.h " ] ||
    fail "include/ holds application headers '$apps' (want typedecide_eval.h typedecide_run.h typedecide_server.h): update this test and the guide in typedecide.h"
tmpd=$(mktemp -d)
trap 'rm -rf "$tmpd"' EXIT
for h in include/typedecide*.h; do
    # each header alone, in C and as C++ would see it (extern "C"), with nothing included before it
    printf '#include "%s"\n#include "%s"\nint td_layers_probe(void);\nint td_layers_probe(void) { return 0; }\n' \
        "$(basename "$h")" "$(basename "$h")" >"$tmpd/probe.c"
    cc -std=c11 -fsyntax-only -Wall -Wextra -Werror -Iinclude "$tmpd/probe.c" 2>"$tmpd/err" ||
        fail "$h does not compile alone (or twice): $(head -3 "$tmpd/err")"
done
# the names each application header declares: functions, types, enum constants and macros
names_of() {
    gcc -fpreprocessed -dD -E -P "$1" 2>/dev/null | sed -nE \
        -e 's/^TD_API [^(]*[^a-z0-9_](td_[a-z0-9_]+)\(.*/\1/p' -e 's/^\} *(td_[a-z0-9_]+);.*/\1/p' \
        -e 's/^typedef struct (td_[a-z0-9_]+) .*/\1/p' -e 's/^#define (TD_[A-Z0-9_]+).*/\1/p' \
        -e 's/^ *(TD_[A-Z0-9_]+) *=.*/\1/p' | grep -vxE 'TD_API|TYPEDECIDE_[A-Z_]*H' | sort -u
}
core_code=$(gcc -fpreprocessed -dD -E -P include/typedecide.h 2>/dev/null)
[ -n "$core_code" ] || fail "gcc -fpreprocessed could not read include/typedecide.h"
for h in $apps; do
    names_of "include/$h" >"$tmpd/${h%.h}.names"
    [ "$(wc -l <"$tmpd/${h%.h}.names")" -ge 3 ] || fail "found only $(wc -l <"$tmpd/${h%.h}.names") names in include/$h"
    # the core header names nothing of the applications (its comments may)
    hit=$(printf '%s\n' "$core_code" | grep -owFf "$tmpd/${h%.h}.names" | sort -u | head -5 | tr '\n' ' ')
    [ -z "$hit" ] || fail "include/typedecide.h declares or uses names of include/$h: $hit"
    grep -q "#include \"typedecide.h\"" "include/$h" || fail "include/$h does not include typedecide.h"
done
# the core and the browser build include no application header
core_files=$(ls src/util/*.[ch] src/kernels/*/*.[ch] src/model/*.[ch] src/tokenizer/*.[ch] src/engine/*.[ch] \
    src/engine/*/*.[ch] src/decide/*.[ch] src/generate/*.[ch] src/eval/rows.c web/*.c 2>/dev/null)
bad=$(grep -Hn -E '#include [<"]typedecide_[a-z]+\.h[">]' $core_files || true)
[ -z "$bad" ] || fail "the core (or web/) includes an application header (the core's clients use typedecide.h alone): $bad"
# every file that includes an application header uses one of its names (a client includes only what it uses)
while IFS= read -r f; do
    for h in $(grep -oE '#include [<"]typedecide_[a-z]+\.h[">]' "$f" | grep -oE 'typedecide_[a-z]+\.h'); do
        [ -f "$tmpd/${h%.h}.names" ] || { fail "$f includes $h, which include/ does not hold"; continue; }
        gcc -fpreprocessed -dD -E -P "$f" >"$tmpd/code" 2>/dev/null # (a file: grep -q would fail the pipeline)
        grep -qwFf "$tmpd/${h%.h}.names" "$tmpd/code" ||
            fail "$f includes $h but uses none of its names (include only the headers whose functions a file calls)"
    done
done < <(grep -rlE '#include [<"]typedecide_[a-z]+\.h[">]' cli src tests web/*.c bench/*.c 2>/dev/null | grep -v '^tests/test_layers' | sort)

[ "$fails" -eq 0 ] && echo "test_layers: cli/ on the public header; layers util -> kernels -> model/tokenizer -> engine -> decide/eval/generate -> run/server hold; the core includes no application; the public headers are layered (core, eval, run, server) and each client includes only what it uses"
exit $((fails > 0))
