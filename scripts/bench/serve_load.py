#!/usr/bin/env python3
"""Open-loop load generator for `shoplens serve` (docs/SERVING.md).

Arrivals are a Poisson process at --rate requests/s (exponential gaps from a fixed seed) for
--requests requests; each request is sent at its scheduled time on its own thread, whether or not
earlier ones were answered (open loop: a slow server does not slow the arrivals down). Latency is
measured from the scheduled arrival, so a client that falls behind cannot hide server queueing.

Prints one JSON line: rate, sent, ok, status counts, p50/p95/p99 latency of the 200s, achieved
throughput, and goodput = answers that were 200 within --slo-ms per second of the run.
"""
import argparse
import http.client
import json
import os
import random
import threading
import time

from peer_timing import percentile


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--rate", type=float, required=True, help="mean arrivals per second")
    ap.add_argument("--requests", type=int, default=500, help="requests to send (bounded run)")
    ap.add_argument("--images", required=True, help="folder (searched recursively) of image files; bodies cycle through them")
    ap.add_argument("--slo-ms", type=float, default=100.0, help="latency bound that counts towards goodput")
    ap.add_argument("--timeout-s", type=float, default=30.0)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--label", default="", help="copied into the output line")
    args = ap.parse_args()

    files = sorted(os.path.join(d, f) for d, _, names in os.walk(args.images) for f in names
                   if f.lower().endswith((".jpg", ".jpeg", ".png")))
    # The synthetic catalog has corrupt files on purpose: send only ones that decode, so every
    # non-200 answer is the server's doing (PIL checks them once, before the clock starts).
    bodies = []
    for f in files:
        if len(bodies) >= 200:
            break
        try:
            from PIL import Image
            with Image.open(f) as im:
                im.load()
        except Exception:
            continue
        bodies.append(open(f, "rb").read())
    if not bodies:
        raise SystemExit(f"no images in {args.images}")
    rng = random.Random(args.seed)
    gaps = [rng.expovariate(args.rate) for _ in range(args.requests)]

    results = [None] * args.requests  # (status, latency_ms)
    lock = threading.Lock()

    lags = [None] * args.requests  # how late the client started each request (its own overload)

    def send(i, scheduled):
        status = 0
        lags[i] = (time.perf_counter() - scheduled) * 1e3
        try:
            conn = http.client.HTTPConnection(args.host, args.port, timeout=args.timeout_s)
            conn.request("POST", "/v1/classify", body=bodies[i % len(bodies)],
                         headers={"Content-Type": "image/jpeg"})
            resp = conn.getresponse()
            resp.read()
            status = resp.status
            conn.close()
        except Exception:  # connection refused/reset or timeout: counted as status 0
            status = 0
        latency = (time.perf_counter() - scheduled) * 1e3
        with lock:
            results[i] = (status, latency)

    threads = []
    start = time.perf_counter()
    t = start
    for i, gap in enumerate(gaps):
        t += gap
        delay = t - time.perf_counter()
        if delay > 0:
            time.sleep(delay)
        th = threading.Thread(target=send, args=(i, t), daemon=True)
        th.start()
        threads.append(th)
    for th in threads:
        th.join(args.timeout_s + 5)
    end = time.perf_counter()
    duration = max(end - start, t - start)

    done = [r for r in results if r is not None]
    counts = {}
    for s, _ in done:
        counts[str(s)] = counts.get(str(s), 0) + 1
    ok = [lat for s, lat in done if s == 200]
    good = sum(1 for lat in ok if lat <= args.slo_ms)
    out = {
        "label": args.label,
        "rate": args.rate,
        "sent": args.requests,
        "ok": len(ok),
        "status": counts,
        "p50_ms": percentile(ok, 0.5),
        "p95_ms": percentile(ok, 0.95),
        "p99_ms": percentile(ok, 0.99),
        "throughput": len(ok) / duration,
        "goodput": good / duration,
        "good_fraction": good / args.requests,
        "slo_ms": args.slo_ms,
        "duration_s": duration,
        "client_lag_p95_ms": percentile([x for x in lags if x is not None], 0.95),
    }
    print(json.dumps(out))


if __name__ == "__main__":
    main()
