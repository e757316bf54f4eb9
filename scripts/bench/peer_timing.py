"""The Python peers' step timing: warm-up steps, then timed ones; the same protocol as
`shoplens bench-train` (median of the timed steps), and the percentiles the latency figures use."""
import time


def time_steps(step, warmup, steps):
    """Runs step() `warmup` times untimed, then `steps` times; returns (seconds per step, median)."""
    for _ in range(warmup):
        step()
    times = []
    for _ in range(steps):
        t0 = time.perf_counter()
        step()
        times.append(time.perf_counter() - t0)
    s = sorted(times)
    median = s[len(s) // 2] if len(s) % 2 else 0.5 * (s[len(s) // 2 - 1] + s[len(s) // 2])
    return times, median


def time_window(step, warmup, steps, finish):
    """Runs step() `warmup` times, then `steps` times back to back, nothing read between them; returns
    the seconds from the first timed step until finish() (the device's queue drained) returns: the
    window bench-train --timing window measures."""
    for _ in range(warmup):
        step()
    finish()
    t0 = time.perf_counter()
    for _ in range(steps):
        step()
    finish()
    return time.perf_counter() - t0


def percentile(values, q):
    """The q-quantile of `values` (0 <= q <= 1), interpolated linearly between the two nearest ranks
    (numpy's default); None for no values."""
    if not values:
        return None
    v = sorted(values)
    pos = q * (len(v) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(v) - 1)
    return v[lo] + (v[hi] - v[lo]) * (pos - lo)
