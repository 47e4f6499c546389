#!/usr/bin/env bash
# Runs one libFuzzer target for a bounded time on a scratch copy of its corpus (the seeds in tests/fuzz/corpus/NAME
# stay as they are): `bash tests/fuzz/run.sh BINARY NAME [SECONDS]`. A crash, a leak, a sanitizer report or a
# timeout fails; the input that did it is saved beside the scratch corpus and named in the output.
set -uo pipefail
bin=$1
name=$2
seconds=${3:-${TD_FUZZ_SECONDS:-15}}
root=$(cd "$(dirname "$0")/../.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/corpus" "$work/artifacts"
cp "$root/tests/fuzz/corpus/$name"/* "$work/corpus/"
"$bin" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -max_len=65536 -print_final_stats=1 \
    -artifact_prefix="$work/artifacts/" "$work/corpus" >"$work/log" 2>&1
rc=$?
grep -E '^(stat::number_of_executed_units|stat::new_units_added|#[0-9]+ +DONE)' "$work/log" | tr '\n' ' '
echo
if [ $rc -ne 0 ]; then
    tail -n 40 "$work/log" >&2
    for a in "$work"/artifacts/*; do [ -e "$a" ] && { echo "FAIL: $name: input $(basename "$a"):" >&2; od -c "$a" | head -20 >&2; }; done
    echo "FAIL: fuzz target $name exited $rc" >&2
    exit 1
fi
echo "fuzz_$name: clean for ${seconds} s"
