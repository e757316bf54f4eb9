#!/usr/bin/env python3
"""PyTorch Lightning's batch-size finder on the torchvision peer of a ShopLens model: the reference
`shoplens find-batch` is compared with on a GPU (scripts/gpu/prove.sh, call 2).

Runs `Tuner(trainer).scale_batch_size(mode=...)` (Lightning's BatchSizeFinder) on the same model
(torchvision's ResNet / ViT, or the small CNN), image size, classes, precision (Lightning's
"bf16-mixed" autocast) and memory format as find-batch, on synthetic images, after limiting the
CUDA caching allocator to the same budget with torch.cuda.set_per_process_memory_fraction (what
find-batch's CUDA probe does). Each trial is `steps_per_trial` training steps with AdamW; a CUDA
out-of-memory error makes Lightning halve (power) or bisect (binsearch).

Prints one JSON line: the batch Lightning found, every trial (batch, ok or out of memory, seconds),
the trial count, the total seconds, the peak memory the allocator saw, and the versions. On a
machine without CUDA the same code runs on the CPU (the rehearsal): no budget applies there and
no trial runs out of memory, so it stops after --max-trials.

    lightning_batch_finder.py --model resnet50 --image-size 224 --precision bf16 --channels-last \\
        --memory-budget 24GiB --mode binsearch
"""
import argparse
import json
import os
import re
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bench"))
from train_step_peer import build, param_groups  # noqa: E402  the same torchvision peers as bench-train


def parse_bytes(text):
    m = re.fullmatch(r"\s*([0-9.]+)\s*([KMGT]i?B?|B?)\s*", text, re.I)
    if not m:
        raise SystemExit(f"--memory-budget: cannot read '{text}' (e.g. 24GiB, 512MiB)")
    unit = m.group(2).upper().rstrip("B").rstrip("I")
    return int(float(m.group(1)) * 1024 ** " KMGT".index(unit or " "))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="resnet50", help="a bench-train model name (default: %(default)s)")
    ap.add_argument("--image-size", type=int, default=224, help="default: %(default)s")
    ap.add_argument("--num-classes", type=int, default=12, help="default: %(default)s")
    ap.add_argument("--precision", choices=["fp32", "bf16"], default="bf16", help="default: %(default)s")
    ap.add_argument("--channels-last", action="store_true", help="model and input channels-last (default: off)")
    ap.add_argument("--memory-budget", default="24GiB",
                    help="CUDA: the caching allocator's limit, as a fraction of the card (default: %(default)s)")
    ap.add_argument("--mode", choices=["binsearch", "power"], default="binsearch", help="default: %(default)s")
    ap.add_argument("--init-val", type=int, default=2, help="first batch tried (Lightning's default: %(default)s)")
    ap.add_argument("--max-trials", type=int, default=25, help="Lightning's default: %(default)s")
    ap.add_argument("--steps-per-trial", type=int, default=3, help="Lightning's default: %(default)s")
    ap.add_argument("--device", choices=["auto", "cpu", "cuda"], default="auto", help="default: %(default)s")
    ap.add_argument("--threads", type=int, default=0, help="CPU threads (0: all usable cores; default: %(default)s)")
    ap.add_argument("--out", help="also write the JSON line to this file (default: stdout only)")
    a = ap.parse_args()

    import pytorch_lightning as pl  # noqa: E402  imported late: --help works without it
    from pytorch_lightning.tuner import Tuner

    cuda = a.device == "cuda" or (a.device == "auto" and torch.cuda.is_available())
    torch.set_num_threads(a.threads or len(os.sched_getaffinity(0)))
    budget = parse_bytes(a.memory_budget)
    fraction = None
    if cuda:
        total = torch.cuda.get_device_properties(0).total_memory
        fraction = min(1.0, budget / total)
        torch.cuda.set_per_process_memory_fraction(fraction, 0)
    fmt = torch.channels_last if a.channels_last else torch.contiguous_format
    trials = []

    class Images(torch.utils.data.Dataset):
        """One fixed random image and label per index: the loader costs a copy, nothing else."""
        image = torch.randn(3, a.image_size, a.image_size)

        def __len__(self):
            return 1 << 30

        def __getitem__(self, i):
            return self.image, i % a.num_classes

    class Peer(pl.LightningModule):
        def __init__(self):
            super().__init__()
            self.batch_size = a.init_val  # the attribute scale_batch_size changes
            self.net = build(a.model, a.num_classes, a.image_size).to(memory_format=fmt)

        def train_dataloader(self):
            return torch.utils.data.DataLoader(Images(), batch_size=self.batch_size, num_workers=0,
                                               pin_memory=cuda)

        def on_train_start(self):
            trials.append({"batch": self.batch_size, "ok": False, "start": time.perf_counter()})

        def on_train_end(self):
            trials[-1]["ok"] = True

        def training_step(self, batch, _):
            x, y = batch
            return F.cross_entropy(self.net(x.contiguous(memory_format=fmt)).float(), y)

        def configure_optimizers(self):
            return torch.optim.AdamW(param_groups(self.net, 0.05), lr=1e-3)

    trainer = pl.Trainer(accelerator="gpu" if cuda else "cpu", devices=1, max_epochs=1,
                         precision="bf16-mixed" if a.precision == "bf16" else "32-true", logger=False,
                         enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
                         default_root_dir=os.environ.get("TMPDIR", "/tmp"))
    model = Peer()
    start = time.perf_counter()
    found = Tuner(trainer).scale_batch_size(model, mode=a.mode, init_val=a.init_val, max_trials=a.max_trials,
                                            steps_per_trial=a.steps_per_trial)
    seconds = time.perf_counter() - start
    ends = [t["start"] for t in trials[1:]] + [start + seconds]
    for t, end in zip(trials, ends):
        t["seconds"] = round(end - t.pop("start"), 3)  # to the next trial's start: includes Lightning's reset
    line = json.dumps({
        "implementation": "lightning", "strategy": f"lightning-{a.mode}", "model": a.model,
        "image_size": a.image_size, "precision": a.precision, "channels_last": a.channels_last,
        "device": "cuda" if cuda else "cpu", "memory_budget": a.memory_budget, "memory_fraction": fraction,
        "micro_batch": found,  # Lightning's answer, after its margin
        "largest_ok": max([t["batch"] for t in trials if t["ok"]], default=None),
        "trials": trials, "probes": len(trials), "ooms": sum(not t["ok"] for t in trials),
        "total_seconds": round(seconds, 2),
        "peak_allocated_bytes": torch.cuda.max_memory_allocated() if cuda else None,
        "peak_reserved_bytes": torch.cuda.max_memory_reserved() if cuda else None,
        "steps_per_trial": a.steps_per_trial, "max_trials": a.max_trials, "init_val": a.init_val,
        "torch": torch.__version__, "lightning": pl.__version__,
        "device_name": torch.cuda.get_device_name(0) if cuda else None})
    print(line)
    if a.out:
        with open(a.out, "w") as f:
            f.write(line + "\n")


if __name__ == "__main__":
    main()
