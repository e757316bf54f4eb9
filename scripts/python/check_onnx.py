#!/usr/bin/env python3
"""Holds `shoplens export --format onnx|triton` files against the ONNX checker and ONNX Runtime.

Usage: check_onnx.py CASES.json   (written by tests/e2e/test_onnx_export_e2e.cpp)

CASES.json: {"cases": [{"model": NAME, "onnx": PATH, "tolerance": 1e-4,
                        "runs": [{"inputs": {NAME: {"file", "dtype", "shape"}},
                                  "logits": {"file", "dtype", "shape"}}],
                        "metadata": {KEY: VALUE},          (optional: must equal metadata_props)
                        "triton_config": PATH}]}            (optional: config.pbtxt to check)
Each run's inputs are raw little-endian arrays; "logits" are ShopLens's (LibTorch's) for them.
Prints one JSON line per case: {"model", "checker": "ok", "max_abs_diff": [per run], "batches": [...]}
and exits 1 when a check fails (the line then holds "error").
"""
import json
import re
import sys

import numpy as np
import onnx
import onnxruntime as ort


def read_array(spec):
    return np.fromfile(spec["file"], dtype=spec["dtype"]).reshape(spec["shape"])


def parse_pbtxt(text):
    """A protobuf text-format parser for what config.pbtxt uses: fields, messages, lists."""
    tokens = re.findall(r'"(?:[^"\\]|\\.)*"|[{}\[\]:,]|[^\s{}\[\]:,"]+', re.sub(r"#[^\n]*", "", text))
    pos = 0

    def value():
        nonlocal pos
        tok = tokens[pos]
        pos += 1
        if tok == "{":
            return message("}")
        if tok == "[":
            items = []
            while tokens[pos] != "]":
                items.append(value())
                if tokens[pos] == ",":
                    pos += 1
            pos += 1
            return items
        if tok.startswith('"'):
            return tok[1:-1]
        return int(tok) if re.fullmatch(r"-?\d+", tok) else tok

    def message(end):
        nonlocal pos
        fields = {}
        while pos < len(tokens) and tokens[pos] != end:
            name = tokens[pos]
            pos += 1
            if tokens[pos] == ":":
                pos += 1
            fields.setdefault(name, []).append(value())
            if pos < len(tokens) and tokens[pos] == ",":
                pos += 1
        pos += 1
        return fields

    return message(None)


ONNX_TO_TRITON = {1: "TYPE_FP32", 6: "TYPE_INT32", 7: "TYPE_INT64", 9: "TYPE_BOOL"}


def check_triton(path, model):
    config = parse_pbtxt(open(path).read())
    assert config["platform"] == ["onnxruntime_onnx"], config["platform"]
    max_batch = config["max_batch_size"][0]
    assert max_batch >= 1
    for key, values in (("input", model.graph.input), ("output", model.graph.output)):
        declared = config[key][0]
        assert [d["name"][0] for d in declared] == [v.name for v in values], (key, declared)
        for d, v in zip(declared, values):
            assert d["data_type"][0] == ONNX_TO_TRITON[v.type.tensor_type.elem_type], (v.name, d["data_type"])
            dims = [x.dim_value if x.HasField("dim_value") else -1 for x in v.type.tensor_type.shape.dim]
            assert dims[0] == -1, f"{v.name}: the ONNX batch axis is not dynamic"
            assert d["dims"][0] == dims[1:], (v.name, d["dims"][0], dims[1:])
    batching = config["dynamic_batching"][0]
    preferred = batching["preferred_batch_size"][0]
    assert preferred and all(1 <= b <= max_batch for b in preferred), preferred
    assert batching["max_queue_delay_microseconds"][0] >= 0
    return {"max_batch_size": max_batch, "preferred_batch_size": preferred,
            "max_queue_delay_microseconds": batching["max_queue_delay_microseconds"][0]}


def check_case(case):
    out = {"model": case["model"]}
    onnx.checker.check_model(case["onnx"], full_check=True)
    out["checker"] = "ok"
    model = onnx.load(case["onnx"])
    assert max(o.version for o in model.opset_import if o.domain in ("", "ai.onnx")) >= 17
    metadata = {p.key: p.value for p in model.metadata_props}
    for key, expected in case.get("metadata", {}).items():
        assert metadata.get(key) == expected, f"metadata {key}: {metadata.get(key)!r} != {expected!r}"
    session = ort.InferenceSession(case["onnx"], providers=["CPUExecutionProvider"])
    out["max_abs_diff"], out["batches"], out["max_abs_logit"] = [], [], 0.0
    for run in case["runs"]:
        feeds = {name: read_array(spec) for name, spec in run["inputs"].items()}
        (logits,) = session.run(["logits"], feeds)
        expected = read_array(run["logits"])
        assert logits.shape == expected.shape, (logits.shape, expected.shape)
        out["max_abs_diff"].append(float(np.abs(logits.astype(np.float64) - expected).max()))
        out["batches"].append(int(logits.shape[0]))
        out["max_abs_logit"] = max(out["max_abs_logit"], float(np.abs(expected).max()))
    if "triton_config" in case:
        out["triton"] = check_triton(case["triton_config"], model)
    tolerance = case.get("tolerance", 1e-4)
    if max(out["max_abs_diff"], default=0.0) > tolerance:
        out["error"] = f"ONNX Runtime differs from ShopLens by more than {tolerance}"
    return out


def main():
    cases = json.load(open(sys.argv[1]))["cases"]
    failed = False
    for case in cases:
        try:
            result = check_case(case)
        except Exception as e:  # report every case, then fail
            result = {"model": case["model"], "error": f"{type(e).__name__}: {e}"}
        failed |= "error" in result
        print(json.dumps(result), flush=True)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
