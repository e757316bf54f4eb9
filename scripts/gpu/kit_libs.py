#!/usr/bin/env python3
"""The shared libraries of the GPU kit (docs/GPU.md, "The GPU kit"); used by scripts/gpu/pack.sh
and scripts/gpu/prove.sh.

    kit_libs.py pack  --out KIT/lib --fallback KIT/lib-fallback [--replace SONAME=PATH ...] ELF ...
    kit_libs.py check --kit KIT ELF ...

pack: walks the ELF files' DT_NEEDED tree (resolved the way `ldd` resolves it here) and sorts every
library into one of three kinds:
  device   glibc, libstdc++ and libgcc_s: the device has newer ones (libstdc++ and libgcc_s are
           also copied into --fallback, for a device whose own are older than the build's);
  torch    LibTorch and the CUDA, cuDNN and NCCL libraries: the device's torch install has them
           (torch/lib and nvidia/*/lib of its Python), so they never travel;
  copied   everything else, copied into --out (their own dependencies walked in turn); --replace
           SONAME=PATH copies PATH instead of what ldd finds (another implementation of the same
           ABI, e.g. the reference BLAS and LAPACK instead of OpenBLAS's, 36 MiB smaller).
Prints one JSON object: {"libraries": [{name, kind, source, bytes}], "copied_bytes"}.

check: runs `ldd` on the ELF files with LD_LIBRARY_PATH=$SHOPLENS_KIT_LD_LIBRARY_PATH (source
KIT/env.sh first) and fails unless every library resolves into the kit, into a Python install's
site-packages (torch's), or to a device library; also fails on "not found" and on missing symbol
versions.
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys

DEVICE = re.compile(r"^(linux-vdso|ld-linux-x86-64|libc|libm|libmvec|libdl|libpthread|librt|libutil|libresolv|libanl"
                    r"|libstdc\+\+|libgcc_s)\.so")
FALLBACK = re.compile(r"^(libstdc\+\+|libgcc_s)\.so")
TORCH = re.compile(r"^(libtorch|libc10|libcaffe2|libshm|libgomp|libcuda|libcudart|libcublas|libcudnn|libcufft"
                   r"|libcurand|libcusparse|libcusolver|libcupti|libcufile|libnccl|libnvJitLink|libnvrtc|libnvshmem"
                   r"|libnvToolsExt|libnvperf)")


def run(*cmd):
    return subprocess.run(cmd, capture_output=True, text=True, check=True).stdout


def needed(path):
    return re.findall(r"\(NEEDED\)\s+Shared library: \[(.*)\]", run("readelf", "-d", path))


def ldd_map(path, env=None):
    """{name: resolved path or None} as ldd reports it; also the raw text."""
    text = subprocess.run(["ldd", path], capture_output=True, text=True, env=env).stdout
    found = {}
    for line in text.splitlines():
        m = re.match(r"\s*(\S+) => (.*?)(?: \(0x[0-9a-f]+\))?$", line)
        if m:
            found[m.group(1)] = None if m.group(2).strip() == "not found" else m.group(2).strip()
    return found, text


def is_torch(name, path):
    return bool(TORCH.match(name)) or "/site-packages/" in (path or "") or "/dist-packages/" in (path or "")


def pack(a):
    os.makedirs(a.out, exist_ok=True)
    os.makedirs(a.fallback, exist_ok=True)
    where = {}
    for elf in a.elf:
        where.update({k: v for k, v in ldd_map(elf)[0].items() if v})
    for r in a.replace:
        name, _, path = r.partition("=")
        if not os.path.isfile(path):
            sys.exit(f"kit_libs.py: --replace {r}: no such file")
        where[name] = path
    records = {}
    todo = [(elf, n) for elf in a.elf for n in needed(elf)]
    while todo:
        parent, name = todo.pop(0)
        if name in records:
            continue
        path = where.get(name)
        if path is None and not DEVICE.match(name):
            sys.exit(f"kit_libs.py: {name} (needed by {parent}) does not resolve here: fix the build first")
        if DEVICE.match(name):
            kind = "device"
            if FALLBACK.match(name):
                shutil.copy2(os.path.realpath(path), os.path.join(a.fallback, name))
        elif is_torch(name, path):
            kind = "torch"
        else:
            kind = "copied"
            shutil.copy2(os.path.realpath(path), os.path.join(a.out, name))
            todo += [(path, n) for n in needed(path)]
        records[name] = {"name": name, "kind": kind, "source": path}
        if kind == "copied" and any(r.startswith(name + "=") for r in a.replace):
            records[name]["replaced"] = True
    for rec in records.values():
        local = os.path.join(a.out, rec["name"])
        rec["bytes"] = os.path.getsize(local) if rec["kind"] == "copied" else os.path.getsize(
            os.path.realpath(rec["source"])) if rec["source"] else 0
    libs = sorted(records.values(), key=lambda r: (r["kind"], -r["bytes"]))
    print(json.dumps({"libraries": libs,
                      "copied_bytes": sum(r["bytes"] for r in libs if r["kind"] == "copied")}, indent=1))


def check(a):
    kit = os.path.realpath(a.kit)
    if not os.environ.get("SHOPLENS_KIT_LD_LIBRARY_PATH"):
        sys.exit("kit_libs.py check: SHOPLENS_KIT_LD_LIBRARY_PATH is not set: source the kit's env.sh first")
    env = dict(os.environ, LD_LIBRARY_PATH=os.environ["SHOPLENS_KIT_LD_LIBRARY_PATH"])
    bad = []
    for elf in a.elf:
        found, text = ldd_map(elf, env)
        if "version `" in text or "not found" in text:
            bad.append(f"{elf}:\n{text}")
            continue
        for name, path in found.items():
            real = os.path.realpath(path)
            if not (real.startswith(kit + os.sep) or is_torch(name, path) or DEVICE.match(name)):
                bad.append(f"{elf}: {name} resolves outside the kit and torch: {path}")
    if bad:
        print("kit_libs.py check: FAILED\n" + "\n".join(bad), file=sys.stderr)
        sys.exit(1)
    print(f"kit_libs.py check: every library of {len(a.elf)} programs resolves into the kit, torch or the system's C/C++ runtime")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="command", required=True)
    p = sub.add_parser("pack", help="copy the libraries into the kit")
    p.add_argument("--out", required=True, help="the kit's lib folder")
    p.add_argument("--fallback", required=True, help="folder for libstdc++ and libgcc_s")
    p.add_argument("--replace", action="append", default=[], metavar="SONAME=PATH",
                   help="copy PATH for SONAME instead of the library ldd finds (repeatable)")
    p.add_argument("elf", nargs="+")
    c = sub.add_parser("check", help="check where the libraries resolve (after sourcing KIT/env.sh)")
    c.add_argument("--kit", required=True)
    c.add_argument("elf", nargs="+")
    a = ap.parse_args()
    pack(a) if a.command == "pack" else check(a)


if __name__ == "__main__":
    main()
