#!/usr/bin/env bash
# chat, generate and bench chat from the command line: --help, greedy `chat` piped equals `generate --chat` on the
# same rendered prompt token for token, later turns reuse the conversation's KV (Qwen3 and Qwen3.5 fixtures), the
# effective sampler is reported with the model's defaults, --stop stops, bench chat prints its slopes, and an
# unsupported or missing chat template is refused with a clear message.
set -uo pipefail
ROOT=${TD_ROOT:-$(cd "$(dirname "$0")/.." && pwd)}
BIN=${TD_BIN:-$ROOT/build/typedecide}
FX=$ROOT/fixtures/models
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
fail() { echo "FAIL: $*" >&2; fails=$((fails + 1)); }
expect() {
    local code=$1 needle=$2
    shift 3
    timeout 120 "$@" >"$tmp/out" 2>"$tmp/err" </dev/null
    local rc=$?
    [ "$rc" -eq "$code" ] || fail "'$*' exited $rc, want $code ($(head -c 300 "$tmp/err"))"
    grep -qF -- "$needle" "$tmp/err" || fail "'$*': stderr lacks \"$needle\": $(head -c 300 "$tmp/err")"
}

for c in chat generate bench; do
    "$BIN" "$c" --help >"$tmp/out" 2>&1 || fail "$c --help exited non-zero"
    grep -q "usage: typedecide $c" "$tmp/out" || fail "$c --help prints no usage"
done
grep -q "every line is one user turn" <("$BIN" chat --help) || fail "chat --help does not explain piped input"
grep -q "0 = off" <("$BIN" generate --help) || fail "generate --help does not say top-k 0 is off"
grep -q "bench chat" <("$BIN" bench --help) || fail "bench --help lacks bench chat"

for model in qwen3-tiny-tied qwen35-tiny-text; do
    M=$FX/$model
    # one turn: chat (greedy, piped) equals generate --chat on the same rendered prompt
    printf 'Hi there\n' | "$BIN" chat --model "$M" -n 12 --temperature 0 --no-think --quiet >"$tmp/chat" 2>"$tmp/err" ||
        fail "$model: chat failed: $(cat "$tmp/err")"
    "$BIN" generate --model "$M" --prompt "Hi there" --chat -n 12 --temperature 0 >"$tmp/gen" 2>/dev/null ||
        fail "$model: generate --chat failed"
    [ "$(head -c -1 "$tmp/chat")" = "$(cat "$tmp/gen")" ] ||
        fail "$model: chat printed [$(cat "$tmp/chat")], generate [$(cat "$tmp/gen")]"
    # three turns: the later ones reuse the conversation (stderr: "... of which N reused")
    printf 'Hello\n\nHow are you?\n/think off\nAnd now?\n' |
        "$BIN" chat --model "$M" -n 10 --temperature 0 >"$tmp/chat3" 2>"$tmp/err3" || fail "$model: 3-turn chat failed"
    [ "$(grep -c ' reused' "$tmp/err3")" = 3 ] || fail "$model: want 3 turn reports: $(cat "$tmp/err3")"
    r2=$(grep ' reused' "$tmp/err3" | sed -n 2p | sed -E 's/.* of which ([0-9]+) reused.*/\1/')
    r3=$(grep ' reused' "$tmp/err3" | sed -n 3p | sed -E 's/.* of which ([0-9]+) reused.*/\1/')
    [ "${r2:-0}" -gt 5 ] && [ "${r3:-0}" -gt "${r2:-0}" ] || fail "$model: turns 2 and 3 reused $r2 and $r3 tokens"
    grep -q "tok/s" "$tmp/err3" || fail "$model: no tokens/s after a turn"
done

# the effective sampler: the model's generation_config.json unless a flag overrides
"$BIN" generate --model "$FX/qwen3-tiny-tied" --prompt "Hi" -n 2 --verbose --top-p 0.5 >/dev/null 2>"$tmp/err"
grep -q '"temperature": 0.600000024, "top_k": 20, "top_p": 0.5' "$tmp/err" || fail "generate --verbose: $(cat "$tmp/err")"
grep -q 'stop ids \[2050, 2048\]' "$tmp/err" || fail "generate --verbose shows no stop ids: $(cat "$tmp/err")"

