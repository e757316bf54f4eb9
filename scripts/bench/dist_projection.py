#!/usr/bin/env python3
"""Projects data-parallel speedup to 8 and 32 GPUs from a per-GPU step time, the gradient bytes
all-reduced per step and interconnect bus bandwidths (docs/DISTRIBUTED.md explains the model).

Ring all-reduce time of B bytes over N ranks: alpha * 2(N-1) + B * 2(N-1)/N / busbw (nccl-tests'
definition of bus bandwidth). Buckets are all-reduced while backward runs; what is exposed is the
last bucket plus whatever of the others does not fit inside the backward pass. Stragglers: the
step waits for the slowest rank, about mean + sigma * sqrt(2 ln N) for step-time jitter sigma.

Usage: dist_projection.py [--step-seconds S --gradient-bytes B --name NAME] [--bucket-mb 25]
       [--jitter 0.02] [--backward-share 0.66] [--json]
Without --step-seconds it prints the documented scenarios (anchors: published A100 figures for ResNet-50 AMP).
"""
import argparse
import json
import math

# Interconnects: (ranks per node, intra-node busbw GB/s, inter-node busbw GB/s, per-hop latency s)
NVLINK_A100 = dict(per_node=8, intra=200e9, inter=90e9, alpha=5e-6)



def text_base_step():
    """The text workload on the seed's A100 (no measurement exists): text_base (dim 512, 8 pre-norm
    layers, MLP 4x) at batch 32 x 2048 tokens, vocabulary 32,768 (an assumption; the seed's
    tokenizer is not named). Parameters: 8 (12 d^2 + 13 d) + (V + L) d + 2 d. FLOPs per sequence,
    forward + backward: 6 x dense parameters x L, plus attention 12 L^2 d per layer (QK^T and AV,
    2 L^2 d each, x3 for backward). At 40% of the A100's 312 bf16 TFLOP/s."""
    d, layers, vocab, length, batch = 512, 8, 32768, 2048, 32
    dense = layers * (12 * d * d + 13 * d)
    params = dense + (vocab + length) * d + 2 * d
    flops = batch * (6 * dense * length + layers * 12 * length * length * d)
    return flops / (0.40 * 312e12), params * 4


# name, per-GPU step seconds, gradient bytes, source of the step time
SCENARIOS = [
    # DeepLearningExamples ResNet-50 AMP on A100: 2,470 img/s at 256/GPU -> 0.1036 s per step;
    # 25.56 M parameters, fp32 gradients (as DDP all-reduces them) = 102.2 MB.
    ("resnet50 A100 AMP b256", 256 / 2470, 25_557_032 * 4, "anchor: DeepLearningExamples 2,470 img/s"),
    # timm RTX 3090 AMP: ViT-B/16 393 img/s at 192; 86.6 M parameters = 346 MB of gradients.
    ("vit_base 3090-class AMP b192", 192 / 393, 86_567_656 * 4, "anchor: timm benchmark 393 img/s"),
    # The small CNN: 391,980 parameters (1,567,920 gradient bytes measured by the reducer). Its
    # GPU step time is not measured (no GPU here); 5 ms at batch 256 is an assumption to be
    # replaced by `shoplens bench-train` on the runner.
    ("small_cnn (assumed 5 ms/step) b256", 0.005, 1_567_920, "assumption, to be measured"),
    ("text_base L2048 b32 (FLOP estimate)",) + text_base_step() + ("estimate: 40% MFU on A100 bf16, see text_base_step()",),
]


def allreduce_seconds(nbytes, n, net):
    if n <= 1:
        return 0.0
    busbw = net["intra"] if n <= net["per_node"] else net["inter"]
    return net["alpha"] * 2 * (n - 1) + nbytes * 2 * (n - 1) / n / busbw


def project(step_s, grad_bytes, n, net, bucket_bytes, jitter, backward_share):
    buckets = max(1, math.ceil(grad_bytes / bucket_bytes))
    last = grad_bytes - (buckets - 1) * bucket_bytes
    t_last = allreduce_seconds(last, n, net)
    t_rest = sum(allreduce_seconds(bucket_bytes, n, net) for _ in range(buckets - 1))
    backward = step_s * backward_share
    exposed = t_last + max(0.0, t_rest - backward)
    straggle = step_s * jitter * math.sqrt(2 * math.log(n)) if n > 1 else 0.0
    efficiency = step_s / (step_s + exposed + straggle)
    return dict(ranks=n, comm_ms=(t_last + t_rest) * 1e3, exposed_ms=exposed * 1e3, straggler_ms=straggle * 1e3,
                efficiency=efficiency, speedup=n * efficiency)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--step-seconds", type=float)
    p.add_argument("--gradient-bytes", type=float)
    p.add_argument("--name", default="measured")
    p.add_argument("--bucket-mb", type=float, default=25)
    p.add_argument("--jitter", type=float, default=0.02, help="step-time standard deviation / mean")
    p.add_argument("--backward-share", type=float, default=0.66, help="backward's share of the step")
    p.add_argument("--json", action="store_true")
    a = p.parse_args()
    rows = []
    scenarios = SCENARIOS if a.step_seconds is None else [(a.name, a.step_seconds, a.gradient_bytes, "given")]
    for name, step_s, grad_bytes, source in scenarios:
        for n in (8, 32):
            r = project(step_s, grad_bytes, n, NVLINK_A100, a.bucket_mb * 2**20, a.jitter, a.backward_share)
            r.update(name=name, step_ms=step_s * 1e3, gradient_mb=grad_bytes / 1e6, source=source,
                     target=3.5 if n == 8 else 10.0)
            rows.append(r)
    if a.json:
        print(json.dumps(rows, indent=2))
        return
    print(f"{'scenario':<36} {'ranks':>5} {'step ms':>8} {'grad MB':>8} {'comm ms':>8} {'exposed':>8} "
          f"{'stragg':>7} {'eff':>6} {'speedup':>8} {'target':>7}")
    for r in rows:
        ok = "met" if r["speedup"] >= r["target"] else "MISSED"
        print(f"{r['name']:<36} {r['ranks']:>5} {r['step_ms']:>8.1f} {r['gradient_mb']:>8.1f} {r['comm_ms']:>8.2f} "
              f"{r['exposed_ms']:>8.2f} {r['straggler_ms']:>7.2f} {r['efficiency']:>6.1%} {r['speedup']:>7.2f}x "
              f"{r['target']:>5.1f}x {ok}")


if __name__ == "__main__":
    main()
