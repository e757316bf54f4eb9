#!/usr/bin/python3
"""How hard is a catalog? A linear model on downsampled pixels against a small CNN.

Answers issue 2's requirement that the synthetic catalog written by `shoplens make-data` be
learnable but not trivial: "a linear model on downsampled pixels must do clearly worse than a
CNN". Works on any manifest with the make-data columns (at least path, label, split).

Data. Paths are relative to the manifest's folder. Every file is opened once with PIL
(open + load + convert("RGB")); files PIL cannot open or decode (truncated, zero bytes, not an
image, bad header: the catalog corrupts ~2% on purpose) are skipped and counted per split. A
corrupted file that still decodes (e.g. a PNG with a .jpg name) is kept, as a real loader would.
Geometry (`--resize`): "squash" (default) resizes the whole original to a square, changing its
aspect ratio but keeping every pixel of content (a "cropped" or "duplicate" image loses nothing);
"crop" resizes the short side and takes the centre square. Both use PIL's antialiased bilinear
resampling, straight from the original, to `--size` (CNN, default 64) and `--linear-size`
(linear model, default 32). Decoded arrays are cached in memory as uint8.
Splits: "train" trains, "val" is the reported evaluation; "test" is reported too when present.

Models.
  majority  predicts the most frequent train class.
  linear    multinomial logistic regression on the flattened 32x32x3 pixels, each feature
            z-scored with train statistics; full-batch L-BFGS (strong Wolfe line search) to
            convergence, L2 penalty on the weights only. The L2 strength is tuned lightly: each
            value of `--linear-l2` is fitted on a stratified 80% of train and scored (macro-F1)
            on the other 20%; the best is refitted on all of train. The CNN gets no tuning, so
            any tuning advantage lies with the linear baseline.
  cnn       `--widths` blocks of conv3x3-BatchNorm-ReLU-MaxPool2 (default 32, 64, 128, 256), global
            average pool, dropout 0.2, linear head; trained from scratch on `--size` inputs
            normalised with train channel mean/std, with random horizontal flip and random crop
            (reflect-pad 4 px, crop back to `--size`); AdamW (lr `--lr`, weight decay 0.05),
            one epoch of linear warm-up then cosine decay to 0, `--epochs` epochs, batch
            `--batch-size`. The weights after the last epoch are evaluated (no early stopping
            on val, so val is not used for selection).
Both trained models use class-weighted cross-entropy (weight_c = N / (K * N_c) over the train
split), since the metric is macro-F1 on imbalanced classes; `--no-class-weights` turns it off.

Metrics, computed here: accuracy; per-class precision/recall/F1 (0 where undefined); macro-F1
= the mean F1 over the classes present in the split's true labels; confusion matrix; train
time (wall clock, excluding decoding). `torch.set_num_threads(--threads)` (default: the usable
cores); everything is seeded with `--seed`. Prints Markdown tables; `--out` writes JSON.

Run with Debian's interpreter (/usr/bin/python3), which has python3-torch and
python3-torchvision:
    /usr/bin/python3 scripts/bench/difficulty.py --manifest CATALOG/manifest.csv --out d.json
"""

import argparse
import csv
import json
import math
import os
import platform
import random
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import PIL
import torch
import torch.nn as nn
import torch.nn.functional as F
from PIL import Image


# ----------------------------------------------------------------------------------- data

def read_manifest(path):
    folder = os.path.dirname(os.path.abspath(path))
    with open(path, newline="") as f:
        reader = csv.DictReader(f)
        missing = {"path", "label", "split"} - set(reader.fieldnames or [])
        if missing:
            sys.exit(f"error: {path}: missing column(s) {sorted(missing)}")
        rows = [r for r in reader if r["path"]]
    for r in rows:
        r["abspath"] = os.path.join(folder, r["path"])
    return rows


def square_box(w, h, mode):
    """The source box to resize: the whole image ("squash") or its centre square ("crop")."""
    if mode == "squash":
        return (0, 0, w, h)
    s = min(w, h)
    left, top = (w - s) // 2, (h - s) // 2
    return (left, top, left + s, top + s)


