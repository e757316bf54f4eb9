#!/usr/bin/env python3
"""How hard a text shard folder is (docs/TEXT.md, "How hard it is"): class-weighted logistic
regressions by SGD in pure Python on metadata, bag of words, and n-grams; ROC AUC on val and test.
Usage: python3 scripts/bench/text_difficulty.py TEXT_SHARD_DIR   (a few minutes for 4000 examples)"""
import json, struct, sys, math, random, collections
d = sys.argv[1]
info = json.load(open(d + "/text_dataset.json"))
def load(split):
    out = []
    for s in info["shards"]:
        if s["split"] != split: continue
        idx = open(f"{d}/{s['name']}.tidx", "rb").read()
        tok = open(f"{d}/{s['name']}.tokens", "rb").read()
        n = struct.unpack_from("<Q", idx, 16)[0]
        for i in range(n):
            e = idx[48 + 88 * i: 48 + 88 * (i + 1)]
            sid, off, ln, lab, ca, shid, sp = struct.unpack_from("<QQIiqIB", e)
            cat = struct.unpack_from("<8H", e, 40)[:3]
            num = struct.unpack_from("<8f", e, 56)[:2]
            code, width = ("H", 2) if info.get("token_dtype", "uint16") == "uint16" else ("i", 4)
            toks = struct.unpack_from(f"<{ln}{code}", tok, off * width)
            out.append((toks, lab, cat, num))
    return out
tr, va, te = load("train"), load("val"), load("test")
def auc(scores, labels):
    pairs = sorted(zip(scores, labels))
    npos = sum(labels); nneg = len(labels) - npos
    rank_sum = 0; i = 0
    while i < len(pairs):
        j = i
        while j < len(pairs) and pairs[j][0] == pairs[i][0]: j += 1
        r = (i + j + 1) / 2
        rank_sum += r * sum(l for _, l in pairs[i:j]); i = j
    return (rank_sum - npos * (npos + 1) / 2) / (npos * nneg)
def feats(ex, kind):
    toks, lab, cat, num = ex
    f = collections.Counter()
    if "bow" in kind:
        for t in toks: f[("u", t)] += 1
    if "bi" in kind:
        for a, b in zip(toks, toks[1:]): f[("b", a, b)] += 1
        for a, b, c in zip(toks, toks[1:], toks[2:]): f[("t", a, b, c)] += 1
    L = len(toks)
    out = {k: v / math.sqrt(L) for k, v in f.items()}
    if "meta" in kind:
        for k, c in enumerate(cat): out[("c", k, c)] = 1.0
        for k, v in enumerate(num):
            if v != v: out[("nm", k)] = 1.0
            else: out[("n", k)] = math.log(v) - 4
    out[("bias",)] = 1.0
    return out
def train_eval(kind, epochs=8, lr=0.1, l2=1e-4):
    X = [feats(e, kind) for e in tr]; Y = [e[1] for e in tr]
    w = collections.defaultdict(float); rnd = random.Random(0)
    order = list(range(len(X)))
    for ep in range(epochs):
        rnd.shuffle(order)
        for i in order:
            z = sum(w[k] * v for k, v in X[i].items())
            p = 1 / (1 + math.exp(-max(-30, min(30, z))))
            g = (p - Y[i]) * (4.0 if Y[i] else 1.0)  # class weight
            for k, v in X[i].items(): w[k] -= lr * (g * v + l2 * w[k])
    res = {}
    for name, data in (("val", va), ("test", te)):
        s = [sum(w.get(k, 0) * v for k, v in feats(e, kind).items()) for e in data]
        res[name] = round(auc(s, [e[1] for e in data]), 3)
    return res
print("meta only", train_eval("meta"))
print("bow", train_eval("bow"))
print("bow+meta", train_eval("bow meta"))
print("bow+bi+meta", train_eval("bow bi meta"))
# best single token (frequency) AUC on train
labels = [e[1] for e in tr]
best = []
tokset = collections.Counter(t for e in tr for t in set(e[0]))
for t, c in tokset.most_common(2000):
    s = [e[0].count(t) / len(e[0]) for e in tr]
    a = auc(s, labels); best.append((abs(a - 0.5), a, t, c))
best.sort(reverse=True)
print("best single tokens", [(round(a, 3), t, c) for _, a, t, c in best[:5]])
