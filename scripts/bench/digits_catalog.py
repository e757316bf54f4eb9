#!/usr/bin/python3
"""A real public image dataset as a ShopLens catalog, for benchmarks on a machine that reaches no
dataset host: scikit-learn's copy of the UCI optical handwritten digits (1,797 scans of digits
0-9 by 43 writers, 8x8 pixels, 17 grey levels; bundled with scikit-learn, nothing is downloaded).

Writes OUT/images/<digit>/<id>.png (the 8x8 scans as 8-bit greyscale PNG, grey levels scaled
0-16 -> 0-255, nothing else changed) and OUT/manifest.csv (id, path, label, split), a seeded
stratified 80/20 train/test split: no validation column, so `shoplens prepare` carves one from
train, as for an ImageFolder with only train/ and test/.

    /usr/bin/python3 scripts/bench/digits_catalog.py --out DIR/catalog [--seed 7]
Then DIR works with scripts/bench/recipe_vs_python.sh --dir DIR (recipe.sh prepares its shards).
"""
import argparse
import csv
import os
import random

import numpy as np
from PIL import Image
from sklearn.datasets import load_digits


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--seed", type=int, default=7)
    args = ap.parse_args()
    digits = load_digits()
    rng = random.Random(args.seed)
    by_label = {}
    for i, label in enumerate(digits.target):
        by_label.setdefault(int(label), []).append(i)
    split = {}
    for label, indices in by_label.items():
        rng.shuffle(indices)
        test = len(indices) // 5
        for k, i in enumerate(indices):
            split[i] = "test" if k < test else "train"
    rows = []
    for i, (pixels, label) in enumerate(zip(digits.images, digits.target)):
        rel = f"images/{label}/digit_{i:04d}.png"
        os.makedirs(os.path.join(args.out, "images", str(label)), exist_ok=True)
        Image.fromarray(np.round(pixels * 255.0 / 16.0).astype(np.uint8), mode="L").save(os.path.join(args.out, rel))
        rows.append({"id": f"digit_{i:04d}", "path": rel, "label": str(label), "split": split[i]})
    with open(os.path.join(args.out, "manifest.csv"), "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=["id", "path", "label", "split"])
        writer.writeheader()
        writer.writerows(rows)
    print(f"{len(rows)} images, {sum(r['split'] == 'train' for r in rows)} train / "
          f"{sum(r['split'] == 'test' for r in rows)} test, into {args.out}")


if __name__ == "__main__":
    main()