def to_chw(img):
    w, h = img.size
    t = torch.frombuffer(bytearray(img.tobytes()), dtype=torch.uint8)
    return t.view(h, w, 3).permute(2, 0, 1).contiguous()


def decode(path, size, linear_size, mode):
    """(cnn uint8 3xSxS, linear uint8 3xLxL, None) or (None, None, reason)."""
    try:
        with Image.open(path) as im:
            im.load()
            img = im.convert("RGB")
    except Exception as e:  # truncated, empty, not an image, bad header: all skipped
        return None, None, type(e).__name__
    box = square_box(img.width, img.height, mode)
    big = img.resize((size, size), Image.BILINEAR, box=box)
    small = img.resize((linear_size, linear_size), Image.BILINEAR, box=box)
    return to_chw(big), to_chw(small), None


def load(rows, args):
    """Decodes every row once (threads: PIL releases the GIL while decoding and resizing)."""
    with ThreadPoolExecutor(max_workers=args.threads) as pool:
        results = list(pool.map(
            lambda r: decode(r["abspath"], args.size, args.linear_size, args.resize), rows))
    splits, skipped = {}, {}
    for r, (big, small, reason) in zip(rows, results):
        s = r["split"] or "(none)"
        if reason is not None:
            sk = skipped.setdefault(s, {"total": 0, "by_error": {}})
            sk["total"] += 1
            sk["by_error"][reason] = sk["by_error"].get(reason, 0) + 1
            continue
        d = splits.setdefault(s, {"big": [], "small": [], "labels": []})
        d["big"].append(big)
        d["small"].append(small)
        d["labels"].append(r["label"])
    return splits, skipped


# -------------------------------------------------------------------------------- metrics

def evaluate(pred, target, num_classes):
    """Accuracy, macro-F1 over classes present in target, per-class P/R/F1, confusion."""
    conf = torch.zeros(num_classes, num_classes, dtype=torch.long)
    conf.index_put_((target, pred), torch.ones_like(target), accumulate=True)
    tp = conf.diag().double()
    predicted = conf.sum(0).double()
    actual = conf.sum(1).double()
    precision = torch.where(predicted > 0, tp / predicted.clamp(min=1), torch.zeros_like(tp))
    recall = torch.where(actual > 0, tp / actual.clamp(min=1), torch.zeros_like(tp))
    denom = precision + recall
    f1 = torch.where(denom > 0, 2 * precision * recall / denom.clamp(min=1e-12),
                     torch.zeros_like(tp))
    present = actual > 0
    return {
        "n": int(target.numel()),
        "accuracy": float(tp.sum() / max(target.numel(), 1)),
        "macro_f1": float(f1[present].mean()) if present.any() else 0.0,
        "precision": precision.tolist(),
        "recall": recall.tolist(),
        "f1": f1.tolist(),
        "support": actual.long().tolist(),
        "confusion": conf.tolist(),
    }


def class_weights(y, num_classes, enabled):
    counts = torch.bincount(y, minlength=num_classes).double()
    if not enabled:
        return torch.ones(num_classes)
    w = torch.where(counts > 0, y.numel() / (num_classes * counts.clamp(min=1)),
                    torch.zeros_like(counts))
    return w.float()


# --------------------------------------------------------------------------------- linear

def fit_linear(x, y, num_classes, l2, weights, max_iter):
    model = nn.Linear(x.shape[1], num_classes)
    nn.init.zeros_(model.weight)
    nn.init.zeros_(model.bias)
    opt = torch.optim.LBFGS(model.parameters(), lr=1.0, max_iter=max_iter, history_size=20,
                            tolerance_grad=1e-6, tolerance_change=1e-10,
                            line_search_fn="strong_wolfe")
    # Weighted *mean* loss, normalised by the total weight: the same objective at any N.
    def closure():
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y, weight=weights)
        loss = loss + 0.5 * l2 * model.weight.pow(2).sum()
        loss.backward()
        return loss
    opt.step(closure)
    state = opt.state[opt._params[0]]
    loss = closure()  # the final objective and its gradient, to show convergence
    grad = max(float(p.grad.abs().max()) for p in model.parameters())
    return model, {"iterations": int(state.get("n_iter", 0)), "loss": float(loss),
                   "max_abs_grad": grad}


