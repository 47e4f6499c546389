#!/usr/bin/env python3
"""Runs llama.cpp's own converter (convert_hf_to_gguf.py, from the llama.cpp source that ships inside the npm
package node-llama-cpp as llama/gitRelease.bundle) on a Hugging Face model directory. Used on the GPU machine,
where torch, numpy and transformers are installed, to make reference GGUF files that typedecide must load:

    python3 scripts/convert_gguf_device.py LLAMA_CPP_DIR HF_DIR --outtype bf16 --outfile out.gguf

LLAMA_CPP_DIR holds convert_hf_to_gguf.py, conversion/ and gguf-py/ (extracted from the bundle, never committed).
The converter identifies the pre-tokenizer by hashing how the tokenizer encodes a fixed text; our fixtures use a
2048-token cut of the real Qwen3 tokenizer, whose hash is not in its table, so when (and only when) the hash is
unrecognised this wrapper answers "qwen2" -- the pre-tokenizer the converter assigns to the full Qwen3 tokenizer
(or "qwen35" for a Qwen3.5 checkpoint, whose Split regex differs, and "llama-bpe" for a Llama 3 cut). A Gemma 3
directory needs a tokenizer.model (SentencePiece) for the converter: sentencepiece_model() writes one from its
tokenizer.json (the pieces, their types, and scores that rank the merges), which is what the converter reads.
"""
import json
import os
import sys


def sentencepiece_model(hf_dir):
    """tokenizer.model for a SentencePiece-style BPE tokenizer.json (Gemma 3): every piece by id, CONTROL for the
    special added tokens, UNKNOWN for unk_token, BYTE for <0xXX>, USER_DEFINED for the other added tokens, NORMAL
    otherwise; score -id, so that a merged piece made earlier outranks a later one (llama.cpp's SPM tokenizer merges
    the pair whose concatenation scores highest)."""
    from sentencepiece import sentencepiece_model_pb2 as pb
    tok = json.load(open(os.path.join(hf_dir, "tokenizer.json"), encoding="utf-8"))
    vocab = tok["model"]["vocab"]
    added = {a["id"]: a for a in tok["added_tokens"]}
    unk = tok["model"].get("unk_token")
    pieces = sorted(vocab.items(), key=lambda kv: kv[1])
    assert [i for _, i in pieces] == list(range(len(pieces))), "ids must be 0..n-1"
    m = pb.ModelProto()
    m.trainer_spec.model_type = pb.TrainerSpec.BPE
    m.trainer_spec.vocab_size = len(pieces)
    m.trainer_spec.byte_fallback = True
    m.normalizer_spec.name = "identity"
    m.normalizer_spec.add_dummy_prefix = False
    m.normalizer_spec.escape_whitespaces = True
    for piece, i in pieces:
        p = m.pieces.add()
        p.piece = piece
        p.score = -float(i)
        if piece == unk:
            p.type = pb.ModelProto.SentencePiece.UNKNOWN
        elif i in added and added[i]["special"]:
            p.type = pb.ModelProto.SentencePiece.CONTROL
        elif i in added:
            p.type = pb.ModelProto.SentencePiece.USER_DEFINED
        elif len(piece) == 6 and piece.startswith("<0x") and piece.endswith(">"):
            p.type = pb.ModelProto.SentencePiece.BYTE
        else:
            p.type = pb.ModelProto.SentencePiece.NORMAL
    with open(os.path.join(hf_dir, "tokenizer.model"), "wb") as f:
        f.write(m.SerializeToString())


def main():
    llama_dir = sys.argv[1]
    sys.path.insert(0, llama_dir)
    sys.path.insert(1, llama_dir + "/gguf-py")
    from conversion import base

    original = base.TextModel.get_vocab_base_pre

    hf_dir = sys.argv[2]
    if json.load(open(os.path.join(hf_dir, "config.json"))).get("model_type", "").startswith("gemma3") and \
            not os.path.exists(os.path.join(hf_dir, "tokenizer.model")):
        sentencepiece_model(hf_dir)
    model_type = json.load(open(os.path.join(hf_dir, "config.json"))).get("model_type", "")
    fallback = "qwen35" if model_type.startswith("qwen3_5") else "llama-bpe" if model_type == "llama" else "qwen2"

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
