#!/usr/bin/env bash
# Packs what a GPU machine needs to run ShopLens's CUDA path into one git-ignored folder, the GPU
# kit (docs/GPU.md, "The GPU kit"). The machine has the same pip torch (its torch/lib and nvidia/*
# libraries), glibc and libstdc++, but none of ShopLens's other libraries and no network.
#
# Usage: scripts/gpu/pack.sh [--mode binary|debs] [--build DIR] [--out DIR] [--python PATH]
#                            [--blas reference|system]
#   --mode    binary (default): the build's shoplens and shoplens_tests (stripped, libexec/; bin/
#             holds launchers that give them the kit's libraries), every shared library they load
#             that is neither the C/C++ runtime nor torch's (lib/),
#             libstdc++ and libgcc_s as a fallback (lib-fallback/), the scripts and configs
#             scripts/gpu/prove.sh uses (src/), env.sh, manifest.json and manifest.md.
#             debs: measures the alternative, building on the device from Debian packages:
#             `apt-get download` of the -dev packages the build needs plus the packages of every
#             runtime library the binaries load (the same closure) into OUT-debs/;
#             prints and records the sizes (needs apt's network access here).
#   --build   the build folder whose binaries travel (default build/torch2: pip's torch 2.x, CUDA)
#   --out     the kit folder, replaced (default gpu-kit; .gitignore has it)
#   --python  the Python whose torch the build links (default: the venv of scripts/venv.sh)
#   --blas    reference (default): Debian's reference BLAS and LAPACK (libblas3, liblapack3) stand
#             in for OpenBLAS's, which OpenCV's core links: the same ABI, 36 MiB less; ShopLens
#             calls no OpenCV function that uses them. system: whatever ldd finds (OpenBLAS here).
# Prints the kit's size and the time the pack took; both go into OUT/manifest.json.
set -euo pipefail
# shellcheck source=../bench/lib/options.sh
source "$(dirname "${BASH_SOURCE[0]}")/../bench/lib/options.sh"
cd "$(dirname "$0")/../.."
# shellcheck source=common.sh
source scripts/gpu/common.sh
mode=binary build=build/torch2 out=gpu-kit python="" blas=reference
parse_options 'mode= build= out= python= blas=' "$@"
[[ $mode == binary || $mode == debs ]] || { echo "pack.sh: --mode is binary or debs, not '$mode'" >&2; exit 2; }
[[ $blas == reference || $blas == system ]] || { echo "pack.sh: --blas is reference or system, not '$blas'" >&2; exit 2; }
for b in shoplens shoplens_tests; do
  [[ -x $build/bin/$b || -x $build/tests/$b ]] || {
    echo "pack.sh: no $b in $build: build it first (scripts/build.sh torch2)" >&2; exit 2; }
done
bin_of() { if [[ -x $build/bin/$1 ]]; then echo "$build/bin/$1"; else echo "$build/tests/$1"; fi; }
if [[ -z $python ]]; then
  python=$(bash scripts/venv.sh | tail -n 1)/bin/python
fi
[[ -x $python ]] || { echo "pack.sh: no Python at $python (pass --python)" >&2; exit 2; }
start=$(date +%s%N)
commit=$(git rev-parse HEAD 2>/dev/null || echo unknown)
dirty=$([[ -n $(git status --porcelain 2>/dev/null) ]] && echo true || echo false)
torch_version=$("$python" -c 'import torch; print(torch.__version__)')
torch_cuda=$("$python" -c 'import torch; print(torch.version.cuda)')
# The torch the build links, from its CMake cache (Torch_DIR), must be the one of $python.
built_against=$(sed -n 's/^Torch_DIR:PATH=//p' "$build/CMakeCache.txt" 2>/dev/null || true)
torch_root=$("$python" -c 'import torch, os; print(os.path.dirname(torch.__file__))')
if [[ -n $built_against && $built_against != "$torch_root"* ]]; then
  echo "pack.sh: $build links the torch at $built_against, not $torch_root ($python): pass --python" >&2
  exit 2
fi