def stratified_holdout(y, fraction, gen):
    hold = torch.zeros(y.numel(), dtype=torch.bool)
    for c in y.unique():
        idx = (y == c).nonzero().flatten()
        idx = idx[torch.randperm(idx.numel(), generator=gen)]
        k = int(round(idx.numel() * fraction))
        hold[idx[:k]] = True
    return hold


def run_linear(data, num_classes, args, log):
    tr = data["train"]
    x = tr["small"].flatten(1).float()
    mean, std = x.mean(0), x.std(0).clamp(min=1.0)  # std in 0..255 units; floor avoids blow-ups
    norm = lambda t: (t.flatten(1).float() - mean) / std
    x = norm(tr["small"])
    y = tr["y"]
    gen = torch.Generator().manual_seed(args.seed + 1)
    start = time.perf_counter()
    hold = stratified_holdout(y, 0.2, gen)
    tuning = []
    for l2 in args.linear_l2:
        w = class_weights(y[~hold], num_classes, not args.no_class_weights)
        model, fit = fit_linear(x[~hold], y[~hold], num_classes, l2, w, args.linear_max_iter)
        with torch.no_grad():
            m = evaluate(model(x[hold]).argmax(1), y[hold], num_classes)
        tuning.append({"l2": l2, "holdout_macro_f1": m["macro_f1"],
                       "holdout_accuracy": m["accuracy"], **fit})
        log(f"linear: l2={l2:g}: held-out macro-F1 {m['macro_f1']:.4f}, "
            f"accuracy {m['accuracy']:.4f} ({fit['iterations']} L-BFGS iterations, "
            f"max |grad| {fit['max_abs_grad']:.1e})")
    best = max(tuning, key=lambda t: (t["holdout_macro_f1"], t["l2"]))["l2"]
    tune_seconds = time.perf_counter() - start
    start = time.perf_counter()
    model, fit = fit_linear(x, y, num_classes, best,
                            class_weights(y, num_classes, not args.no_class_weights),
                            args.linear_max_iter)
    fit_seconds = time.perf_counter() - start
    log(f"linear: refit on all of train with l2={best:g} ({fit['iterations']} iterations, "
        f"max |grad| {fit['max_abs_grad']:.1e}, {fit_seconds:.1f} s)")
    with torch.no_grad():
        train_eval = evaluate(model(x).argmax(1), y, num_classes)
    results = {}
    with torch.no_grad():
        for split in eval_splits(data):
            results[split] = evaluate(model(norm(data[split]["small"])).argmax(1),
                                      data[split]["y"], num_classes)
    return {
        "input": f"{args.linear_size}x{args.linear_size}x3 pixels, flattened, z-scored per feature",
        "optimizer": "full-batch L-BFGS, strong Wolfe",
        "l2_grid": tuning, "l2": best, "fit": fit,
        "train_accuracy": train_eval["accuracy"], "train_macro_f1": train_eval["macro_f1"],
        "tune_seconds": round(tune_seconds, 2), "train_seconds": round(fit_seconds, 2),
        "splits": results,
    }


# ------------------------------------------------------------------------------------ cnn

class SmallCNN(nn.Module):
    def __init__(self, num_classes, widths=(32, 64, 128, 256)):
        super().__init__()
        layers, cin = [], 3
        for cout in widths:
            layers += [nn.Conv2d(cin, cout, 3, padding=1, bias=False), nn.BatchNorm2d(cout),
                       nn.ReLU(inplace=True), nn.MaxPool2d(2)]
            cin = cout
        self.features = nn.Sequential(*layers)
        self.dropout = nn.Dropout(0.2)
        self.head = nn.Linear(cin, num_classes)

    def forward(self, x):
        x = self.features(x).mean((2, 3))
        return self.head(self.dropout(x))


