#!/usr/bin/env python3
"""Peak RSS of shoplens on hostile inputs against the same command on normal input.

The data-integrity promise: no hostile input makes a command hold more than twice the memory the
same command holds on normal input. Each case runs the real binary in a scratch folder and reads
the child's peak RSS (wait4's ru_maxrss; for the server, VmHWM before it is stopped):

  prepare   a 200-image catalog, then the same manifest plus a PNG that inflates to 2.7 GB
            (30000x30000), a BMP and a TIFF declaring 30000x30000, a WebP declaring 16000x16000,
            a 100 MB label, a folder and a FIFO row
  weights   `train --max-steps 1` from scratch, then `train --pretrained` of a .pt whose pickle
            nests 100,000 dicts and of a .pt whose data.pkl deflates from 1 MB to 1 GB
  config    `config` on the default config, then on a JSON config nested 100,000 deep
  serve     20 normal requests, then a 400 MB chunked body, a 14 MB nested JSON body and a
            body that never finishes, each on a fresh server

Prints a Markdown table (case, normal MiB, hostile MiB, ratio, exit status), then /healthz's
latency, the server's peak RSS and the drain time while connection floods are held (FLOODS: more
connections than the default 168 HTTP threads, silent, with half their headers or half their body,
and more than --max-waiting-connections); exits 1 when any ratio is over the limit (--limit, default 2).

Usage: scripts/bench/hostile_rss.py --bin build/release/bin/shoplens [--work DIR] [--limit 2]
"""
import argparse
import http.client
import json
import os
import shutil
import socket
import struct
import subprocess
import sys
import time
import zipfile
import zlib

MiB = 1024 * 1024


