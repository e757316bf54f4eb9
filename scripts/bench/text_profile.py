#!/usr/bin/env python3
"""Per-op CPU profile of the text peer's training step (text_step.py's TextEncoderNet, text_tiny,
batch 16 x 256 tokens, AdamW): the table behind docs/PERFORMANCE.md's OpenMP/OpenBLAS finding.

Usage: text_profile.py THREADS        (run it under OMP_WAIT_POLICY=PASSIVE or GOMP_SPINCOUNT=0 to compare)
Prints torch.profiler's table of the 12 ops with the most self CPU time over 3 steps, after 3 warm-up steps.
"""
import sys

import torch
import torch.nn.functional as F
import torch.profiler as profiler

from text_step import TextEncoderNet


def main():
    threads = int(sys.argv[1]) if len(sys.argv) > 1 else 1
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    model = TextEncoderNet(8192, 256, 128, 2, 4, 2)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    ids = torch.randint(2, 8192, (16, 256))
    mask = torch.ones(16, 256, dtype=torch.bool)
    labels = torch.randint(0, 2, (16,))

    def step():
        opt.zero_grad(set_to_none=True)
        F.cross_entropy(model(ids, mask), labels).backward()
        opt.step()

    for _ in range(3):
        step()
    with profiler.profile(activities=[profiler.ProfilerActivity.CPU]) as prof:
        for _ in range(3):
            step()
    print(f"threads {threads}")
    print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=12))


if __name__ == "__main__":
    main()