def augment(batch, pad, gen):
    """Random horizontal flip + random crop (reflect pad `pad`, crop back), per sample."""
    n, _, h, w = batch.shape
    flip = torch.rand(n, generator=gen) < 0.5
    batch = torch.where(flip.view(n, 1, 1, 1), batch.flip(3), batch)
    if pad <= 0:
        return batch
    padded = F.pad(batch, (pad, pad, pad, pad), mode="reflect")
    dx = torch.randint(0, 2 * pad + 1, (n,), generator=gen).tolist()
    dy = torch.randint(0, 2 * pad + 1, (n,), generator=gen).tolist()
    return torch.stack([padded[i, :, dy[i]:dy[i] + h, dx[i]:dx[i] + w] for i in range(n)])


def predict(model, x_u8, mean, std, batch_size):
    model.eval()
    out = []
    with torch.no_grad():
        for i in range(0, x_u8.shape[0], batch_size):
            xb = (x_u8[i:i + batch_size].float() / 255 - mean) / std
            xb = xb.contiguous(memory_format=torch.channels_last)
            out.append(model(xb).argmax(1))
    return torch.cat(out) if out else torch.zeros(0, dtype=torch.long)


def run_cnn(data, num_classes, args, log):
    tr = data["train"]
    x_u8, y = tr["big"], tr["y"]
    xf = x_u8.float() / 255
    mean = xf.mean((0, 2, 3)).view(1, 3, 1, 1)
    std = xf.std((0, 2, 3)).view(1, 3, 1, 1)
    del xf
    torch.manual_seed(args.seed)
    model = SmallCNN(num_classes, args.widths).to(memory_format=torch.channels_last)
    params = sum(p.numel() for p in model.parameters())
    decay = [p for n, p in model.named_parameters() if p.ndim > 1]
    no_decay = [p for n, p in model.named_parameters() if p.ndim <= 1]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": args.weight_decay},
                             {"params": no_decay, "weight_decay": 0.0}], lr=args.lr)
    steps_per_epoch = math.ceil(x_u8.shape[0] / args.batch_size)
    total = steps_per_epoch * args.epochs
    warm = min(steps_per_epoch, total // 2)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: (s + 1) / warm if s < warm
        else 0.5 * (1 + math.cos(math.pi * (s - warm) / max(total - warm, 1))))
    weights = class_weights(y, num_classes, not args.no_class_weights)
    gen = torch.Generator().manual_seed(args.seed + 2)
    history = []
    start = time.perf_counter()
    for epoch in range(args.epochs):
        model.train()
        t0 = time.perf_counter()
        order = torch.randperm(x_u8.shape[0], generator=gen)
        loss_sum, seen = 0.0, 0
        for i in range(0, order.numel(), args.batch_size):
            idx = order[i:i + args.batch_size]
            if idx.numel() < 2:  # BatchNorm needs more than one sample
                continue
            xb = augment((x_u8[idx].float() / 255 - mean) / std, args.crop_pad, gen)
            xb = xb.contiguous(memory_format=torch.channels_last)
            loss = F.cross_entropy(model(xb), y[idx], weight=weights)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            sched.step()
            loss_sum += float(loss) * idx.numel()
            seen += idx.numel()
        train_s = time.perf_counter() - t0
        entry = {"epoch": epoch + 1, "loss": loss_sum / max(seen, 1),
                 "seconds": round(train_s, 2)}
        if "val" in data:  # monitoring only: the last epoch's weights are reported regardless
            m = evaluate(predict(model, data["val"]["big"], mean, std, 256),
                         data["val"]["y"], num_classes)
            entry.update(val_accuracy=m["accuracy"], val_macro_f1=m["macro_f1"])
        history.append(entry)
        log(f"cnn: epoch {epoch + 1}/{args.epochs}: loss {entry['loss']:.4f}, "
            f"{seen / train_s:.0f} img/s, {train_s:.1f} s"
            + (f", val accuracy {entry['val_accuracy']:.4f}, macro-F1 {entry['val_macro_f1']:.4f}"
               if "val_accuracy" in entry else ""))
    seconds = time.perf_counter() - start
    results = {}
    t0 = time.perf_counter()
    for split in eval_splits(data):
        results[split] = evaluate(predict(model, data[split]["big"], mean, std, 256),
                                  data[split]["y"], num_classes)
    return {
        "input": f"{args.size}x{args.size}x3, normalised with train channel mean/std",
        "architecture": f"{len(args.widths)}x[conv3x3-BN-ReLU-maxpool2] {tuple(args.widths)}, "
                        "GAP, dropout 0.2, linear",
        "parameters": params,
        "augmentation": f"random horizontal flip, random crop (reflect pad {args.crop_pad})",
        "optimizer": f"AdamW lr {args.lr} wd {args.weight_decay}, 1 warm-up epoch + cosine",
        "epochs": args.epochs, "batch_size": args.batch_size,
        "train_seconds": round(seconds, 2),
        "eval_seconds": round(time.perf_counter() - t0, 2),
        "history": history, "splits": results,
    }