def run(cmd, cwd=None):
    """Runs cmd to the end; returns (exit status, peak RSS in bytes)."""
    p = subprocess.Popen(cmd, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(p.pid, 0)
    p.returncode = os.waitstatus_to_exitcode(status)
    return p.returncode, usage.ru_maxrss * 1024


def png_bomb(path, side=30000):
    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
    comp = zlib.compressobj(9)
    row = b"\0" * (1 + side * 3)
    body = b"".join(comp.compress(row) for _ in range(side)) + comp.flush()
    ihdr = struct.pack(">IIBBBBB", side, side, 8, 2, 0, 0, 0)
    with open(path, "wb") as f:
        f.write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", body) + chunk(b"IEND", b""))


def bmp_declaring(path, side=30000):
    header = b"BM" + struct.pack("<IHHI", 54 + 16, 0, 0, 54)
    info = struct.pack("<IiiHHIIiiII", 40, side, side, 1, 24, 0, side * side * 3, 2835, 2835, 0, 0)
    with open(path, "wb") as f:
        f.write(header + info + b"\0" * 16)


def tiff_declaring(path, side=30000):
    entries = [(256, 4, side), (257, 4, side), (258, 3, 8), (259, 3, 1), (262, 3, 2), (273, 4, 8),
               (277, 3, 3), (278, 4, side), (279, 4, side * side * 3)]
    ifd = struct.pack("<H", len(entries))
    for tag, kind, value in entries:
        ifd += struct.pack("<HHI", tag, kind, 1) + (struct.pack("<HH", value, 0) if kind == 3 else struct.pack("<I", value))
    with open(path, "wb") as f:
        f.write(b"II*\0" + struct.pack("<I", 8) + ifd + struct.pack("<I", 0))


def webp_declaring(path, side=16000):
    vp8x = b"VP8X" + struct.pack("<I", 10) + b"\0\0\0\0" + (side - 1).to_bytes(3, "little") * 2
    with open(path, "wb") as f:
        f.write(b"RIFF" + struct.pack("<I", 4 + len(vp8x)) + b"WEBP" + vp8x)


def torch_zip(path, pickle_pieces, compress=zipfile.ZIP_STORED):
    info = zipfile.ZipInfo("archive/data.pkl")
    info.compress_type = compress
    with zipfile.ZipFile(path, "w") as z:
        with z.open(info, "w", force_zip64=True) as f:
            for piece in pickle_pieces:
                f.write(piece)
        z.writestr("archive/version", "3\n", compress_type=zipfile.ZIP_STORED)


def nested_dict_pickle(depth):
    key = b"X" + struct.pack("<I", 1) + b"a"
    return b"\x80\x02" + (b"}" + key) * depth + b"}" + b"s" * depth + b"."


def prepare_cases(bin_, work):
    run([bin_, "make-data", "--out", f"{work}/catalog", "--num-images", "200", "--seed", "5"])
    normal = run([bin_, "prepare", "--input", f"{work}/catalog/manifest.csv", "--out", f"{work}/shards-normal"])
    cat = f"{work}/catalog"
    png_bomb(f"{cat}/bomb.png")
    bmp_declaring(f"{cat}/big.bmp")
    tiff_declaring(f"{cat}/big.tiff")
    webp_declaring(f"{cat}/big.webp")
    os.makedirs(f"{cat}/a_folder", exist_ok=True)
    if not os.path.exists(f"{cat}/a_fifo"):
        os.mkfifo(f"{cat}/a_fifo")
    lines = open(f"{cat}/manifest.csv").read().splitlines()
    header = lines[0].split(",")
    template = lines[1].split(",")

    def row(path, label=None):
        fields = list(template)
        fields[header.index("path")] = path
        fields[header.index("id")] = "hostile-" + path.replace("/", "_")
        if label is not None:
            fields[header.index("label")] = label
        return ",".join(fields)
    # Written in pieces: this script's own memory is in every child's peak until it execs.
    with open(f"{cat}/hostile.csv", "w") as f:
        f.write("\n".join(lines) + "\n")
        for path in ("bomb.png", "big.bmp", "big.tiff", "big.webp", "a_folder", "a_fifo"):
            f.write(row(path) + "\n")
        head, tail = row("x.jpg", "@LABEL@").split("@LABEL@")
        f.write(head)
        for _ in range(100):
            f.write("L" * MiB)
        f.write(tail + "\n")
    hostile = run([bin_, "prepare", "--input", f"{cat}/hostile.csv", "--out", f"{work}/shards-hostile"])
    return [("prepare: PNG, BMP, TIFF and WebP bombs, a 100 MB label, a folder, a FIFO", normal, hostile)]


def weights_cases(bin_, work):
    shards = f"{work}/shards-normal"
    base = [bin_, "train", "--shards", shards, "--max-steps", "1", "--threads", "2", "-b", "8"]
    normal = run(base + ["--out", f"{work}/run-normal"])
    torch_zip(f"{work}/nested.pt", [nested_dict_pickle(100000)])
    zeros = b"\0" * MiB
    torch_zip(f"{work}/zipbomb.pt", [b"\x80\x02N."] + [zeros] * 1024, zipfile.ZIP_DEFLATED)
    nested = run(base + ["--out", f"{work}/run-nested", "--pretrained", f"{work}/nested.pt"])
    bomb = run(base + ["--out", f"{work}/run-bomb", "--pretrained", f"{work}/zipbomb.pt"])
    return [("train --pretrained: pickle nesting 100,000 dicts", normal, nested),
            ("train --pretrained: data.pkl deflating to 1 GB", normal, bomb)]


def config_cases(bin_, work):
    depth = 100000
    with open(f"{work}/deep.json", "w") as f:
        f.write('{"a":' * depth + "1" + "}" * depth)
    normal = run([bin_, "config"])
    deep = run([bin_, "config", "--config", f"{work}/deep.json"])
    return [("config: JSON nested 100,000 deep", normal, deep)]


def start_server(bin_, model, work, name):
    port_file = f"{work}/{name}.port"
    if os.path.exists(port_file):
        os.remove(port_file)
    p = subprocess.Popen([bin_, "serve", "-m", model, "-p", "0", "--port-file", port_file,
                          "--image-root", f"{work}/catalog"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    # Ready, not just listening: warm-up runs the model at every batch size, and its memory is part
    # of what a serving process holds, normal or not.
    for _ in range(1200):
        if os.path.exists(port_file) and open(port_file).read().strip():
            port = int(open(port_file).read())
            try:
                c = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
                c.request("GET", "/readyz")
                if c.getresponse().status == 200:
                    return p, port
            except OSError:
                pass
        time.sleep(0.1)
    p.kill()
    raise SystemExit("hostile_rss: the server did not become ready")


def stop_server(p):
    hwm = 0
    for line in open(f"/proc/{p.pid}/status"):
        if line.startswith("VmHWM:"):
            hwm = int(line.split()[1]) * 1024
    p.terminate()
    return p.wait(timeout=60), hwm


def first_image(work):
    for line in open(f"{work}/catalog/manifest.csv").read().splitlines()[1:]:
        path = line.split(",")[1]
        if path.endswith(".jpg") and os.path.getsize(f"{work}/catalog/{path}") > 1000:
            return path
    raise SystemExit("hostile_rss: no JPEG in the catalog")


def send_chunked(port, total):
    s = socket.create_connection(("127.0.0.1", port), timeout=60)
    s.sendall(b"POST /v1/classify HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
              b"Transfer-Encoding: chunked\r\n\r\n")
    piece = b"A" * MiB
    try:
        for _ in range(total // MiB):
            s.sendall(b"%x\r\n" % len(piece) + piece + b"\r\n")
        s.sendall(b"0\r\n\r\n")
        s.recv(4096)
    except OSError:
        pass  # the server may answer 413 and close while the body is still coming
    s.close()


def serve_cases(bin_, work):
    run([bin_, "export", "--run", f"{work}/run-normal", "--out", f"{work}/model"])
    image = first_image(work)
    p, port = start_server(bin_, f"{work}/model", work, "normal")
    for _ in range(20):
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        c.request("POST", "/v1/classify", json.dumps({"path": image}), {"Content-Type": "application/json"})
        r = c.getresponse()
        r.read()
        if r.status != 200:
            raise SystemExit(f"hostile_rss: a normal request got {r.status}")
    normal = stop_server(p)
    cases = []
    p, port = start_server(bin_, f"{work}/model", work, "chunked")
    send_chunked(port, 400 * MiB)
    cases.append(("serve: a 400 MB chunked body", normal, stop_server(p)))
    p, port = start_server(bin_, f"{work}/model", work, "nested")
    body = b"[" * (7 * MiB) + b"]" * (7 * MiB)
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    c.request("POST", "/v1/classify", body, {"Content-Type": "application/json"})
    c.getresponse().read()
    cases.append(("serve: a 14 MB nested JSON body", normal, stop_server(p)))
    p, port = start_server(bin_, f"{work}/model", work, "slow")
    slow = [socket.create_connection(("127.0.0.1", port)) for _ in range(64)]
    for s in slow:
        s.sendall(b"POST /v1/classify HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n{")
    time.sleep(3)
    cases.append(("serve: 64 clients that never finish their body", normal, stop_server(p)))
    for s in slow:
        s.close()
    return cases


def healthz_ms(port):
    start = time.time()
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    c.request("GET", "/healthz")
    r = c.getresponse()
    r.read()
    return r.status, (time.time() - start) * 1000


def vm_hwm(p):
    for line in open(f"/proc/{p.pid}/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    return 0


FLOODS = (
    ("silent", b"", 250),
    ("half-sent headers", b"GET /healthz HTTP/1.1\r\nX-a: b", 400),
    ("half-sent 1 MB bodies (64 KiB sent)",
     b"POST /v1/classify HTTP/1.1\r\nContent-Type: image/png\r\nContent-Length: 1048576\r\n\r\n" + b"x" * 65536,
     400),
    ("silent, past --max-waiting-connections (1024)", b"", 3000),
)


def flood_report(bin_, work):
    """/healthz latency, memory and the SIGTERM drain while more connections than HTTP threads are held."""
    lines = []
    for name, payload, count in FLOODS:
        p, port = start_server(bin_, f"{work}/model", work, "flood")
        ready_hwm = vm_hwm(p)
        held = [socket.create_connection(("127.0.0.1", port)) for _ in range(count)]
        for s in held:
            if payload:
                s.sendall(payload)
        time.sleep(0.5)
        status, ms = healthz_ms(port)
        hwm = vm_hwm(p)
        start = time.time()
        p.terminate()
        p.wait(timeout=120)
        lines.append(f"- {count} connections, {name}: /healthz {status} in {ms:.1f} ms; "
                     f"peak RSS {hwm / MiB:.0f} MiB ({hwm / ready_hwm:.2f}x the ready server); "
                     f"SIGTERM drain {time.time() - start:.1f} s, exit {p.returncode}")
        for s in held:
            s.close()
    return lines


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", required=True)
    ap.add_argument("--work", default="/tmp/shoplens-hostile-rss")
    ap.add_argument("--limit", type=float, default=2.0)
    a = ap.parse_args()
    bin_ = os.path.abspath(a.bin)
    shutil.rmtree(a.work, ignore_errors=True)
    os.makedirs(a.work)
    cases = prepare_cases(bin_, a.work) + weights_cases(bin_, a.work) + config_cases(bin_, a.work)
    cases += serve_cases(bin_, a.work)
    print("| case | normal MiB | hostile MiB | hostile / normal | hostile exit |")
    print("|---|--:|--:|--:|--:|")
    worst = 0.0
    for name, (_, normal), (status, hostile) in cases:
        ratio = hostile / normal
        worst = max(worst, ratio)
        print(f"| {name} | {normal / MiB:.0f} | {hostile / MiB:.0f} | {ratio:.2f} | {status} |")
    print(f"\nworst ratio {worst:.2f} (limit {a.limit})\n")
    print("\n".join(flood_report(bin_, a.work)))
    sys.exit(0 if worst <= a.limit else 1)


if __name__ == "__main__":
    main()
