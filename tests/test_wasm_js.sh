#!/usr/bin/env bash
# The JavaScript API of web/typedecide.mjs (issue 44) under Node and in headless Chromium, against the native tool
# with the scalar kernels (the set the module's SIMD128 set equals bit for bit):
#   1. load(): a GGUF (demo-qwen3 exported to Q8_0) streamed into the module's memory (a file path in Node, fetch()
#      in Chromium, an ArrayBuffer, a Blob, a File in a Worker, an HTTP body without Content-Length) with progress
#      events; the module's memory grows by about the model's size; its generation and decisions equal native's;
#      a 5 GB Content-Length is refused before the body is read, naming the size and the 4 GiB limit; bytes that are
#      not GGUF and an empty buffer are refused;
#   2. generate({prompt, onToken}) streams native's ids (greedy and seeded) on both demo models; the same prompt
#      again reuses its KV; a chat session of three turns streams the text `typedecide chat` prints for the same
#      turns and seed, the later turns reusing the earlier ones' KV; cancel (AbortSignal, model.cancel()) ends a
#      generation after the token it was asked at; a context that fills drops the oldest turns and goes on; a
#      message that cannot fit is refused and leaves the conversation as it was;
#   3. in Chromium the same, plus the chat through the Worker (TypedecideWorker).
# Skipped (77) without emscripten, in the sanitizer run, or where Debian's sources cannot be fetched; the Chromium
# half is skipped (said) without /usr/bin/chromium.
set -euo pipefail
ROOT=${TD_ROOT:-$(cd "$(dirname "$0")/.." && pwd)}
BIN=${TD_BIN:-$ROOT/build/typedecide}
cd "$ROOT"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp" "${web_tmp:-}"' EXIT
. tests/wasm/common.sh
wasm_build_or_skip
# the GGUF where the static server (the working tree) can serve it
web_tmp=$(mktemp -d -p web/build js-test.XXXXXX)
gguf=$web_tmp/demo-qwen3-q8_0.gguf
"$BIN" export --model models/demo-qwen3 --quant q8_0 -o "$gguf" >/dev/null 2>&1 || fail "export demo-qwen3"
prompt=$'<|im_start|>user\nMy order arrived broken. What should I do?<|im_end|>\n<|im_start|>assistant\n'
node -e '
const [gguf, prompt, ev, crit] = process.argv.slice(1), fs = require("fs");
const files = (d) => fs.readdirSync(d).filter((f) => /^(config|generation_config|tokenizer|tokenizer_config)\.json$|\.safetensors$/.test(f)).map((f) => d + "/" + f);
console.log(JSON.stringify({ gguf: { url: gguf, size: fs.statSync(gguf).size },
  models: ["models/demo-qwen3", "models/demo-qwen35"].map((m) => ({ name: m, files: files(m) })),
  prompt, system: "You answer customer messages.", turns: ["Hello, who are you?", "My parcel is late.", "Thanks, bye."],
  long: "The parcel I ordered two weeks ago still has not arrived and the tracking page shows nothing new.",
  evidence: fs.readFileSync(ev, "utf8"), criteria: fs.readFileSync(crit, "utf8") }));' \
    "$gguf" "$prompt" "$EV" "$CRIT" >"$tmp/job.json"

