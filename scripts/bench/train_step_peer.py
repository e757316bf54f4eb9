#!/usr/bin/env python3
"""The Python PyTorch peer of `shoplens bench-train`: the same training step (forward,
cross-entropy, backward, AdamW/SGD with no decay on biases and norms) on the same synthetic
shapes, model, dtype and thread count, eager mode, on the GPU when there is one (like bench-train;
--device picks). Prints one JSON line like bench-train's.

Run with the Python whose torch the shoplens binary links (Debian's /usr/bin/python3 for the 1.13
build, the venv of scripts/venv.sh for the 2.x one): the same kernels."""
import argparse
import json
import os
import sys

import torch
import torch.nn.functional as F
import torchvision

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from difficulty import SmallCNN  # noqa: E402  the baseline CNN, defined once

from peer_timing import time_steps, time_window


def build(name, num_classes, image_size):
    if name == "small_cnn":
        return SmallCNN(num_classes)
    if name in ("resnet18", "resnet34", "resnet50"):
        return getattr(torchvision.models, name)(num_classes=num_classes)
    vit = {"vit_tiny": (192, 3), "vit_small": (384, 6), "vit_base": (768, 12)}
    if name in vit:
        dim, heads = vit[name]
        return torchvision.models.VisionTransformer(image_size=image_size, patch_size=16, num_layers=12,
                                                   num_heads=heads, hidden_dim=dim, mlp_dim=4 * dim,
                                                   num_classes=num_classes)
    raise SystemExit(f"unknown model {name}")


def param_groups(model, weight_decay):
    decay, no_decay = [], []
    for name, p in model.named_parameters():
        (no_decay if p.ndim <= 1 or name.endswith(("cls_token", "pos_embed", "class_token", "pos_embedding"))
         else decay).append(p)
    return [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--model", default="small_cnn")
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--image-size", type=int, default=64)
    ap.add_argument("--num-classes", type=int, default=12)
    ap.add_argument("--precision", choices=["fp32", "bf16"], default="fp32")
    ap.add_argument("--channels-last", action="store_true")
    ap.add_argument("--optimizer", choices=["adamw", "sgd"], default="adamw")
    ap.add_argument("--optimizer-impl", choices=["auto", "fused", "foreach", "reference"], default="auto",
                    help="auto: PyTorch's default (foreach on CUDA); reference: foreach=False, the per-parameter "
                         "loop (default: %(default)s)")
    ap.add_argument("--timing", choices=["step", "window"], default="step",
                    help="step: each step reads its loss and is timed alone (median); window: no read, the steps "
                         "timed as one window until the device finished (mean), as bench-train (default: %(default)s)")
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--warmup-steps", "--warmup", dest="warmup", type=int, default=3)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--device", choices=["auto", "cpu", "cuda"], default="auto",
                    help="auto: cuda when available, as bench-train does (default: %(default)s)")
    a = ap.parse_args()
    device = torch.device("cuda" if a.device == "cuda" or (a.device == "auto" and torch.cuda.is_available()) else "cpu")

    threads = a.threads or len(os.sched_getaffinity(0))
    torch.set_num_threads(threads)  # the C++ side sets its thread count explicitly too
    torch.manual_seed(a.seed)
    model = build(a.model, a.num_classes, a.image_size)
    fmt = torch.channels_last if a.channels_last else torch.contiguous_format
    model = model.to(device=device, memory_format=fmt)
    impl = {"auto": {}, "fused": {"fused": True}, "foreach": {"foreach": True}, "reference": {"foreach": False}}
    if a.optimizer == "adamw":
        opt = torch.optim.AdamW(param_groups(model, 0.05), lr=1e-3, betas=(0.9, 0.999), eps=1e-8,
                                **impl[a.optimizer_impl])
    else:
        opt = torch.optim.SGD(param_groups(model, 0.05), lr=1e-3, momentum=0.9, **impl[a.optimizer_impl])
    images = torch.randn(a.batch_size, 3, a.image_size, a.image_size, device=device).contiguous(memory_format=fmt)
    labels = torch.randint(a.num_classes, (a.batch_size,), device=device)
    model.train()

    def step():
        opt.zero_grad(set_to_none=True)
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=a.precision == "bf16"):
            logits = model(images)
        loss = F.cross_entropy(logits.float(), labels)
        loss.backward()
        opt.step()
        return loss

    record = {"implementation": "pytorch", "model": a.model, "batch_size": a.batch_size,
              "image_size": a.image_size, "precision": a.precision, "channels_last": a.channels_last,
              "optimizer": a.optimizer, "optimizer_impl": a.optimizer_impl, "threads": threads, "steps": a.steps,
              "timing": a.timing, "device": device.type, "torch": torch.__version__}
    if a.timing == "step":  # reads the loss back: on CUDA the step has finished
        times, median = time_steps(lambda: step().item(), a.warmup, a.steps)
        record.update(median_step_ms=median * 1e3, images_per_second=a.batch_size / median, step_seconds=times)
    else:
        sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
        window = time_window(step, a.warmup, a.steps, sync)
        record.update(mean_step_ms=window * 1e3 / a.steps, window_seconds=window,
                      images_per_second=a.batch_size * a.steps / window, step_seconds=[])
    print(json.dumps(record))


if __name__ == "__main__":
    main()
