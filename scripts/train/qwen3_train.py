"""A Qwen3 decoder for training only: the arithmetic of transformers' Qwen3ForCausalLM, written out so that it can be
trained fast and deterministically on one GPU, with the same parameter names so that its state dict loads into
Qwen3ForCausalLM unchanged (train.py saves through transformers and checks the two give the same logits).

Why not train Qwen3ForCausalLM itself: at hidden 256 the eager model is bound by the launch and memory traffic of
its many small element-wise kernels (0.33 M tokens/s per process on the H200 in the first run); this module runs
under torch.compile, and its attention is written as plain matrix products and a softmax (no fused attention
kernel whose backward adds with atomics), so that two runs with the same seed give the same weights.

RMSNorm (weight * x / rms, in fp32), per-head q/k RMSNorm, rotary embedding on the whole head (rotate-half),
grouped-query attention, SwiGLU MLP, tied embedding and head: as transformers computes them.
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class RMSNorm(nn.Module):
    def __init__(self, n, eps):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(n))
        self.eps = eps

    def forward(self, x):
        dt = x.dtype
        x = x.float()
        x = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * x.to(dt)


def rope_tables(L, d, theta, device):
    inv = 1.0 / (theta ** (torch.arange(0, d, 2, dtype=torch.float32, device=device) / d))
    f = torch.outer(torch.arange(L, dtype=torch.float32, device=device), inv)   # [L, d/2]
    emb = torch.cat([f, f], dim=-1)                                            # [L, d]
    return emb.cos(), emb.sin()


def rotate_half(x):
    h = x.shape[-1] // 2
    return torch.cat([-x[..., h:], x[..., :h]], dim=-1)


class Attention(nn.Module):
    def __init__(self, c):
        super().__init__()
        H, d = c["hidden_size"], c["head_dim"]
        self.nq, self.nk, self.d = c["num_attention_heads"], c["num_key_value_heads"], d
        self.q_proj = nn.Linear(H, self.nq * d, bias=False)
        self.k_proj = nn.Linear(H, self.nk * d, bias=False)
        self.v_proj = nn.Linear(H, self.nk * d, bias=False)
        self.o_proj = nn.Linear(self.nq * d, H, bias=False)
        self.q_norm = RMSNorm(d, c["rms_norm_eps"])
        self.k_norm = RMSNorm(d, c["rms_norm_eps"])

    def forward(self, x, cos, sin, mask):
        B, L, _ = x.shape
        q = self.q_norm(self.q_proj(x).view(B, L, self.nq, self.d)).transpose(1, 2)   # [B, Hq, L, d]
        k = self.k_norm(self.k_proj(x).view(B, L, self.nk, self.d)).transpose(1, 2)   # [B, Hk, L, d]
        v = self.v_proj(x).view(B, L, self.nk, self.d).transpose(1, 2)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        rep = self.nq // self.nk
        k = k.repeat_interleave(rep, dim=1)
        v = v.repeat_interleave(rep, dim=1)
        s = torch.matmul(q, k.transpose(-1, -2)) * (1.0 / math.sqrt(self.d))           # [B, Hq, L, L]
        p = torch.softmax(s.float() + mask, dim=-1).to(q.dtype)
        o = torch.matmul(p, v).transpose(1, 2).reshape(B, L, self.nq * self.d)
        return self.o_proj(o)


class MLP(nn.Module):
    def __init__(self, c):
        super().__init__()
        H, I = c["hidden_size"], c["intermediate_size"]
        self.gate_proj = nn.Linear(H, I, bias=False)
        self.up_proj = nn.Linear(H, I, bias=False)
        self.down_proj = nn.Linear(I, H, bias=False)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class Layer(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.input_layernorm = RMSNorm(c["hidden_size"], c["rms_norm_eps"])
        self.self_attn = Attention(c)
        self.post_attention_layernorm = RMSNorm(c["hidden_size"], c["rms_norm_eps"])
        self.mlp = MLP(c)

    def forward(self, x, cos, sin, mask):
        x = x + self.self_attn(self.input_layernorm(x), cos, sin, mask)
        return x + self.mlp(self.post_attention_layernorm(x))


class Body(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.embed_tokens = nn.Embedding(c["vocab_size"], c["hidden_size"])
        self.layers = nn.ModuleList([Layer(c) for _ in range(c["num_hidden_layers"])])
        self.norm = RMSNorm(c["hidden_size"], c["rms_norm_eps"])


class Qwen3Train(nn.Module):
    """forward(ids [B, L]) -> final hidden states [B, L, H]; head(h) -> logits (tied to the embedding)."""

    def __init__(self, c):
        super().__init__()
        self.c = c
        self.model = Body(c)
        self.lm_head = nn.Linear(c["hidden_size"], c["vocab_size"], bias=False)
        self.lm_head.weight = self.model.embed_tokens.weight
        std = c.get("initializer_range", 0.02)
        for m in self.modules():       # transformers' _init_weights for Qwen3: normal(0, 0.02), norms at 1
            if isinstance(m, (nn.Linear, nn.Embedding)):
                nn.init.normal_(m.weight, mean=0.0, std=std)

    def forward(self, ids):
        B, L = ids.shape
        cos, sin = rope_tables(L, self.c["head_dim"], self.c["rope_theta"], ids.device)
        mask = torch.full((L, L), float("-inf"), device=ids.device).triu(1)
        x = self.model.embed_tokens(ids)
        for layer in self.model.layers:
            x = layer(x, cos, sin, mask)
        return self.model.norm(x)

    def head(self, h):
        return self.lm_head(h)