# native references: generation by ids, the chat CLI's text, decisions on the GGUF
native_gen() { # MODEL IDS-JSON TEMPERATURE-ARGS...
    local m=$1 ids; ids=$(node -e 'console.log(JSON.parse(process.argv[1]).join(","))' "$2"); shift 2
    TD_KERNELS=scalar "$BIN" generate --model "$m" --ids "$ids" -n 24 "$@" 2>/dev/null | tr -d ' '
}
jq_() { node -e 'const o = JSON.parse(require("fs").readFileSync(process.argv[1], "utf8"));
                 const v = process.argv[2].split(".").reduce((x, k) => x[k], o);
                 console.log(typeof v === "string" ? v : JSON.stringify(v));' "$@"; }
{ echo "# $gguf"; TD_KERNELS=scalar "$BIN" decide --quiet --model "$gguf" --evidence "$EV" --criteria "$CRIT"; } \
    >"$tmp/native-decide.jsonl" || fail "native decide"
for m in models/demo-qwen3 models/demo-qwen35 "$gguf"; do
    printf '%s\n' "Hello, who are you?" "My parcel is late." "Thanks, bye." |
        TD_KERNELS=scalar "$BIN" chat --model "$m" --system "You answer customer messages." --seed 5 -n 40 --quiet \
        >"$tmp/chat-$(basename $m).txt" 2>/dev/null || fail "native chat on $m"
done

check() { # RESULT.json WHERE
    local r=$1 where=$2 m key ids
    node tests/wasm/js_api_verify.mjs "$r" "$where" "$tmp" || fail "$where: the API checks"
    ids=$(jq_ "$r" gguf.promptIds)
    want=$(native_gen "$gguf" "$ids" --temperature 0)
    for key in gguf.greedy gguf.arraybuffer.greedy gguf.blob.greedy; do
        [ "$(jq_ "$r" "$key")" = "$want" ] || fail "$where: $key $(jq_ "$r" "$key") differs from native $want"
    done
    { echo "# $gguf"; jq_ "$r" gguf.decide; } >"$tmp/wasm-decide.jsonl"
    node tests/wasm/compare.mjs "$tmp/native-decide.jsonl" "$tmp/wasm-decide.jsonl" 1e-6 >/dev/null ||
        fail "$where: decide on the loaded GGUF differs from native"
    for m in models/demo-qwen3 models/demo-qwen35; do
        ids=$(jq_ "$r" "models.$m.promptIds")
        got() { node -e 'const o = JSON.parse(require("fs").readFileSync(process.argv[1], "utf8"));
                         console.log(JSON.stringify(o.models[process.argv[2]][process.argv[3]]))' "$r" "$m" "$1"; }
        [ "$(got greedy)" = "$(native_gen "$m" "$ids" --temperature 0 --seed 1)" ] || fail "$where: $m greedy ids differ from native"
        [ "$(got seeded)" = "$(native_gen "$m" "$ids" --seed 7)" ] || fail "$where: $m seeded ids differ from native"
        node -e 'const o = JSON.parse(require("fs").readFileSync(process.argv[1], "utf8"));
                 process.stdout.write(o.models[process.argv[2]].chat.map((t) => t.text + "\n\n").join(""))' "$r" "$m" |
            cmp -s - "$tmp/chat-$(basename $m).txt" || {
                echo "wasm:" >&2; node -e 'const o = JSON.parse(require("fs").readFileSync(process.argv[1], "utf8"));
                    console.error(JSON.stringify(o.models[process.argv[2]].chat.map((t) => t.text)))' "$r" "$m"
                echo "native:" >&2; cat "$tmp/chat-$(basename $m).txt" >&2
                fail "$where: $m chat differs from typedecide chat"; }
    done
}

node tests/wasm/js_api_node.mjs "$tmp/node.json" "$tmp/job.json" || fail "the Node run"
check "$tmp/node.json" node
echo "ok: Node: load (path, ArrayBuffer, Blob, HTTP without Content-Length; 5 GB refused before reading), generate" \
     "and chat = native on both demo models, KV reused, cancel, a full context"
if [ ! -x "$CHROMIUM" ]; then echo "note: no chromium at $CHROMIUM: the browser half not run"; exit 0; fi
ws=$(node_ws_flag)
node $ws tests/wasm/js_api_browser.mjs "$CHROMIUM" "$tmp/chromium.json" "$tmp/job.json" || fail "the Chromium run"
check "$tmp/chromium.json" chromium
node -e 'process.stdout.write(JSON.parse(require("fs").readFileSync(process.argv[1], "utf8")).worker.chat.map((t) => t.text + "\n\n").join(""))' \
    "$tmp/chromium.json" | cmp -s - "$tmp/chat-$(basename "$gguf").txt" || fail "chromium: the Worker's chat differs from typedecide chat"
echo "ok: Chromium: the same, and the chat through the Worker (a File loaded there, tokens streamed, cancel)"
