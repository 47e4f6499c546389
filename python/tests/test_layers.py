"""The raw layers: logits as `typedecide logits` writes them, tokens as `typedecide tokenize` gives them."""

import json

import numpy as np
import pytest

import typedecide as td
from conftest import DEMO, DEMO35, cli

IDS = [365, 25, 314, 262, 2923, 11, 8166, 1, 0, 8191]


@pytest.mark.parametrize("model", [DEMO, DEMO35])
def test_logits_equal_cli(model, tmp_path):
    out = tmp_path / "logits.f32"
    cli("logits", "--model", model, "--ids", ",".join(map(str, IDS)), "--out", out)
    m = td.Model(model, threads=2)
    expected = np.fromfile(out, dtype=np.float32).reshape(len(IDS), m.n_vocab)
    got = m.logits(IDS)
    assert got.dtype == np.float32 and got.shape == (len(IDS), m.n_vocab)
    assert np.array_equal(got.view(np.uint32), expected.view(np.uint32))
    assert not got.flags.owndata  # the context's buffer itself


def test_logits_in_chunks_equal_cli(demo, tmp_path):
    """A budget too small for one pass: the positions run in chunks, copied into one array, the same bits."""
    ids = (IDS * 30)[:300]
    out = tmp_path / "logits.f32"
    cli("logits", "--model", DEMO, "--ids", ",".join(map(str, ids)), "--out", out)
    expected = np.fromfile(out, dtype=np.float32).reshape(len(ids), demo.n_vocab)
    got = demo.logits(ids, memory_mb=1)  # 300 x 8192 floats alone are 9.4 MiB
    assert got.flags.owndata and np.array_equal(got.view(np.uint32), expected.view(np.uint32))


def test_logits_without_a_copy(demo):
    """The array is the context's own output buffer: numpy does not own it, and it outlives the call."""
    x = demo.logits(IDS)
    assert not x.flags.owndata and x.base is not None
    y = np.array(x)  # a copy, to compare after the context is gone
    del x
    import gc
    gc.collect()
    assert np.array_equal(demo.logits(IDS), y)


def test_tokenize_equals_cli(demo):
    text = "Answer: A\nCriterion: Does the customer ask for a refund? <|im_start|>user héllo"
    assert demo.tokenize(text, special=True) == json.loads(cli("tokenize", "--model", DEMO, "--text", text).stdout)
    assert demo.tokenize(text) == json.loads(cli("tokenize", "--model", DEMO, "--text", text, "--no-special").stdout)
    ids = demo.tokenize(text)
    assert demo.detokenize(ids) == text
    assert json.loads(cli("tokenize", "--model", DEMO, "--decode", ",".join(map(str, ids))).stdout) == text


def test_tokenizer_object(demo, tmp_path):
    tok = demo.tokenizer
    assert len(tok) >= demo.n_vocab - 64
    assert tok.token_id("<|im_end|>") == tok.tokenize("<|im_end|>", special=True)[0]
    assert tok.token_id("no such token") is None
    assert b"".join(tok.token_bytes(i) for i in tok.tokenize("héllo")) == "héllo".encode()
    p = tmp_path / "tokenizer.json"
    p.write_text(tok.to_json(), encoding="utf-8")
    again = td.Tokenizer(p)
    assert again.tokenize("Answer: B, 42 times") == tok.tokenize("Answer: B, 42 times")
