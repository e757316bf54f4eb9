#!/usr/bin/env python3
"""The tables of scripts/gpu/prove.sh: reads one call's raw outputs and writes OUT/summary-callN.md
(Markdown, printed by prove.sh last) and OUT/results-callN.jsonl (every record, tagged with the
call and the file it came from).

    prove_report.py --call N --raw WORK/callN --out OUT --mode gpu|cpu [--kit DIR] [--seconds S]

A missing input (a step that failed, timed out or was skipped) leaves its table out and says so;
the steps table on top always shows every step's status.
"""
import argparse
import json
import os
import statistics
import xml.etree.ElementTree as ET

MiB = 2**20


def load_jsonl(path):
    if not os.path.exists(path):
        return []
    records = []
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line.startswith("{"):
                try:
                    records.append(json.loads(line))
                except json.JSONDecodeError:
                    pass
    return records


def load_json(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, json.JSONDecodeError):
        return None


def fmt(v, digits=1):
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.3g}" if 0 < abs(v) < 0.1 else f"{v:.{digits}f}"
    return str(v)


def mib(v):
    return "-" if not v or v <= 0 else f"{v / MiB:.0f}"


def table(header, rows):
    out = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    out += ["| " + " | ".join(fmt(c) for c in r) + " |" for r in rows]
    return "\n".join(out) + "\n"


def median(values):
    values = [float(v) for v in values if v is not None]
    return statistics.median(values) if values else None


def ratio(a, b):
    return f"{a / b:.2f}x" if a and b else "-"