if [[ $mode == debs ]]; then
  debs="$out-debs"
  replace_dir "$debs" .gpu-kit-debs
  mkdir -p "$debs/dev" "$debs/runtime"
  dev=(libopencv-dev libopencv-core-dev libopencv-imgproc-dev libcli11-dev libspdlog-dev
       libfmt-dev nlohmann-json3-dev libgtest-dev libgmock-dev googletest libturbojpeg0-dev libjpeg62-turbo-dev
       libpng-dev libwebp-dev libtiff-dev libcpp-httplib-dev libssl-dev zlib1g-dev libbrotli-dev)
  # The packages of every library the binaries load, except the C/C++ runtime and torch's.
  mapfile -t runtime < <(for b in shoplens shoplens_tests; do ldd "$(bin_of $b)"; done |
    awk '/=> \//{print $3}' | grep -v -e /site-packages/ -e /usr/local/cuda |
    grep -v -E '/(libc|libm|libdl|libpthread|librt|libutil|libresolv|libstdc\+\+|libgcc_s|ld-linux-x86-64)\.so' |
    sort -u | xargs -r -n1 realpath | xargs -r dpkg -S 2>/dev/null | cut -d: -f1 | sort -u)
  (cd "$debs/dev" && apt-get download "${dev[@]}" >/dev/null 2>&1) ||
    { echo "pack.sh: apt-get download of the -dev packages failed (network?)" >&2; exit 1; }
  (cd "$debs/runtime" && apt-get download "${runtime[@]}" >/dev/null 2>&1) ||
    { echo "pack.sh: apt-get download of the runtime packages failed (network?)" >&2; exit 1; }
  seconds=$(( ($(date +%s%N) - start) / 1000000 ))e-3
  dev_bytes=$(du -sb "$debs/dev" | cut -f1)
  runtime_bytes=$(du -sb "$debs/runtime" | cut -f1)
  "$python" - "$debs/manifest.json" "$commit" "$dirty" "$torch_version" "$seconds" "$dev_bytes" "$runtime_bytes" \
    "${#dev[@]}" "${#runtime[@]}" <<'PY'
import json, sys
path, commit, dirty, torch, seconds, dev, runtime, ndev, nrun = sys.argv[1:]
json.dump({"mode": "debs", "commit": commit, "dirty": dirty == "true", "torch_built_against": torch,
           "pack_seconds": round(float(seconds), 1), "dev_packages": int(ndev), "dev_bytes": int(dev),
           "runtime_packages": int(nrun), "runtime_bytes": int(runtime), "total_bytes": int(dev) + int(runtime)},
          open(path, "w"), indent=1)
print(f"debs: {ndev} -dev packages {int(dev) / 2**20:.1f} MiB + {nrun} runtime packages {int(runtime) / 2**20:.1f} MiB "
      f"= {(int(dev) + int(runtime)) / 2**20:.1f} MiB (.deb files, compressed), in {float(seconds):.0f} s; {path}")
PY
  exit 0
fi

replace_dir "$out" manifest.json
mkdir -p "$out/bin" "$out/libexec" "$out/lib" "$out/lib-fallback" "$out/src/scripts"
for b in shoplens shoplens_tests; do
  cp "$(bin_of $b)" "$out/libexec/$b"
  strip --strip-unneeded "$out/libexec/$b"
  # The launcher: the kit's library path for this process and its children only, so that the
  # machine's Python (the peers) keeps its own libssl, libz, ...
  cat > "$out/bin/$b" <<LAUNCHER
#!/usr/bin/env bash
# Runs the packed $b with the GPU kit's libraries (written by scripts/gpu/pack.sh).
kit=\$(cd "\$(dirname "\${BASH_SOURCE[0]}")/.." && pwd)
if [[ -z \${SHOPLENS_KIT_LD_LIBRARY_PATH:-} ]]; then
  # shellcheck disable=SC1091
  source "\$kit/env.sh" || exit 1
fi
LD_LIBRARY_PATH="\$SHOPLENS_KIT_LD_LIBRARY_PATH\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}" exec "\$kit/libexec/$b" "\$@"
LAUNCHER
  chmod +x "$out/bin/$b"
