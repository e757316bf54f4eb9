#!/usr/bin/env python3
"""The Python peer of `scripts/bench/recipe.sh`'s baseline: the same recipe written the way a
PyTorch user writes it with torchvision transforms and a timm-style training loop, on the same
samples, to compare time-to-accuracy with `shoplens train`.

Same samples: the prepared shards' records.csv names every kept image and its split (train, the
validation split prepare carved, test), and the images are read from the catalog folder with
PIL, as torchvision's ImageFolder would. Same recipe as recipe.sh's base.json: the small CNN of
scripts/bench/difficulty.py (shoplens' small_cnn layer for layer, dropout 0.2), 32 px,
RandomResizedCrop(scale 0.6-1) + horizontal flip for training, Resize(36) + CenterCrop(32) for
evaluation (eval_crop_pct 0.875), ImageNet mean/std; AdamW lr 0.003, weight decay 0.05 (none on
biases and norms), cosine with one warm-up epoch stepped per optimizer step, batch 64 with the
last partial batch dropped, class-weighted cross-entropy (n / (classes present x count), as
train.class_balance=weighted_loss). Threads: torch.set_num_threads(--threads) in the main process
and one DataLoader worker process (shoplens --threads 1 runs one compute thread and one loader
thread).

Prints one JSON line: per epoch the elapsed training seconds (evaluation excluded, as in
shoplens' train_seconds) and validation macro-F1, the best validation macro-F1, the test
macro-F1 of the best epoch's weights, and the total train seconds.

Run with the Python whose torch the shoplens binary links (Debian's /usr/bin/python3 for the
1.13 build):
    /usr/bin/python3 scripts/bench/recipe_peer.py --catalog DIR/catalog --shards DIR/shards --seed 1
"""
import argparse
import copy
import csv
import json
import math
import os
import sys
import time

import torch
import torch.nn.functional as F
from PIL import Image
from torch.utils.data import DataLoader, Dataset
from torchvision import transforms

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from difficulty import SmallCNN  # noqa: E402  the baseline CNN, defined once

MEAN, STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)


def read_records(shards):
    with open(os.path.join(shards, "records.csv"), newline="") as f:
        return list(csv.DictReader(f))


class Images(Dataset):
    def __init__(self, catalog, rows, classes, transform):
        self.items = [(os.path.join(catalog, r["path"]), classes.index(r["label"])) for r in rows]
        self.transform = transform

    def __len__(self):
        return len(self.items)

    def __getitem__(self, i):
        path, label = self.items[i]
        with Image.open(path) as im:
            return self.transform(im.convert("RGB")), label


def macro_f1(labels, predictions, num_classes):
    """scikit-learn's f1_score(average="macro"): over the classes present in either list."""
    present = set(labels) | set(predictions)
    total = 0.0
    for c in present:
        tp = sum(1 for y, p in zip(labels, predictions) if y == c and p == c)
        fp = sum(1 for y, p in zip(labels, predictions) if y != c and p == c)
        fn = sum(1 for y, p in zip(labels, predictions) if y == c and p != c)
        total += 2 * tp / (2 * tp + fp + fn) if tp + fp + fn else 0.0
    return total / len(present)


def evaluate(model, loader, num_classes):
    model.eval()
    labels, predictions = [], []
    with torch.no_grad():
        for x, y in loader:
            predictions += model(x).argmax(1).tolist()
            labels += y.tolist()
    model.train()
    return macro_f1(labels, predictions, num_classes)


def param_groups(model, weight_decay):
    decay = [p for p in model.parameters() if p.ndim > 1]
    no_decay = [p for p in model.parameters() if p.ndim <= 1]
    return [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--catalog", required=True)
    ap.add_argument("--shards", required=True)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--epochs", type=int, default=8)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--workers", type=int, default=1)
    args = ap.parse_args()

    torch.manual_seed(args.seed)
    torch.set_num_threads(args.threads)
    records = read_records(args.shards)
    classes = json.load(open(os.path.join(args.shards, "dataset.json")))["classes"]
    split = {s: [r for r in records if r["split"] == s] for s in ("train", "val", "test")}
    train_tf = transforms.Compose([transforms.RandomResizedCrop(32, scale=(0.6, 1.0)), transforms.RandomHorizontalFlip(),
                                   transforms.ToTensor(), transforms.Normalize(MEAN, STD)])
    eval_tf = transforms.Compose([transforms.Resize(36), transforms.CenterCrop(32), transforms.ToTensor(),
                                  transforms.Normalize(MEAN, STD)])
    loader = DataLoader(Images(args.catalog, split["train"], classes, train_tf), batch_size=64, shuffle=True,
                        drop_last=True, num_workers=args.workers, persistent_workers=args.workers > 0)
    val = DataLoader(Images(args.catalog, split["val"], classes, eval_tf), batch_size=64, num_workers=args.workers)
    test = DataLoader(Images(args.catalog, split["test"], classes, eval_tf), batch_size=64, num_workers=args.workers)

    counts = [sum(1 for r in split["train"] if r["label"] == c) for c in classes]
    n, k, present = len(split["train"]), len(classes), sum(1 for c in counts if c)
    weights = torch.tensor([n / (present * c) if c else 0.0 for c in counts])
    model = SmallCNN(k)
    optimizer = torch.optim.AdamW(param_groups(model, 0.05), lr=0.003)
    steps_per_epoch = len(loader)
    total, warmup = args.epochs * steps_per_epoch, steps_per_epoch

    def lr_factor(step):  # linear warm-up from 1% over one epoch, then cosine to 0
        if step < warmup:
            return 0.01 + 0.99 * step / warmup
        return 0.5 * (1 + math.cos(math.pi * (step - warmup) / max(1, total - warmup)))

    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lr_factor)
    history, best, best_state, train_seconds = [], -1.0, None, 0.0
    for epoch in range(args.epochs):
        start = time.perf_counter()
        for x, y in loader:
            loss = F.cross_entropy(model(x), y, weight=weights)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            schedule.step()
        train_seconds += time.perf_counter() - start
        f1 = evaluate(model, val, k)
        history.append({"epoch": epoch + 1, "train_seconds": round(train_seconds, 3), "val_macro_f1": round(f1, 4)})
        if f1 > best:
            best, best_state = f1, copy.deepcopy(model.state_dict())
    model.load_state_dict(best_state)
    print(json.dumps({"peer": "torchvision", "seed": args.seed, "threads": args.threads, "workers": args.workers,
                      "torch": torch.__version__, "train_samples": n, "epochs": history, "best_val_macro_f1": round(best, 4),
                      "test_macro_f1": round(evaluate(model, test, k), 4), "train_seconds": round(train_seconds, 3)}))


if __name__ == "__main__":
    main()
