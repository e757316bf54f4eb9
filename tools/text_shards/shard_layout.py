#!/usr/bin/env python3
"""The text shard index layout, read from the C++ headers that define it (docs/TEXT.md).

The one definition of the .tidx layout is C++'s: the packed structs ShardIndexPrefix
(include/shoplens/data/shard_core.h), TextIndexHeader and TextIndexEntry
(include/shoplens/data/text_shards.h), and the magic and version of kTextShardFormat
(src/data/text_shard_format.cpp), with the split codes of include/shoplens/data/manifest.h.
to_text_shards.py packs its shards with the struct formats this
module derives from those lines, so the two writers cannot drift apart: a field added, moved or
resized in C++ moves here too, and a type this module does not know stops the converter.

    python3 tools/text_shards/shard_layout.py     # the layout as JSON (ctest TextShardsConvert.*)
"""
import json
import os
import re
import struct
import sys

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
CORE_H = "include/shoplens/data/shard_core.h"
TEXT_H = "include/shoplens/data/text_shards.h"
MANIFEST_H = "include/shoplens/data/manifest.h"
FORMAT_CPP = "src/data/text_shard_format.cpp"
CODES = {"char": "s", "std::uint8_t": "B", "std::uint16_t": "H", "std::uint32_t": "I", "std::int32_t": "i",
         "std::uint64_t": "Q", "std::int64_t": "q", "float": "f"}


class LayoutError(Exception):
    pass


def source(relative):
    try:
        with open(os.path.join(ROOT, relative), encoding="utf-8") as f:
            return f.read()
    except OSError as e:
        raise LayoutError(f"{relative}: cannot read the text shard layout's definition ({e.strerror})")


def constants(text):
    return {name: int(value) for name, value in re.findall(r"constexpr int (\w+) = (\d+);", text)}


def struct_fields(text, name, where, known):
    """[(field, code, count)] of the packed struct `name`; `known` maps nested structs to their fields."""
    m = re.search(r"struct " + name + r" \{\n(.*?)\n\};", text, re.S)
    if not m:
        raise LayoutError(f"{where}: no 'struct {name}'")
    numbers = constants(text)
    fields = []
    for line in m.group(1).splitlines():
        line = line.split("//")[0].strip()
        if not line:
            continue
        f = re.fullmatch(r"([\w:]+) (\w+)(?:\[(\w+)\])?;", line)
        if not f:
            raise LayoutError(f"{where}: struct {name}: cannot read the field '{line}'")
        kind, field, count = f.group(1), f.group(2), f.group(3) or "1"
        count = int(count) if count.isdigit() else numbers.get(count)
        if count is None:
            raise LayoutError(f"{where}: struct {name}: unknown array size in '{line}'")
        if kind in known:
            fields += [(f"{field}.{inner}", code, n) for inner, code, n in known[kind]]
        elif kind in CODES:
            fields.append((field, CODES[kind], count))
        else:
            raise LayoutError(f"{where}: struct {name}: type '{kind}' has no struct code here")
    return fields


def struct_of(fields):
    return struct.Struct("<" + "".join(f"{n}{c}" if n > 1 or c == "s" else c for _, c, n in fields))


def load():
    """The layout: header and entry (struct, field names), magic, version, token dtypes, field limits."""
    core, text, fmt = source(CORE_H), source(TEXT_H), source(FORMAT_CPP)
    prefix = struct_fields(core, "ShardIndexPrefix", CORE_H, {})
    header = struct_fields(text, "TextIndexHeader", TEXT_H, {"ShardIndexPrefix": prefix})
    entry = struct_fields(text, "TextIndexEntry", TEXT_H, {})
    m = re.search(r"kTextShardFormat = \{\s*\"[^\"]*\",[^\n]*\n\s*\{([^}]*)\},[^\n]*\n\s*(\d+),", fmt)
    dtypes = re.search(r"enum class TokenDtype : std::uint8_t \{ kUInt16 = (\d+), kInt32 = (\d+) \}", text)
    splits = re.search(r"enum class Split : std::uint8_t \{ kTrain = (\d+), kVal = (\d+), kTest = (\d+) \}",
                       source(MANIFEST_H))
    if not m or not dtypes or not splits:
        raise LayoutError(f"{FORMAT_CPP}, {TEXT_H}, {MANIFEST_H}: cannot read the magic, version, token dtypes or splits")
    numbers = constants(text)
    layout = {
        "header": (struct_of(header), [name for name, _, _ in header]),
        "entry": (struct_of(entry), [name for name, _, _ in entry]),
        "magic": "".join(re.findall(r"'(.)'", m.group(1))).encode(),
        "version": int(m.group(2)),
        "dtype_uint16": int(dtypes.group(1)),
        "dtype_int32": int(dtypes.group(2)),
        "max_categorical": numbers["kTextMaxCategorical"],
        "max_numeric": numbers["kTextMaxNumeric"],
        "splits": {"train": int(splits.group(1)), "val": int(splits.group(2)), "test": int(splits.group(3))},
    }
    for part, size in (("TextIndexHeader", layout["header"][0].size), ("TextIndexEntry", layout["entry"][0].size)):
        declared = re.search(r"sizeof\(" + part + r"\) == (\d+)", text)
        if not declared or int(declared.group(1)) != size:
            raise LayoutError(f"{TEXT_H}: {part} is {size} bytes as read here, not the size its static_assert states")
    return layout


def pack(layout_part, values):
    """Packs a dict of field -> value (an array field: a list) in the struct's field order; unnamed
    fields (reserved) are zero."""
    packer, names = layout_part
    flat = []
    for name, code in zip(names, re.findall(r"(\d*)([a-zA-Z])", packer.format[1:])):
        count, kind = int(code[0] or 1), code[1]
        value = values.get(name, b"" if kind == "s" else [0] * count if count > 1 else 0)
        flat += list(value) if count > 1 and kind != "s" else [value]
    return packer.pack(*flat)


def describe(layout):
    """The layout as JSON: each struct's size, format, and its fields' byte offsets."""
    out = {}
    for part in ("header", "entry"):
        packer, names = layout[part]
        codes = re.findall(r"\d*[a-zA-Z]", packer.format[1:])
        offsets = {name: struct.calcsize("<" + "".join(codes[:i])) for i, name in enumerate(names)}
        out[part] = {"size": packer.size, "format": packer.format, "offsets": offsets}
    out.update({k: layout[k] for k in ("version", "dtype_uint16", "dtype_int32", "max_categorical", "max_numeric", "splits")})
    out["magic"] = layout["magic"].decode()
    return out


if __name__ == "__main__":
    try:
        print(json.dumps(describe(load()), indent=2))
    except LayoutError as e:
        print(f"shard_layout: {e}", file=sys.stderr)
        sys.exit(2)