done
# libshoplens.so and the rest: resolved as the build resolves them (its RUNPATH), then copied.
replace_args=()
if [[ $blas == reference ]]; then
  for f in /usr/lib/x86_64-linux-gnu/blas/libblas.so.3 /usr/lib/x86_64-linux-gnu/lapack/liblapack.so.3; do
    [[ -f $f ]] || { echo "pack.sh: no $f: install libblas3 and liblapack3, or pass --blas system" >&2; exit 2; }
    replace_args+=(--replace "$(basename "$f")=$f")
  done
fi
"$python" scripts/gpu/kit_libs.py pack --out "$out/lib" --fallback "$out/lib-fallback" "${replace_args[@]}" \
  "$(bin_of shoplens)" "$(bin_of shoplens_tests)" > "$out/libraries.json"
[[ -f $out/lib/libshoplens.so ]] && strip --strip-unneeded "$out/lib/libshoplens.so"
# What prove.sh runs besides the binaries: its scripts, the Python peers, the configs, the converter.
cp -r scripts/gpu scripts/bench scripts/python scripts/fixtures "$out/src/scripts/"
cp -r configs "$out/src/"
mkdir -p "$out/src/tools" && cp -r tools/text_shards "$out/src/tools/"
find "$out/src" -name __pycache__ -prune -exec rm -rf {} +

cat > "$out/env.sh" <<'ENV'
# Source this on the GPU machine (bash): `source gpu-kit/env.sh`. Finds the torch install (through
# $SHOPLENS_PYTHON, default python3) and exports SHOPLENS_KIT_LD_LIBRARY_PATH: the kit's libraries
# first, then torch's lib and nvidia/*/lib folders. The launchers in bin/ put it on
# LD_LIBRARY_PATH for the binaries alone. Also exports SHOPLENS_BIN and the test binary's
# SHOPLENS_TEST_BIN, SHOPLENS_TEST_SOURCE_DIR, SHOPLENS_TEST_PYTHON. Written by scripts/gpu/pack.sh.
SHOPLENS_KIT=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
SHOPLENS_PYTHON=${SHOPLENS_PYTHON:-$(command -v python3)}
_torch_lib=$("$SHOPLENS_PYTHON" -c 'import torch, os; print(os.path.dirname(torch.__file__) + "/lib")') || {
  echo "gpu-kit: '$SHOPLENS_PYTHON' cannot import torch: set SHOPLENS_PYTHON to the Python with torch" >&2; return 1; }