# ----------------------------------------------------------------------------------- main

def eval_splits(data):
    return [s for s in ("val", "test") if s in data]


def run_majority(data, num_classes):
    counts = torch.bincount(data["train"]["y"], minlength=num_classes)
    c = int(counts.argmax())
    return {"class": c, "train_seconds": 0.0, "splits": {
        s: evaluate(torch.full_like(data[s]["y"], c), data[s]["y"], num_classes)
        for s in eval_splits(data)}}


def markdown(report, classes):
    models = [("majority", "majority class"), ("linear", "logistic regression, "
              f"{report['linear_size']}px"), ("cnn", f"small CNN, {report['size']}px")]
    out = []
    for split in report["eval_splits"]:
        n = report["models"]["majority"]["splits"][split]["n"]
        out += [f"### {split} ({n} images)", "",
                "| model | accuracy | macro-F1 | train time (s) |", "| --- | ---: | ---: | ---: |"]
        for key, name in models:
            m = report["models"][key]
            s = m["splits"][split]
            out.append(f"| {name} | {s['accuracy']:.3f} | {s['macro_f1']:.3f} | "
                       f"{m['train_seconds']:.1f} |")
        out += ["", "| class | support | majority F1 | linear F1 | CNN F1 |",
                "| --- | ---: | ---: | ---: | ---: |"]
        for i, c in enumerate(classes):
            sup = report["models"]["majority"]["splits"][split]["support"][i]
            f = [report["models"][k]["splits"][split]["f1"][i] for k, _ in models]
            out.append(f"| {c} | {sup} | {f[0]:.3f} | {f[1]:.3f} | {f[2]:.3f} |")
        out.append("")
    return "\n".join(out)