class Report:
    def __init__(self, a):
        self.a, self.raw, self.parts, self.records, self.problems = a, a.raw, [], [], []

    def add(self, text):
        self.parts.append(text)

    def keep(self, source, records):
        for r in records:
            self.records.append(dict(r, call=self.a.call, source=source))

    def missing(self, what, step):
        self.problems.append(f"no {what} results")
        self.add(f"_{what}: no results (step `{step}`: see its log in raw-call{self.a.call}.tar.gz)._\n")

    # ---- every call ----
    def header(self):
        dev = load_json(f"{self.raw}/device.json") or {}
        mode = "GPU" if self.a.mode == "gpu" else "CPU rehearsal (tiny sizes: the code paths, not figures)"
        self.add(f"# prove.sh call {self.a.call}: {mode}\n")
        card = dev.get("device_name") or "no CUDA device"
        mem = f", {dev['total_memory_bytes'] / 2**30:.0f} GiB" if dev.get("total_memory_bytes") else ""
        self.add(f"{card}{mem}; torch {dev.get('torch', '?')} (CUDA {dev.get('torch_cuda', '?')}), torchvision "
                 f"{dev.get('torchvision', '?')}, Lightning {dev.get('lightning', '?')}, {dev.get('cpus', '?')} CPUs; "
                 f"driver {dev.get('driver', '?')}; OMP_WAIT_POLICY {dev.get('omp_wait_policy') or 'unset'}; "
                 f"{dev.get('shoplens', 'shoplens ?')}; call took {self.a.seconds} s\n")
        self.keep("device.json", [dev] if dev else [])
        steps = load_jsonl(f"{self.raw}/steps.jsonl")
        self.keep("steps.jsonl", steps)
        self.problems += [f"step {s['step']} {s['status']}" for s in steps if s["status"] != "ok"]
        self.add(table(["step", "status", "exit", "seconds", "limit s"],
                       [[s["step"], s["status"], s["exit"], s["seconds"], s["limit"]] for s in steps]))

    # ---- call 1 ----
    def gpu_tests(self):
        g = load_json(f"{self.raw}/gpu_tests.json")
        if not g:
            return self.missing("gpu tests", "gpu-tests")
        rows = []
        for suite in g.get("testsuites", []):
            for t in suite.get("testsuite", []):
                failed = bool(t.get("failures"))
                rows.append([f"{suite['name']}.{t['name']}", "FAILED" if failed else t.get("result", "?"), t.get("time")])
        self.keep("gpu_tests.json", [{"test": r[0], "result": r[1], "time": r[2]} for r in rows])
        self.problems += [f"{r[0]} failed" for r in rows if r[1] == "FAILED"]
        if self.a.mode == "gpu":
            self.problems += [f"{r[0]} skipped on the GPU machine" for r in rows if r[1] == "SKIPPED"]
        self.add(f"\n## gpu tests (`shoplens_tests --gtest_filter='Gpu*'`): {g.get('tests')} tests, "
                 f"{g.get('failures')} failures\n\n" + table(["test", "result", "time"], rows))

    def train_step(self):
        recs = load_jsonl(f"{self.raw}/train_step.jsonl")
        if not recs:
            return self.missing("train step", "train-step")
        self.keep("train_step.jsonl", recs)
        cases = {}
        for r in recs:
            key = (r["model"], int(r["batch_size"]), int(r["image_size"]), r["precision"], str(r["channels_last"]).lower(),
                   r.get("optimizer", "adamw"), r.get("timing", "step"))
            cases.setdefault(key, {"shoplens": [], "pytorch": [], "device": set()})
            cases[key][r["implementation"]].append(float(r["images_per_second"]))
            cases[key]["device"].add(r.get("device", "?"))
        rows = []
        for (model, b, size, prec, cl, optimizer, timing), v in cases.items():
            ours, theirs = median(v["shoplens"]), median(v["pytorch"])
            rows.append([model, b, size, prec, "yes" if cl == "true" else "no", optimizer, timing,
                         "/".join(sorted(v["device"])), ours, theirs, ratio(ours, theirs),
                         f"{len(v['shoplens'])}+{len(v['pytorch'])}"])
        self.add("\n## train step, img/s: C++ (`shoplens bench-train`) vs Python eager (train_step_peer.py), "
                 "median of alternating trials\n\n" +
                 table(["model", "batch", "px", "precision", "channels-last", "optimizer", "timing", "device",
                        "C++ img/s", "Python img/s", "C++/Python", "trials"], rows))

    # ---- call 2 ----
    def find_batch(self):
        recs = load_jsonl(f"{self.raw}/find_batch.jsonl")
        light = load_json(f"{self.raw}/lightning.json")
        self.keep("find_batch.jsonl", recs)
        self.keep("lightning.json", [light] if light else [])
        searches = [r for r in recs if r.get("kind") == "find-batch"]
        if not searches and not light:
            return self.missing("find-batch", "find-batch")
        exact = next((r["micro_batch"] for r in searches if r["strategy"] == "exact"), None)
        pct = lambda b: f"{100.0 * b / exact:.1f}%" if exact and b else "-"
        rows = [[f"shoplens {r['strategy']}", r["micro_batch"], pct(r["micro_batch"]), r["probes"],
                 sum(p.get("result") != "fits" for p in r.get("probe_list") or []),
                 r["seconds"], mib(r.get("measured_peak_bytes"))] for r in searches]
        if light:
            rows.append([f"Lightning {light['strategy'].split('-', 1)[1]} (torchvision)",
                         f"{light['micro_batch']} (largest ok {light.get('largest_ok')})", pct(light["micro_batch"]),
                         light["probes"], light["ooms"], light["total_seconds"], mib(light.get("peak_reserved_bytes"))])
        first = searches[0] if searches else {}
        what = (f"{first.get('model', light and light.get('model'))} {first.get('image_size', light and light.get('image_size'))} px, "
                f"{first.get('precision', 'bf16')}, budget {first.get('budget', light and light.get('memory_budget'))}")
        self.add(f"\n## find-batch: {what} (exact = the true maximum)\n\n" +
                 table(["strategy", "batch", "% of exact", "probes", "probes over budget", "seconds", "peak MiB"], rows))
        fit = next((r for r in searches if r["strategy"] == "fit"), None)
        if fit and exact:
            checks = [("fit >= 97% of exact", fit["micro_batch"] >= 0.97 * exact), ("fit <= 5 probes", fit["probes"] <= 5)]
            if light:
                checks += [("fewer probes than Lightning", fit["probes"] < light["probes"]),
                           ("less time than Lightning", fit["seconds"] < light["total_seconds"])]
            self.add("\n" + "; ".join(f"{n}: {'yes' if ok else 'NO'}" for n, ok in checks) + "\n")
        epochs = [r for r in recs if r.get("kind") == "train-epoch"]
        self.problems += [f"the epoch at batch {r['micro_batch']}: {r.get('status')}" for r in epochs
                          if r.get("status") != "completed"]
        self.problems += [f"{r.get('oom_retries')} OOM retries in the epoch" for r in epochs if r.get("oom_retries")]
        if not light:
            self.missing("Lightning", "lightning")
        if epochs:
            rows = [[r["model"], r["micro_batch"], r.get("micro_batch_effective"), r.get("oom_retries"),
                     r.get("images_per_second"), r.get("train_seconds"), r.get("wall_seconds"),
                     fmt(r.get("val_macro_f1"), 3), r.get("status")] for r in epochs]
            self.add("\n## one epoch + validation at fit's batch, worst-case augmentation, same budget\n\n" +
                     table(["model", "batch", "effective", "OOM retries", "img/s", "train s", "wall s", "val macro-F1",
                            "status"], rows))
        else:
            self.missing("epoch at the found batch", "find-batch")

    # ---- call 3 ----
    def study(self):
        s = load_json(f"{self.raw}/study/study.json")
        if not s:
            return self.missing("batch study", "study")
        self.keep("study/study.json", [{k: v for k, v in s.items() if k not in ("report", "runs")}])
        self.keep("study/study.json#runs", s["runs"])
        rows = []
        for run in s["runs"]:
            for name in ("baseline", "find_batch"):
                r, m = run[name], run[name]["summary"]
                rows.append([run["seed"], name, f"{r['micro_batch']} x {m.get('accumulation_steps', 1)}", r["lr"],
                             m.get("images_per_second"), m.get("train_seconds"), m.get("steps"), m.get("oom_retries"),
                             r.get("loss_spikes"), fmt(r.get("final_val_macro_f1"), 3), mib(m.get("peak_rss_bytes"))])
        self.problems += [f"study seed {run['seed']} {name}: {run[name]['summary'].get('oom_retries')} OOM retries"
                          for run in s["runs"] for name in ("baseline", "find_batch")
                          if run[name]["summary"].get("oom_retries")]
        diff, speed = s["macro_f1_difference_points"], s["throughput_ratio"]
        arms = [[name, s[name]["micro_batch"], s[name]["lr"], fmt(s[name]["val_macro_f1_mean"], 3),
                 fmt(s[name]["val_macro_f1_sd"], 3), " / ".join(fmt(x, 1) for x in s[name]["seconds_to_f1"])]
                for name in ("baseline", "find_batch")]
        self.add(f"\n## batch study (`shoplens bench --study batch`): baseline vs find-batch, same shards and epochs, "
                 f"{s['seeds']} seeds\n\n" +
                 table(["seed", "run", "micro-batch x accum", "lr", "img/s", "train s", "steps", "OOM retries",
                        "loss spikes", "val macro-F1", "peak RSS MiB"], rows) + "\n" +
                 table(["arm", "micro-batch", "lr", "val macro-F1 mean", "sd", "seconds to baseline F1 - 1 point, per seed"],
                       arms) +
                 f"\nmacro-F1 difference (find-batch - baseline, paired by seed): {fmt(diff['mean'], 2)} +- "
                 f"{fmt(diff['sd'], 2)} points, goal (within 1 point) {'met' if s['goal_met'] else 'NOT met'}; "
                 f"images/s ratio of the arms' means {fmt(speed['of_arm_means'], 2)} "
                 f"(per seed: {', '.join(fmt(x, 2) for x in speed['per_seed'])}) "
                 f"(report.html in raw-call{self.a.call}.tar.gz)\n")

    def bench(self):
        a, b = load_jsonl(f"{self.raw}/bench-a/results.jsonl"), load_jsonl(f"{self.raw}/bench-b/results.jsonl")
        if not a:
            return self.missing("recorder", "bench")
        self.keep("bench-a/results.jsonl", a)
        self.keep("bench-b/results.jsonl", b)
        self.problems += [f"recorder scenario {r['scenario']}: {r.get('error', r.get('status'))}" for r in a + b
                          if r.get("status") != "ok"]
        rows = [[r["scenario"], f"{r.get('batch')} ({r.get('batch_source')})", r.get("images_per_second"),
                 f"{100 * r['noise']:.1f}%" if r.get("noise") is not None else "-", r.get("step_ms_p50"),
                 f"{100 * r['data_wait_fraction']:.1f}%" if r.get("data_wait_fraction") is not None else "-",
                 mib(r.get("peak_allocated_bytes")), mib(r.get("peak_reserved_bytes")),
                 fmt(r.get("gpu_util_mean")), fmt(r.get("gpu_util_max")), mib(r.get("gpu_memory_max_bytes")),
                 r.get("gpu"), r.get("status")] for r in a]
        self.add("\n## recorder (`shoplens bench`, shards through the training loader): baseline batch vs auto\n\n" +
                 table(["scenario", "batch", "img/s", "noise", "step p50 ms", "loader wait", "peak alloc MiB",
                        "peak reserved MiB", "GPU util mean %", "max %", "GPU mem MiB", "NVML", "status"], rows))
        failures = {}
        junit = f"{self.raw}/bench-b/junit.xml"
        if os.path.exists(junit):
            for case in ET.parse(junit).getroot().iter("testcase"):
                for child in case:
                    if child.tag in ("failure", "error"):
                        failures[case.get("name")] = f"{child.get('type')}: {child.get('message', '')}"
        gate = next((s for s in load_jsonl(f"{self.raw}/steps.jsonl") if s["step"] == "bench-gate"), {})
        before = {r["scenario"]: r.get("images_per_second") for r in a}
        rows = [[r["scenario"], before.get(r["scenario"]), r.get("images_per_second"),
                 f"{100 * (r['images_per_second'] / before[r['scenario']] - 1):+.1f}%"
                 if r.get("images_per_second") and before.get(r["scenario"]) else "-",
                 failures.get(r["scenario"], "passed")] for r in b]
        self.add(f"\n## regression gate: the second run against the first (`--max-regression 5%`), exit "
                 f"{gate.get('exit', '-')}\n\n" + table(["scenario", "baseline img/s", "this run img/s", "change", "gate"], rows))

    def score(self):
        recs = load_jsonl(f"{self.raw}/score.jsonl")
        if not recs:
            return self.missing("scoring", "score")
        self.keep("score.jsonl", recs)
        ours = [r for r in recs if r.get("impl") == "shoplens"]
        theirs = [r for r in recs if r.get("impl") == "pytorch"]
        m = lambda rs, k: median([r.get(k) for r in rs])
        rows = []
        for name, rs in (("shoplens score (C++)", ours), ("Python eager (score_peer.py)", theirs)):
            rows.append([name, rs[0].get("device") if rs else "-", rs[0].get("precision") if rs else "-",
                         m(rs, "images_per_second"), m(rs, "compute_images_per_second"), m(rs, "p50_ms"), m(rs, "p95_ms"),
                         m(rs, "p99_ms"), len(rs)])
        case = ours[0]["case"] if ours else "?"
        self.add(f"\n## batch scoring `{case}` (model:px:batch:workers:threads:precision:device:cl), median of trials\n\n" +
                 table(["implementation", "device", "precision", "img/s end to end", "img/s compute only", "p50 ms",
                        "p95 ms", "p99 ms", "trials"], rows) +
                 f"\nC++/Python: end to end {ratio(m(ours, 'images_per_second'), m(theirs, 'images_per_second'))}, "
                 f"compute only {ratio(m(ours, 'compute_images_per_second'), m(theirs, 'compute_images_per_second'))}\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--call", type=int, required=True, choices=[1, 2, 3])
    ap.add_argument("--raw", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--mode", choices=["gpu", "cpu"], required=True)
    ap.add_argument("--kit", default="")
    ap.add_argument("--seconds", type=int, default=0)
    a = ap.parse_args()
    r = Report(a)
    r.header()
    sections = {1: [r.gpu_tests, r.train_step], 2: [r.find_batch], 3: [r.study, r.bench, r.score]}[a.call]
    for section in sections:
        try:
            section()
        except (KeyError, TypeError, ValueError, ZeroDivisionError) as e:  # a malformed input: say so, keep going
            r.problems.append(f"{section.__name__}: unreadable results ({type(e).__name__}: {e})")
            r.add(f"\n_{section.__name__}: could not read its results ({type(e).__name__}: {e})._\n")
    if r.problems:
        r.add("\n**Problems:** " + "; ".join(r.problems) + "\n")
    if a.kit:
        manifest = load_json(os.path.join(a.kit, "manifest.json")) or {}
        r.add(f"\nkit: commit {manifest.get('commit', '?')[:12]}{' (dirty)' if manifest.get('dirty') else ''}, built "
              f"against torch {manifest.get('torch_built_against', '?')}, {manifest.get('total_bytes', 0) / MiB:.1f} MiB\n")
    os.makedirs(a.out, exist_ok=True)
    with open(f"{a.out}/summary-call{a.call}.md", "w") as f:
        f.write("\n".join(r.parts))
    with open(f"{a.out}/results-call{a.call}.jsonl", "w") as f:
        for rec in r.records:
            f.write(json.dumps(rec) + "\n")
    print(f"prove_report.py: {a.out}/summary-call{a.call}.md, {len(r.records)} records in results-call{a.call}.jsonl"
          + (f"; {len(r.problems)} problems" if r.problems else ""))
    return 1 if r.problems else 0


if __name__ == "__main__":
    raise SystemExit(main())