_site=$(dirname "$(dirname "$_torch_lib")")
# The CUDA, cuDNN, NCCL, ... libraries of pip's nvidia-* packages, beside torch.
_nvidia=$(ls -d "$_site"/nvidia/*/lib 2>/dev/null | tr '\n' ':')
SHOPLENS_KIT_LD_LIBRARY_PATH="$SHOPLENS_KIT/lib:$_torch_lib:${_nvidia%:}"
# A machine whose libstdc++ is older than the build's: the kit's.
if ! LD_LIBRARY_PATH=$SHOPLENS_KIT_LD_LIBRARY_PATH "$SHOPLENS_KIT/libexec/shoplens" --version >/dev/null 2>&1 &&
   LD_LIBRARY_PATH=$SHOPLENS_KIT/lib-fallback:$SHOPLENS_KIT_LD_LIBRARY_PATH "$SHOPLENS_KIT/libexec/shoplens" --version \
     >/dev/null 2>&1; then
  SHOPLENS_KIT_LD_LIBRARY_PATH="$SHOPLENS_KIT/lib-fallback:$SHOPLENS_KIT_LD_LIBRARY_PATH"
  echo "gpu-kit: this machine's libstdc++/libgcc_s are older than the build's: using the kit's" >&2
fi
export SHOPLENS_KIT SHOPLENS_PYTHON SHOPLENS_KIT_LD_LIBRARY_PATH
export SHOPLENS_BIN="$SHOPLENS_KIT/bin/shoplens"
export SHOPLENS_TEST_BIN="$SHOPLENS_BIN" SHOPLENS_TEST_SOURCE_DIR="$SHOPLENS_KIT/src" SHOPLENS_TEST_PYTHON="$SHOPLENS_PYTHON"
unset _torch_lib _site _nvidia
ENV

# The kit must work from where it lies: its libraries first, this machine's torch, nothing else.
# shellcheck disable=SC1091
(SHOPLENS_PYTHON=$python source "$out/env.sh" &&
  "$python" scripts/gpu/kit_libs.py check --kit "$out" "$out/libexec/shoplens" "$out/libexec/shoplens_tests" &&
  LD_BIND_NOW=1 "$out/bin/shoplens" --version > "$out/version.txt" &&
  LD_BIND_NOW=1 "$out/bin/shoplens_tests" --gtest_list_tests --gtest_filter='Gpu*' > "$out/gpu_tests.txt")
seconds=$(( ($(date +%s%N) - start) / 1000000 ))e-3

"$python" - "$out" "$commit" "$dirty" "$torch_version" "$torch_cuda" "$seconds" "$build" <<'PY'
import json, os, sys
out, commit, dirty, torch, cuda, seconds, build = sys.argv[1:]
libs = json.load(open(f"{out}/libraries.json"))
def gpu_tests(path):
    """Suite.Test names from --gtest_list_tests."""
    names, suite = [], ""
    for line in open(path):
        if not line.startswith(" ") and line.strip().endswith("."):
            suite = line.strip()
        elif line.startswith("  "):
            names.append(suite + line.split()[0])
    return names


files = []
for root, _, names in os.walk(out):
    for n in names:
        p = os.path.join(root, n)
        files.append({"path": os.path.relpath(p, out), "bytes": os.path.getsize(p)})
files.sort(key=lambda f: -f["bytes"])
total = sum(f["bytes"] for f in files)
part = lambda prefix: sum(f["bytes"] for f in files if f["path"].startswith(prefix))
m = {"mode": "binary", "commit": commit, "dirty": dirty == "true", "build": build,
     "torch_built_against": torch, "torch_cuda": cuda,
     "version": open(f"{out}/version.txt").read().strip().splitlines(),
     "gpu_tests": gpu_tests(f"{out}/gpu_tests.txt"),
     "pack_seconds": round(float(seconds), 1), "total_bytes": total,
     "bytes": {"bin": part("bin/") + part("libexec/"), "lib": part("lib/"), "lib-fallback": part("lib-fallback/"), "src": part("src/")},
     "libraries": libs["libraries"], "files": files}
json.dump(m, open(f"{out}/manifest.json", "w"), indent=1)
mib = lambda b: f"{b / 2**20:.1f} MiB"
kinds = {}
for l in libs["libraries"]:
    kinds.setdefault(l["kind"], []).append(l)
with open(f"{out}/manifest.md", "w") as f:
    f.write(f"# GPU kit\n\ncommit {commit}{' (dirty)' if dirty == 'true' else ''}, built against torch {torch} "
            f"(CUDA {cuda}), {build}; packed in {float(seconds):.1f} s\n\n")
    f.write(f"| part | size |\n|---|---|\n" + "".join(f"| {k} | {mib(v)} |\n" for k, v in m["bytes"].items()) +
            f"| **total** | **{mib(total)}** |\n\n")
    f.write("| library | kind | size |\n|---|---|---|\n")
    for l in libs["libraries"]:
        f.write(f"| {l['name']} | {l['kind']} | {mib(l['bytes']) if l['kind'] == 'copied' else 'not packed'} |\n")
print(f"gpu kit: {out}/ {mib(total)} (bin {mib(m['bytes']['bin'])}, lib {mib(m['bytes']['lib'])}: "
      f"{len(kinds.get('copied', []))} copied, lib-fallback "
      f"{mib(m['bytes']['lib-fallback'])}, src {mib(m['bytes']['src'])}), packed in {float(seconds):.1f} s; "
      f"torch {torch}, commit {commit[:12]}{' dirty' if dirty == 'true' else ''}")
PY
