#!/usr/bin/python3
"""Load a `shoplens export` model folder into Python PyTorch and verify it.

    /usr/bin/python3 scripts/python/load_shoplens_model.py MODEL_DIR [--variant fp32|bf16|fp16]

ResNets load into torchvision's models by parameter name, the small CNN into SmallCNN of
scripts/bench/difficulty.py, ViTs into timm's VisionTransformer when timm is installed. The
model card's verification input (x[i] = sin(0.007 i + 0.3)) must reproduce its logits.
Needs only torch (+ torchvision / timm for those families): the safetensors file is read here.
Import `load(model_dir)` to get (model, card) in your own code.
"""

import json
import os
import struct
import sys

import torch

DTYPES = {"F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16, "F64": torch.float64,
          "I64": torch.int64, "I32": torch.int32, "U8": torch.uint8}


def read_safetensors(path):
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    body = data[8 + n:]
    tensors = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        begin, end = info["data_offsets"]
        t = torch.frombuffer(bytearray(body[begin:end]), dtype=DTYPES[info["dtype"]]) if end > begin else \
            torch.empty(0, dtype=DTYPES[info["dtype"]])
        tensors[name] = t.reshape(info["shape"])
    return tensors


def build(arch):
    name, classes = arch["name"], arch["num_classes"]
    if name.startswith("resnet"):
        import torchvision
        return getattr(torchvision.models, name)(num_classes=classes)
    if name == "small_cnn":
        sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bench"))
        from difficulty import SmallCNN
        return SmallCNN(classes)
    if name.startswith("vit_"):
        import timm
        return timm.create_model(name + "_patch16_224", num_classes=classes, img_size=arch["image_size"])
    raise SystemExit(f"unknown architecture {name}")


def verification_input(size):
    n = 2 * 3 * size * size
    return torch.sin(torch.arange(n, dtype=torch.float64) * 0.007 + 0.3).float().view(2, 3, size, size)


def load(model_dir, variant="fp32"):
    with open(os.path.join(model_dir, "model_card.json")) as f:
        card = json.load(f)
    model = build(card["architecture"])
    file = "model.safetensors" if variant == "fp32" else f"model.{variant}.safetensors"
    state = {k: v.float() if v.is_floating_point() else v for k, v in read_safetensors(os.path.join(model_dir, file)).items()}
    model.load_state_dict(state, strict=True)
    return model.eval(), card


def main():
    model_dir = sys.argv[1]
    variant = sys.argv[sys.argv.index("--variant") + 1] if "--variant" in sys.argv else "fp32"
    model, card = load(model_dir, variant)
    with torch.no_grad():
        logits = model(verification_input(card["architecture"]["image_size"])).double()
    reference = torch.tensor(card["verification"]["logits"], dtype=torch.float64)
    diff = (logits - reference).abs().max().item()
    same_top1 = bool((logits.argmax(1) == reference.argmax(1)).all())
    ok = diff <= card["verification"]["tolerance"] if variant == "fp32" else same_top1
    print(json.dumps({"model": card["architecture"]["name"], "variant": variant, "max_abs_logit_diff": diff,
                      "top1_agreement": same_top1, "verified": ok}))
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
