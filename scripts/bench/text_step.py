#!/usr/bin/env python3
"""The Python PyTorch peer of `shoplens bench-train --model text_*`: the same text encoder as
src/models/text_encoder_torch.cpp (TextEncoderNet), layer by layer, with the same attention path
(LibTorch 1.13's "auto" = the explicit math: softmax(q * scale @ k^T, masked) @ v), the same
synthetic batch (every token real, no metadata fields), the same training step (cross-entropy per
sample summed / batch, backward, AdamW in shoplens' four parameter groups, gradients set to None)
and thread count, eager mode. Prints one JSON line like bench-train's.

Run with Debian's /usr/bin/python3 (python3-torch 1.13: the same kernels as libtorch-dev)."""
import argparse
import json
import math
import os

import torch
import torch.nn as nn
import torch.nn.functional as F

from peer_timing import time_steps

MODELS = {"text_tiny": (128, 2, 4), "text_small": (256, 4, 4), "text_base": (512, 8, 8)}  # dim, depth, heads
EPS = 1e-6  # kLayerNormEps


def trunc_normal_(t):
    # timm's trunc_normal_(std=0.02, a=-2, b=2), as text_encoder_torch.cpp draws it
    with torch.no_grad():
        t.normal_(0.0, 0.02).clamp_(-2.0, 2.0)


def init_linear(linear):
    trunc_normal_(linear.weight)
    with torch.no_grad():
        linear.bias.zero_()


class TextEmbedding(nn.Module):
    def __init__(self, vocab_size, max_length, dim):
        super().__init__()
        self.token = nn.Embedding(vocab_size, dim)
        self.position = nn.Embedding(max_length, dim)
        trunc_normal_(self.token.weight)
        trunc_normal_(self.position.weight)

    def forward(self, ids):
        return self.token(ids) + self.position.weight[: ids.size(1)].unsqueeze(0)