# --stop: the text ends before the stop string (and the same text up to there)
"$BIN" generate --model "$FX/qwen3-tiny-tied" --prompt "Hello" -n 30 --temperature 0 --ignore-eos >"$tmp/full" 2>/dev/null
stop=$(head -c 9 "$tmp/full" | tail -c 3)
"$BIN" generate --model "$FX/qwen3-tiny-tied" --prompt "Hello" -n 30 --temperature 0 --ignore-eos --stop "$stop" \
    --verbose >"$tmp/stopped" 2>"$tmp/err"
grep -q "finish stop" "$tmp/err" || fail "--stop '$stop' did not stop: $(cat "$tmp/err")"
want=$(head -c 9 "$tmp/full" | head -c 6)
case "$want" in *"$stop"*) ;; *) [ "$(head -c -1 "$tmp/stopped")" = "$want" ] || fail "--stop '$stop': [$(cat "$tmp/stopped")], want [$want]" ;; esac

# bad values are usage errors naming the flag
expect 2 "--top-p must be in (0, 1]" -- "$BIN" generate --model "$FX/qwen3-tiny-tied" --ids 1 --top-p 0
expect 2 "--min-p must be in [0, 1]" -- "$BIN" chat --model "$FX/qwen3-tiny-tied" --min-p 2
expect 2 "--presence-penalty must be in [-2, 2]" -- "$BIN" generate --model "$FX/qwen3-tiny-tied" --ids 1 --presence-penalty 9
expect 2 "--history needs at least two lengths" -- "$BIN" bench chat --model "$FX/qwen3-tiny-tied" --history 100

# templates: an unknown one and none are refused, clearly
mkdir -p "$tmp/other" "$tmp/none"
cp "$FX/qwen3-tiny-tied"/{config.json,model.safetensors,tokenizer.json,generation_config.json} "$tmp/other/"
cp "$FX/qwen3-tiny-tied"/{config.json,model.safetensors,tokenizer.json} "$tmp/none/"
printf '{"chat_template": "{%% for m in messages %%}{{ m.content }}{%% endfor %%}", "eos_token": "<|im_end|>"}' >"$tmp/other/tokenizer_config.json"
expect 1 "is not one this library renders" -- "$BIN" chat --model "$tmp/other"
expect 1 "has no chat template" -- "$BIN" chat --model "$tmp/none"
expect 1 "is not one this library renders" -- "$BIN" generate --model "$tmp/other" --prompt hi --chat

# stop ids: an int or a list in generation_config.json; one outside the vocabulary is reported at load
mkdir -p "$tmp/stops"
cp "$FX/qwen3-tiny-tied"/{config.json,model.safetensors,tokenizer.json,tokenizer_config.json} "$tmp/stops/"
printf '{"eos_token_id": 2048, "do_sample": false}' >"$tmp/stops/generation_config.json"
"$BIN" generate --model "$tmp/stops" --prompt hi -n 1 --verbose >/dev/null 2>"$tmp/err" || fail "an int eos_token_id failed"
grep -q 'stop ids \[2048, 2050\]' "$tmp/err" || fail "int eos_token_id + tokenizer eos: $(cat "$tmp/err")"
grep -q '"greedy": true' "$tmp/err" || fail "do_sample false is not greedy: $(cat "$tmp/err")"
printf '{"eos_token_id": [2050, 99999999]}' >"$tmp/stops/generation_config.json"
expect 1 "stop token id 99999999 is not in the vocabulary" -- "$BIN" generate --model "$tmp/stops" --ids 1,2 -n 1

# bench chat: one JSON object with both slopes
"$BIN" bench chat --model "$FX/qwen35-tiny-text" --history 50,150 --turn 8 --repeat 1 --threads 1 >"$tmp/b" 2>/dev/null ||
    fail "bench chat failed"
grep -q '"slope_ms_per_history_token": ' "$tmp/b" && grep -q '"reprefill_slope_ms_per_token": ' "$tmp/b" &&
    grep -q '"reused_tokens": \[50, 150\]' "$tmp/b" || fail "bench chat printed $(cat "$tmp/b")"

[ "$fails" -eq 0 ] && echo "test_chat_cli: chat = generate greedy, turns reuse the KV, sampler and stops reported, templates refused clearly"
exit $((fails > 0))
