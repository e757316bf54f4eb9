#!/usr/bin/python3
"""The torchvision peer of shoplens' training input pipeline, timed in images per second.

Per file: PIL decode (torchvision's default loader: open + convert("RGB"), no reduced-size
draft decoding), RandomResizedCrop(size), RandomHorizontalFlip(), ColorJitter(0.4, 0.4, 0.4,
0.1), ToTensor(), Normalize(ImageNet mean/std): the same work `shoplens` does per sample with
its default augmentation config, so the two figures compare like for like. `--decode-only`
times decode + Resize(size) (short side, PIL's antialiased bilinear) for reference.

Threads: `--threads N` is matched the way a PyTorch user would run N loader workers.
N == 1 runs the transforms in the main process (DataLoader num_workers=0): one core doing all the
work, like one shoplens worker thread; a separate worker process would only add IPC. N > 1 uses
DataLoader(num_workers=N): N worker processes (each with torch's one intra-op thread, which the
DataLoader sets) is the Python equivalent of N worker threads, since the GIL rules out threads;
the main process only collates. torch.set_num_threads(N) is set in the main process either way.
Batches hold 32 images, as in the default training config.

Files PIL cannot open or decode are skipped, counted once each ("skipped") and left out of
"images". The clock runs from the first epoch's start (worker start-up included) to the last
batch. Output: one JSON line on stdout; warnings go to stderr.

Run with Debian's interpreter (/usr/bin/python3), which has python3-torch and
python3-torchvision:
    /usr/bin/python3 scripts/bench/torchvision_pipeline.py --manifest data/manifest.csv --threads 2
"""

import argparse
import csv
import json
import os
import sys
import time

import PIL
import torch
import torchvision
from PIL import Image
from torch.utils.data import DataLoader, Dataset
from torchvision import transforms

MEAN = (0.485, 0.456, 0.406)
STD = (0.229, 0.224, 0.225)
BATCH_SIZE = 32


def read_manifest(path, split):
    """Paths from a CSV with a `path` column, relative to the manifest's folder."""
    folder = os.path.dirname(os.path.abspath(path))
    with open(path, newline="") as f:
        rows = csv.DictReader(f)
        if rows.fieldnames is None or "path" not in rows.fieldnames:
            sys.exit(f"error: {path}: no 'path' column in the header")
        if split and "split" not in rows.fieldnames:
            sys.exit(f"error: {path}: --split given but the manifest has no 'split' column")
        return [os.path.join(folder, row["path"]) for row in rows
                if row["path"] and (not split or row.get("split") == split)]


def build_transform(size, decode_only):
    if decode_only:
        return transforms.Resize(size)
    return transforms.Compose([
        transforms.RandomResizedCrop(size),
        transforms.RandomHorizontalFlip(),
        transforms.ColorJitter(0.4, 0.4, 0.4, 0.1),
        transforms.ToTensor(),
        transforms.Normalize(MEAN, STD),
    ])


class Files(Dataset):
    """Returns (index, tensor) or (index, None) when PIL cannot read the file."""

    def __init__(self, paths, transform, decode_only):
        self.paths = paths
        self.transform = transform
        self.decode_only = decode_only

    def __len__(self):
        return len(self.paths)

    def __getitem__(self, index):
        try:
            with open(self.paths[index], "rb") as f:
                img = Image.open(f).convert("RGB")
        except Exception:  # truncated, empty, not an image, unreadable: all count as skipped
            return index, None
        out = self.transform(img)
        # Decode-only sends back a token, so no pixels cross the process boundary.
        return index, (torch.zeros(1) if self.decode_only else out)


def collate(items):
    good = [x for _, x in items if x is not None]
    failed = [i for i, x in items if x is None]
    return (torch.stack(good) if good else None), failed


def run(paths, args):
    torch.manual_seed(args.seed)
    torch.set_num_threads(args.threads)
    workers = 0 if args.threads == 1 else args.threads
    dataset = Files(paths, build_transform(args.image_size, args.decode_only), args.decode_only)
    loader = DataLoader(dataset, batch_size=BATCH_SIZE, shuffle=False, num_workers=workers,
                        collate_fn=collate, persistent_workers=workers > 0)
    images, skipped = 0, set()
    start = time.perf_counter()
    for _ in range(args.epochs):
        for batch, failed in loader:
            images += 0 if batch is None else batch.shape[0]
            skipped.update(failed)
    seconds = time.perf_counter() - start
    return images, seconds, len(skipped), workers


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--manifest", help="CSV with a 'path' column (relative to its folder)")
    source.add_argument("--files", nargs="+", help="image files")
    parser.add_argument("--split", help="only manifest rows with this 'split' value")
    parser.add_argument("--threads", type=int, default=1, help="worker count (see the module docstring)")
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--limit", type=int, default=0, help="use only the first N files (0: all)")
    parser.add_argument("--image-size", type=int, default=224)
    parser.add_argument("--decode-only", action="store_true", help="time decode + Resize only")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    if args.threads < 1 or args.epochs < 1 or args.limit < 0 or args.image_size < 1:
        parser.error("--threads, --epochs and --image-size must be >= 1, --limit >= 0")

    paths = read_manifest(args.manifest, args.split) if args.manifest else list(args.files)
    if args.limit:
        paths = paths[:args.limit]
    if not paths:
        sys.exit("error: no image files to time")

    images, seconds, skipped, workers = run(paths, args)
    if skipped:
        print(f"warning: skipped {skipped} of {len(paths)} files that PIL cannot read", file=sys.stderr)
    print(json.dumps({
        "images": images,
        "seconds": round(seconds, 4),
        "images_per_s": round(images / seconds, 2) if seconds > 0 else 0.0,
        "threads": args.threads,
        "num_workers": workers,
        "batch_size": BATCH_SIZE,
        "epochs": args.epochs,
        "skipped": skipped,
        "mode": "decode-only" if args.decode_only else "full",
        "image_size": args.image_size,
        "torch": torch.__version__,
        "torchvision": torchvision.__version__,
        "pillow": PIL.__version__,
    }))


if __name__ == "__main__":
    main()