def main():
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    try:
        usable = len(os.sched_getaffinity(0))
    except AttributeError:
        usable = os.cpu_count() or 1
    parser.add_argument("--manifest", required=True, help="make-data manifest.csv")
    parser.add_argument("--out", help="write the JSON report here")
    parser.add_argument("--size", type=int, default=64, help="CNN input side")
    parser.add_argument("--linear-size", type=int, default=32, help="linear model input side")
    parser.add_argument("--resize", choices=("squash", "crop"), default="squash",
                        help="whole image to a square, or short-side resize + centre crop")
    parser.add_argument("--epochs", type=int, default=15, help="CNN epochs")
    parser.add_argument("--batch-size", type=int, default=64, help="CNN batch size")
    parser.add_argument("--widths", type=int, nargs="+", default=[32, 64, 128, 256],
                        help="CNN channels per conv block (each block halves the resolution)")
    parser.add_argument("--lr", type=float, default=3e-3, help="CNN peak learning rate")
    parser.add_argument("--weight-decay", type=float, default=0.05, help="CNN AdamW decay")
    parser.add_argument("--crop-pad", type=int, default=4, help="CNN random-crop padding (px)")
    parser.add_argument("--linear-l2", type=float, nargs="+", default=[1e-2, 1e-1, 1.0],
                        help="L2 strengths tried for the linear model")
    parser.add_argument("--linear-max-iter", type=int, default=1000, help="L-BFGS iterations")
    parser.add_argument("--no-class-weights", action="store_true",
                        help="plain cross-entropy instead of class-weighted")
    parser.add_argument("--skip-cnn", action="store_true", help="majority + linear only")
    parser.add_argument("--threads", type=int, default=usable, help="torch threads")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    if min(args.size, args.linear_size, args.epochs, args.batch_size, args.threads) < 1:
        parser.error("sizes, --epochs, --batch-size and --threads must be >= 1")
    if args.crop_pad < 0 or args.crop_pad >= args.size:
        parser.error("--crop-pad must be in [0, --size)")

    random.seed(args.seed)
    torch.manual_seed(args.seed)
    torch.set_num_threads(args.threads)
    log = lambda msg: print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)
    load_start = os.getloadavg()
    wall = time.perf_counter()

    rows = read_manifest(args.manifest)
    t0 = time.perf_counter()
    splits, skipped = load(rows, args)
    load_seconds = time.perf_counter() - t0
    if "train" not in splits or not eval_splits(splits):
        sys.exit("error: need decodable 'train' rows and 'val' (or 'test') rows")
    classes_file = os.path.join(os.path.dirname(os.path.abspath(args.manifest)), "classes.txt")
    labels = sorted({l for d in splits.values() for l in d["labels"]})
    if os.path.exists(classes_file):  # keep make-data's class order where it is known
        with open(classes_file) as f:
            known = [l.strip() for l in f if l.strip()]
        labels = known + [l for l in labels if l not in known]
    index = {c: i for i, c in enumerate(labels)}
    data = {}
    for s, d in splits.items():
        data[s] = {"big": torch.stack(d["big"]), "small": torch.stack(d["small"]),
                   "y": torch.tensor([index[l] for l in d["labels"]], dtype=torch.long)}
    counts = {s: len(d["labels"]) for s, d in splits.items()}
    log(f"decoded {sum(counts.values())} of {len(rows)} images in {load_seconds:.1f} s "
        f"({counts}); skipped {sum(v['total'] for v in skipped.values())} ({skipped})")

    num_classes = len(labels)
    models = {"majority": run_majority(data, num_classes)}
    models["linear"] = run_linear(data, num_classes, args, log)
    if not args.skip_cnn:
        models["cnn"] = run_cnn(data, num_classes, args, log)

    report = {
        "manifest": os.path.abspath(args.manifest),
        "classes": labels, "rows": len(rows), "decoded": counts, "skipped": skipped,
        "size": args.size, "linear_size": args.linear_size, "resize": args.resize,
        "class_weighted_loss": not args.no_class_weights, "seed": args.seed,
        "threads": args.threads, "load_seconds": round(load_seconds, 2),
        "eval_splits": eval_splits(data), "models": models,
        "wall_seconds": round(time.perf_counter() - wall, 2),
        "loadavg_start": load_start, "loadavg_end": os.getloadavg(),
        "versions": {"python": platform.python_version(), "torch": torch.__version__,
                     "pillow": PIL.__version__},
    }
    if not args.skip_cnn:
        print(markdown(report, labels))
    else:
        for s in report["eval_splits"]:
            for k in ("majority", "linear"):
                m = models[k]["splits"][s]
                print(f"{s} {k}: accuracy {m['accuracy']:.3f}, macro-F1 {m['macro_f1']:.3f}")
    print(f"wall {report['wall_seconds']:.0f} s, threads {args.threads}, "
          f"load average {load_start[0]:.2f} -> {report['loadavg_end'][0]:.2f}")
    if args.out:
        os.makedirs(os.path.dirname(os.path.abspath(args.out)) or ".", exist_ok=True)
        with open(args.out, "w") as f:
            json.dump(report, f, indent=1)
        log(f"wrote {args.out}")


if __name__ == "__main__":
    main()
