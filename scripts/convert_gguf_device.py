#!/usr/bin/env python3
"""Runs llama.cpp's own converter (convert_hf_to_gguf.py, from the llama.cpp source that ships inside the npm
package node-llama-cpp as llama/gitRelease.bundle) on a Hugging Face model directory. Used on the GPU machine,
where torch, numpy and transformers are installed, to make reference GGUF files that typedecide must load:

    python3 scripts/convert_gguf_device.py LLAMA_CPP_DIR HF_DIR --outtype bf16 --outfile out.gguf

LLAMA_CPP_DIR holds convert_hf_to_gguf.py, conversion/ and gguf-py/ (extracted from the bundle, never committed).
The converter identifies the pre-tokenizer by hashing how the tokenizer encodes a fixed text; our fixtures use a
2048-token cut of the real Qwen3 tokenizer, whose hash is not in its table, so when (and only when) the hash is
unrecognised this wrapper answers "qwen2" -- the pre-tokenizer the converter assigns to the full Qwen3 tokenizer
(or "qwen35" for a Qwen3.5 checkpoint, whose Split regex differs).
"""
import json
import os
import sys


def main():
    llama_dir = sys.argv[1]
    sys.path.insert(0, llama_dir)
    sys.path.insert(1, llama_dir + "/gguf-py")
    from conversion import base

    original = base.TextModel.get_vocab_base_pre

    hf_dir = sys.argv[2]
    model_type = json.load(open(os.path.join(hf_dir, "config.json"))).get("model_type", "")
    fallback = "qwen35" if model_type.startswith("qwen3_5") else "qwen2"

    def pre_or_qwen2(self, tokenizer):
        try:
            return original(self, tokenizer)
        except NotImplementedError:
            print("convert_gguf_device: unrecognised pre-tokenizer hash (truncated vocabulary): using " + fallback)
            return fallback

    base.TextModel.get_vocab_base_pre = pre_or_qwen2
    import convert_hf_to_gguf
    sys.argv = ["convert_hf_to_gguf.py"] + sys.argv[2:]
    convert_hf_to_gguf.main()


if __name__ == "__main__":
    main()