class TextSelfAttention(nn.Module):
    def __init__(self, dim, heads, dropout):
        super().__init__()
        self.heads = heads
        self.scale = 1.0 / math.sqrt(dim // heads)
        self.qkv = nn.Linear(dim, dim * 3)
        self.proj = nn.Linear(dim, dim)
        self.drop = nn.Dropout(dropout)

    def forward(self, x, attend):
        b, n, c = x.shape
        qkv = self.qkv(x).reshape(b, n, 3, self.heads, c // self.heads).permute(2, 0, 3, 1, 4)
        q, k, v = qkv[0], qkv[1], qkv[2]
        scores = torch.matmul(q * self.scale, k.transpose(-2, -1))
        scores = scores.masked_fill(attend.logical_not(), float("-inf"))
        out = torch.matmul(scores.softmax(-1), v)
        return self.drop(self.proj(out.transpose(1, 2).reshape(b, n, c)))


class TextMlp(nn.Module):
    def __init__(self, dim, hidden, dropout):
        super().__init__()
        self.fc1 = nn.Linear(dim, hidden)
        self.fc2 = nn.Linear(hidden, dim)
        self.drop = nn.Dropout(dropout)

    def forward(self, x):
        return self.drop(self.fc2(self.drop(F.gelu(self.fc1(x)))))


class TextEncoderLayer(nn.Module):
    def __init__(self, dim, heads, hidden, dropout):
        super().__init__()
        self.norm1 = nn.LayerNorm(dim, eps=EPS)
        self.attn = TextSelfAttention(dim, heads, dropout)
        self.norm2 = nn.LayerNorm(dim, eps=EPS)
        self.mlp = TextMlp(dim, hidden, dropout)

    def forward(self, x, attend):
        x = x + self.attn(self.norm1(x), attend)
        return x + self.mlp(self.norm2(x))


class TextHead(nn.Module):
    def __init__(self, in_features, hidden, num_classes, dropout):
        super().__init__()
        self.fc1 = nn.Linear(in_features, hidden)
        self.drop = nn.Dropout(dropout)
        self.fc2 = nn.Linear(hidden, num_classes)
        init_linear(self.fc1)
        init_linear(self.fc2)

    def forward(self, x):
        return self.fc2(self.drop(F.gelu(self.fc1(x))))


class TextEncoderNet(nn.Module):
    """Mean pooling, no metadata fields (bench-train's synthetic batch has none), dropout 0."""

    def __init__(self, vocab_size, max_length, dim, depth, heads, num_classes, mlp_ratio=4.0, dropout=0.0):
        super().__init__()
        self.vocab_size = vocab_size
        self.max_length = max_length
        self.embed = TextEmbedding(vocab_size, max_length, dim)
        hidden = int(round(dim * mlp_ratio))
        self.layers = nn.ModuleList()
        for _ in range(depth):
            layer = TextEncoderLayer(dim, heads, hidden, dropout)
            for m in layer.modules():
                if isinstance(m, nn.Linear):
                    init_linear(m)
            self.layers.append(layer)
        self.norm = nn.LayerNorm(dim, eps=EPS)
        self.head = TextHead(dim, dim, num_classes, dropout)

    def forward(self, input_ids, attention_mask):
        b, n = input_ids.shape
        ids = input_ids.long()
        # The C++ forward's range check: one host sync per step, kept so both do the same work.
        if (ids.lt(0) | ids.ge(self.vocab_size)).any().item():
            raise ValueError("token id out of range")
        real = attention_mask if attention_mask.dtype == torch.bool else attention_mask.ne(0)
        empty_row = real.any(1).logical_not()
        first = torch.zeros_like(real)
        first[:, 0] = True
        attend = (real | (first & empty_row.unsqueeze(1))).view(b, 1, 1, n)
        x = self.embed(ids)
        for layer in self.layers:
            x = layer(x, attend)
        x = self.norm(x)
        weights = real.unsqueeze(-1).to(x.dtype)
        pooled = (x * weights).sum(1) / weights.sum(1).clamp_min(1.0)
        return self.head(pooled)


def param_groups(model, lr, weight_decay):
    # OptimizerSetup: backbone / backbone_no_decay / head / head_no_decay; no decay on dims <= 1.
    groups = {k: [] for k in ("backbone", "backbone_no_decay", "head", "head_no_decay")}
    for name, p in model.named_parameters():
        key = ("head" if name.startswith("head.") else "backbone") + ("_no_decay" if p.ndim <= 1 else "")
        groups[key].append(p)
    return [{"params": groups[k], "lr": lr, "weight_decay": 0.0 if k.endswith("no_decay") else weight_decay}
            for k in ("backbone", "backbone_no_decay", "head", "head_no_decay")]


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--model", default="text_tiny", choices=sorted(MODELS))
    ap.add_argument("--batch-size", "-b", type=int, default=16)
    ap.add_argument("--seq-len", type=int, default=256)
    ap.add_argument("--vocab-size", type=int, default=8192)
    ap.add_argument("--num-classes", type=int, default=2)
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--warmup-steps", "--warmup", dest="warmup", type=int, default=3)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()

    threads = a.threads or len(os.sched_getaffinity(0))
    torch.set_num_threads(threads)  # the C++ side sets its thread count explicitly too
    torch.manual_seed(a.seed)
    dim, depth, heads = MODELS[a.model]
    model = TextEncoderNet(a.vocab_size, a.seq_len, dim, depth, heads, a.num_classes)
    opt = torch.optim.AdamW(param_groups(model, 1e-3, 0.05), lr=1e-3, betas=(0.9, 0.999), eps=1e-8)
    ids = torch.randint(2, max(3, a.vocab_size), (a.batch_size, a.seq_len))
    mask = torch.ones(a.batch_size, a.seq_len, dtype=torch.bool)
    labels = torch.randint(0, a.num_classes, (a.batch_size,))
    model.train()

    def step():
        for p in model.parameters():
            p.grad = None
        logits = model(ids, mask)
        loss = F.cross_entropy(logits.float(), labels, reduction="none").sum() / a.batch_size
        loss.backward()
        opt.step()
        return loss.item()

    times, median = time_steps(step, a.warmup, a.steps)
    print(json.dumps({"implementation": "pytorch", "model": a.model, "batch_size": a.batch_size, "seq_len": a.seq_len,
                      "vocab_size": a.vocab_size, "num_classes": a.num_classes, "threads": threads, "steps": a.steps,
                      "parameters": sum(p.numel() for p in model.parameters()),
                      "median_step_ms": median * 1e3, "samples_per_second": a.batch_size / median,
                      "tokens_per_second": a.batch_size * a.seq_len / median, "torch": torch.__version__,
                      "step_seconds": times}))


if __name__ == "__main__":
    main()
