#!/usr/bin/env python3
# Run by scripts/check_code.sh: layers point down only (CONTRIBUTING.md, docs/ARCHITECTURE.md "Layers").
# Every include of a ShopLens header in include/, src/ and tools/ -- `#include "shoplens/LAYER/..."`
# (public) or `#include "LAYER/..."` (a layer's private header under src/) -- must name the file's own
# layer or one below it:
#
#   verbs (tools/shoplens) 6 > bench, serve 5 > jobs 4 > batch 3 > train, infer 2 > data, models, dist 1 > core 0
#
# Layers on one level are peers and do not include each other, except through the edges of ALLOWED,
# each with its reason (docs/ARCHITECTURE.md names them). A file outside every layer, or a header
# of a layer this table does not know, fails too: a new layer gets its level here first.
# Usage: scripts/check_layers.py [ROOT]   (ROOT: the tree to check, default this checkout)
import os, re, sys

LEVELS = {"core": 0, "data": 1, "models": 1, "dist": 1, "train": 2, "infer": 2, "batch": 3, "jobs": 4,
          "bench": 5, "serve": 5, "verbs": 6}

# (including layer, included header): why this sideways edge is allowed.
ALLOWED = {
    ("infer", "train/checkpoint.h"): "export and model sources read training checkpoints",
    ("infer", "train/train_state.h"): "a checkpoint's state (EMA weights, the epoch) decides what export writes",
    ("infer", "train/amp.h"): "inference runs under the same autocast precision as training",
    ("infer", "train/metrics.h"): "EvaluationAccumulator's metrics are train's ConfusionMatrix",
    ("models", "data/batch.h"): "a classifier consumes the Batch type the data layer builds",
    # TODO(issue 42): temporary. The section structs moved to their layers (item 2), but core/config.h
    # still assembles the whole Config from them; the job layer is to assemble the schema instead, and
    # these five edges then go.
    ("core", "batch/find_batch_options.h"): "TODO(issue 42): core/config.h still assembles Config",
    ("core", "data/data_options.h"): "TODO(issue 42): core/config.h still assembles Config",
    ("core", "dist/dist_options.h"): "TODO(issue 42): core/config.h still assembles Config",
    ("core", "models/model_options.h"): "TODO(issue 42): core/config.h still assembles Config",
    ("core", "train/train_options.h"): "TODO(issue 42): core/config.h still assembles Config",
}

INCLUDE = re.compile(r'\s*#\s*include\s*(?:"shoplens/(\w+)/([^"]+)"|<shoplens/(\w+)/([^>]+)>|"(\w+)/([^"]+)")')


def layer_of(path):
    """The layer of a file (a path relative to the root), or None outside every layer."""
    parts = path.split("/")
    if parts[0] == "tools":
        return "verbs" if parts[1] == "shoplens" else None
    if parts[0] == "include" and len(parts) > 3 and parts[1] == "shoplens":
        return parts[2]
    if parts[0] == "src":
        # src/torch_compat.h and src/pch/ sit under every layer: the bottom one's rules apply.
        return "core" if len(parts) == 2 or parts[1] == "pch" else parts[1]
    return None


def included(line, root):
    """(layer, header) of a ShopLens include on this line, or None."""
    m = INCLUDE.match(line)
    if not m:
        return None
    if m.group(1) or m.group(3):
        return (m.group(1) or m.group(3)), (m.group(2) or m.group(4))
    # "serve/request_framing.h": a layer's private header, when src/LAYER/ holds it
    layer, rest = m.group(5), m.group(6)
    return (layer, rest) if os.path.isfile(os.path.join(root, "src", layer, rest)) else None


def problems(root):
    for top in ("include", "src", "tools"):
        for folder, _, names in sorted(os.walk(os.path.join(root, top))):
            for name in sorted(n for n in names if n.endswith((".h", ".cpp", ".cu"))):
                path = os.path.relpath(os.path.join(folder, name), root)
                yield from file_problems(root, path)


def file_problems(root, path):
    own = layer_of(path)
    if own is not None and own not in LEVELS:
        yield f"{path}: in folder '{own}', which is no layer: give it a level in scripts/check_layers.py"
        return
    with open(os.path.join(root, path), encoding="utf-8", errors="replace") as lines:
        for number, line in enumerate(lines, 1):
            target = included(line, root)
            if target is None or own is None:
                continue
            layer, header = target
            if layer not in LEVELS:
                yield f"{path}:{number}: includes '{layer}/{header}' of '{layer}', which is no layer"
            elif layer != own and LEVELS[layer] >= LEVELS[own] and (own, f"{layer}/{header}") not in ALLOWED:
                how = "a peer on its level" if LEVELS[layer] == LEVELS[own] else "a layer above it"
                yield (f"{path}:{number}: {own} (level {LEVELS[own]}) includes {layer}/{header} of {layer} "
                       f"(level {LEVELS[layer]}), {how}: layers point down only (CONTRIBUTING.md)")


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
    found = list(problems(root))
    for problem in found:
        print(f"check_layers: {problem}")
    print(f"check_layers: {len(found)} includes against the layer order, {len(ALLOWED)} sideways edges allowed")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
