#!/usr/bin/python3
"""The Python PyTorch peer of `shoplens score`: the same exported model (loaded by name into
torchvision / SmallCNN), the same files, batch, preprocessing and thread counts, in eager mode.

    score_peer.py --model MODEL_DIR --input MANIFEST.csv --batch-size B --workers W --threads T
                  [--precision fp32|bf16] [--device auto|cpu|cuda]

End to end: a DataLoader with W worker processes decodes with PIL and applies torchvision's
Resize(round(S/0.875)) + CenterCrop(S) + ToTensor + Normalize; the main process runs the model
under inference_mode (bf16: under autocast; channels-last when the model card says so; on CUDA
the batches are copied from pinned memory).
Compute only: the model on one batch of random input, repeated. Prints one JSON line: images/s end
to end and compute only (3 warm-up passes, median of 7, as shoplens measures it), per-batch compute
latency p50/p95/p99 within the end-to-end run (on CUDA: copy to the device through the
probabilities read back, as shoplens times a batch).
"""

import argparse
import csv
import json
import os
import statistics
import sys
import time

import torch
from PIL import Image
from torch.utils.data import DataLoader, Dataset
from torchvision import transforms

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
from load_shoplens_model import load  # noqa: E402
from peer_timing import percentile  # noqa: E402


class Rows(Dataset):
    def __init__(self, manifest, transform):
        root = os.path.dirname(os.path.abspath(manifest))
        with open(manifest) as f:
            self.paths = [os.path.join(root, r["path"]) for r in csv.DictReader(f)]
        self.transform = transform

    def __len__(self):
        return len(self.paths)

    def __getitem__(self, i):
        try:
            with Image.open(self.paths[i]) as im:
                return self.transform(im.convert("RGB")), True
        except Exception:  # an error row, like shoplens: never a failed job
            size = self.transform.transforms[1].size
            return torch.zeros(3, size[0], size[1]), False


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--input", required=True)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--precision", choices=["fp32", "bf16"], default="fp32", help="default: %(default)s")
    ap.add_argument("--device", choices=["auto", "cpu", "cuda"], default="auto",
                    help="auto: cuda when available, as shoplens score (default: %(default)s)")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    device = torch.device("cuda" if a.device == "cuda" or (a.device == "auto" and torch.cuda.is_available()) else "cpu")
    cuda = device.type == "cuda"
    model, card = load(a.model)
    fmt = torch.channels_last if card["architecture"].get("channels_last") else torch.contiguous_format
    model = model.to(device=device, memory_format=fmt)

    def forward(x):
        x = x.contiguous(memory_format=fmt)
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=a.precision == "bf16"):
            return torch.softmax(model(x).float(), 1)

    def sync():
        if cuda:
            torch.cuda.synchronize()

    pre = card["preprocessing"]
    transform = transforms.Compose([
        transforms.Resize(pre["resize_short_side"]), transforms.CenterCrop(pre["center_crop"]),
        transforms.ToTensor(), transforms.Normalize(pre["mean"], pre["std"])])
    # Compute alone first, with shoplens's protocol: 3 warm-up passes, the median of 7.
    size = card["architecture"]["image_size"]
    x = torch.randn(a.batch_size, 3, size, size, device=device)
    with torch.inference_mode():
        for _ in range(3):
            forward(x)
        sync()
        times = []
        for _ in range(7):
            t0 = time.perf_counter()
            forward(x)
            sync()
            times.append(time.perf_counter() - t0)
    compute = a.batch_size / statistics.median(times)

    loader = DataLoader(Rows(a.input, transform), batch_size=a.batch_size, num_workers=a.workers,
                        shuffle=False, drop_last=False, pin_memory=cuda)
    latencies, images = [], 0
    start = time.perf_counter()
    with torch.inference_mode():
        for batch, ok in loader:
            batch = batch[ok]
            if len(batch) == 0:
                continue
            t0 = time.perf_counter()
            probs = forward(batch.to(device, non_blocking=True))
            probs.argmax(1).tolist()  # reads the result back: the batch has finished
            latencies.append((time.perf_counter() - t0) * 1e3)
            images += len(batch)
    wall = time.perf_counter() - start
    print(json.dumps({"impl": "pytorch", "torch": torch.__version__, "model": card["architecture"]["name"],
                      "batch_size": a.batch_size, "workers": a.workers, "threads": a.threads, "images": images,
                      "device": device.type, "precision": a.precision,
                      "images_per_second": images / wall, "compute_images_per_second": compute,
                      "p50_ms": percentile(latencies, 0.5), "p95_ms": percentile(latencies, 0.95), "p99_ms": percentile(latencies, 0.99)}))


if __name__ == "__main__":
    main()
