#!/usr/bin/env python3
"""Convert tokenized Parquet or JSON Lines files into ShopLens text shards (docs/TEXT.md).

Each input row needs input_ids, attention_mask, label (0/1), the split keys shard_id and
created_at, and the metadata columns (missing values allowed: null, "" or NaN). Positions whose
attention_mask is 0 are stripped (the shards are unpadded). Every input row is either written or
listed in <out>/rejected.csv with its file, line and reason.

Parquet needs pyarrow (`pip install pyarrow`; Debian bookworm has no python3-pyarrow package).
JSON Lines needs nothing beyond the standard library.

    python3 tools/text_shards/to_text_shards.py --out shards data/part-*.parquet
    python3 tools/text_shards/to_text_shards.py --out shards --test-from 2025-06-01 --val-from 2025-05-15 rows.jsonl
"""
import argparse
import array
import csv
import datetime
import json
import math
import os
import sys
import zlib

import shard_layout

SPLITS = ("train", "val", "test")


class RowError(Exception):
    pass


def fail(message):
    print("to_text_shards: " + message, file=sys.stderr)
    sys.exit(2)


# The .tidx layout as the C++ headers define it (shard_layout.py): one definition for both writers.
try:
    LAYOUT = shard_layout.load()
except shard_layout.LayoutError as e:
    fail(str(e))


def iter_rows(path):
    """Yields (where, row dict) with a 1-based line (JSONL) or row (Parquet) number."""
    if path.endswith(".parquet") or path.endswith(".pq"):
        yield from iter_parquet_rows(path)
        return
    with open(path, "r", encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            if not line.strip():
                yield f"line {number}", None
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as e:
                yield f"line {number}", RowError(f"not valid JSON ({e.msg})")
                continue
            yield f"line {number}", row if isinstance(row, dict) else RowError("not a JSON object")


def iter_parquet_rows(path):
    """Parquet rows as dicts, one row group at a time. Timestamp columns arrive as unix seconds
    (Arrow stores them as counts since the epoch in UTC): Python's datetime has no nanoseconds, and
    pandas, which pyarrow would otherwise need for them, is not required. A file pyarrow cannot read
    (not Parquet, truncated, a damaged page) stops the conversion naming the file and row group:
    its rows cannot be counted, so they can be neither written nor listed as rejected."""
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        fail(f"{path}: reading Parquet needs pyarrow, which is not installed: run 'pip install pyarrow' "
             "(Debian bookworm has no python3-pyarrow package), or export the data as JSON Lines")
    try:
        reader = pq.ParquetFile(path)
    except (pa.ArrowException, OSError) as e:
        fail(f"{path}: not a readable Parquet file ({e})")
    number = 0
    for group in range(reader.num_row_groups):
        batches = reader.iter_batches(batch_size=4096, row_groups=[group])
        while True:
            try:
                batch = next(batches, None)
            except (pa.ArrowException, OSError) as e:
                fail(f"{path}: row group {group} (after row {number}) cannot be read ({e})")
            if batch is None:
                break
            per_second = {}
            for i, field in enumerate(batch.schema):
                if pa.types.is_timestamp(field.type):
                    per_second[field.name] = {"s": 1, "ms": 10**3, "us": 10**6, "ns": 10**9}[field.type.unit]
                    batch = batch.set_column(i, field.name, batch.column(i).cast(pa.int64()))
            for row in batch.to_pylist():
                number += 1
                for name, divisor in per_second.items():
                    if row[name] is not None:
                        row[name] //= divisor
                yield f"row {number}", row


def is_missing(value):
    return value is None or (isinstance(value, float) and math.isnan(value)) or (isinstance(value, str) and not value.strip())


def to_unix_seconds(value, what):
    if isinstance(value, bool):
        raise RowError(f"{what}: not a time")
    if isinstance(value, (int, float)):
        if isinstance(value, float) and not math.isfinite(value):
            raise RowError(f"{what}: not a time")
        return int(value)
    if isinstance(value, datetime.datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=datetime.timezone.utc)
        return int(value.timestamp())
    if isinstance(value, datetime.date):
        return to_unix_seconds(datetime.datetime(value.year, value.month, value.day), what)
    if isinstance(value, str):
        text = value.strip()
        try:
            return int(text)
        except ValueError:
            pass
        try:
            return to_unix_seconds(datetime.datetime.fromisoformat(text.replace("Z", "+00:00")), what)
        except ValueError:
            raise RowError(f"{what}: '{value}' is neither unix seconds nor an ISO 8601 time")
    raise RowError(f"{what}: not a time")


def int_list(value, what, bools=False):
    """A list of integers; with bools, True/False count as 1/0 (a boolean attention mask)."""
    if is_missing(value):
        raise RowError(f"missing {what}")
    if hasattr(value, "tolist"):
        value = value.tolist()
    if not isinstance(value, (list, tuple)):
        raise RowError(f"{what}: not a list")
    out = []
    for v in value:
        if (isinstance(v, bool) and not bools) or not isinstance(v, (int, float)) or v != int(v):
            raise RowError(f"{what}: {v!r} is not an integer")
        out.append(int(v))
    return out


def parse_label(value):
    if is_missing(value):
        raise RowError("missing label")
    if isinstance(value, str) and value.strip() in ("0", "1"):
        return int(value.strip())
    if isinstance(value, (bool, int, float)) and value in (0, 1):
        return int(value)
    if value == -1:
        raise RowError("unlabelled (label -1)")
    raise RowError(f"label {value!r} is not 0 or 1")


def parse_row(row, args):
    """Returns (tokens, label, categorical values, numeric values, shard_id, created_at)."""
    if isinstance(row, RowError):
        raise row
    ids = int_list(row.get("input_ids"), "input_ids")
    mask = int_list(row.get("attention_mask"), "attention_mask", bools=True)
    if len(ids) != len(mask):
        raise RowError(f"input_ids has {len(ids)} positions but attention_mask {len(mask)}")
    if any(m not in (0, 1) for m in mask):
        raise RowError("attention_mask holds values other than 0 and 1")
    tokens = [t for t, m in zip(ids, mask) if m == 1]
    if not tokens:
        raise RowError("no tokens (attention_mask is all zeros)")
    if min(tokens) < 0:
        raise RowError(f"negative token id {min(tokens)}")
    label = parse_label(row.get("label"))
    if is_missing(row.get("shard_id")):
        raise RowError("missing shard_id")
    shard_id = row.get("shard_id")
    if isinstance(shard_id, bool) or not isinstance(shard_id, (int, float, str)):
        raise RowError("shard_id: not an integer")
    try:
        shard_id = int(shard_id)
    except ValueError:
        raise RowError(f"shard_id: {shard_id!r} is not an integer")
    if not 0 <= shard_id < 2**32:
        raise RowError(f"shard_id {shard_id} out of range")
    if is_missing(row.get("created_at")):
        raise RowError("missing created_at")
    created_at = to_unix_seconds(row.get("created_at"), "created_at")
    categorical = [None if is_missing(row.get(name)) else str(row.get(name)) for name in args.categorical]
    numeric = []
    for name in args.numeric:
        v = row.get(name)
        if is_missing(v):
            numeric.append(float("nan"))
            continue
        try:
            f = float(v)
        except (TypeError, ValueError):
            raise RowError(f"{name}: {v!r} is not a number")
        if math.isinf(f):
            raise RowError(f"{name}: infinite")
        numeric.append(f)
    return tokens, label, categorical, numeric, shard_id, created_at


def write_atomic(path, data):
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


class ShardWriter:
    def __init__(self, out, name, split, vocab_size, num_categorical, num_numeric):
        self.out, self.name, self.split = out, name, split
        self.typecode = "H" if vocab_size <= 65536 else "i"
        self.dtype = LAYOUT["dtype_uint16"] if self.typecode == "H" else LAYOUT["dtype_int32"]
        self.num_categorical, self.num_numeric = num_categorical, num_numeric
        self.tmp = os.path.join(out, name + ".tokens.tmp")
        self.file = open(self.tmp, "wb")
        self.crc = 0
        self.tokens = 0
        self.entries = []

    def add(self, sample_id, tokens, label, codes, numeric, shard_id, created_at):
        data = array.array(self.typecode, tokens)
        if sys.byteorder == "big":
            data.byteswap()
        raw = data.tobytes()
        self.file.write(raw)
        self.crc = zlib.crc32(raw, self.crc)
        codes = list(codes) + [0] * (LAYOUT["max_categorical"] - len(codes))
        numeric = list(numeric) + [0.0] * (LAYOUT["max_numeric"] - len(numeric))
        self.entries.append(shard_layout.pack(LAYOUT["entry"], {
            "sample_id": sample_id, "offset": self.tokens, "length": len(tokens), "label": label,
            "created_at": created_at, "shard_id": shard_id, "split": LAYOUT["splits"][self.split],
            "categorical": codes, "numeric": numeric}))
        self.tokens += len(tokens)

    def finish(self):
        # Tokens first, the index renamed into place last: an index marks a complete shard.
        self.file.flush()
        os.fsync(self.file.fileno())
        self.file.close()
        os.replace(self.tmp, os.path.join(self.out, self.name + ".tokens"))
        body = b"".join(self.entries)
        header = shard_layout.pack(LAYOUT["header"], {
            "prefix.magic": LAYOUT["magic"], "prefix.version": LAYOUT["version"],
            "prefix.entry_size": LAYOUT["entry"][0].size, "prefix.count": len(self.entries),
            "prefix.payload_size": self.tokens, "prefix.payload_crc32": self.crc, "prefix.entries_crc32": zlib.crc32(body),
            "token_dtype": self.dtype, "num_categorical": self.num_categorical, "num_numeric": self.num_numeric})
        write_atomic(os.path.join(self.out, self.name + ".tidx"), header + body)
        return {"name": self.name, "split": self.split, "count": len(self.entries), "tokens": self.tokens,
                "tokens_crc32": self.crc, "index_crc32": zlib.crc32(header + body)}


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("inputs", nargs="+", help="Parquet (.parquet) or JSON Lines files")
    p.add_argument("--out", required=True, help="output folder (created if missing)")
    p.add_argument("--categorical", default="language,source_surface,model_family",
                   help="comma-separated categorical metadata columns (default: %(default)s)")
    p.add_argument("--numeric", default="prompt_length,response_length",
                   help="comma-separated numeric metadata columns (default: %(default)s)")
    p.add_argument("--vocab-size", type=int, default=0, help="token vocabulary size (default: largest id + 1)")
    p.add_argument("--max-length", type=int, default=0,
                   help="longer examples are cut to this many tokens (default: keep all; the longest sets max_length)")
    p.add_argument("--pad-id", type=int, default=0)
    p.add_argument("--cls-id", type=int, default=1)
    p.add_argument("--val-from", help="created_at cut-off (unix seconds or ISO 8601): val from here on")
    p.add_argument("--test-from", help="created_at cut-off: test from here on")
    p.add_argument("--val-fraction", type=float, default=0.1, help="without cut-offs: latest fraction before test is val")
    p.add_argument("--test-fraction", type=float, default=0.1, help="without cut-offs: latest fraction is test")
    p.add_argument("--records-per-shard", type=int, default=65536)
    args = p.parse_args()
    args.categorical = [c for c in args.categorical.split(",") if c]
    args.numeric = [c for c in args.numeric.split(",") if c]
    if len(args.categorical) > LAYOUT["max_categorical"] or len(args.numeric) > LAYOUT["max_numeric"]:
        fail(f"--categorical/--numeric: at most {LAYOUT['max_categorical']} and {LAYOUT['max_numeric']} fields")
    if (args.val_from is None) != (args.test_from is None):
        fail("--val-from and --test-from go together")
    if args.records_per_shard < 1:
        fail("--records-per-shard must be at least 1")
    if not (0 <= args.val_fraction and 0 <= args.test_fraction and args.val_fraction + args.test_fraction < 1):
        fail("--val-fraction + --test-fraction must be below 1")
    for path in args.inputs:
        if not os.path.isfile(path):
            fail(f"{path}: no such file")
    os.makedirs(args.out, exist_ok=True)

    # Pass 1: validate every row, collect vocabularies, the largest id and the times.
    rejected = []            # (file, where, reason)
    accepted = set()         # global row numbers
    vocab = [set() for _ in args.categorical]
    times = []
    max_id = -1
    longest = 0
    row_no = 0
    total = 0
    for path in args.inputs:
        for where, row in iter_rows(path):
            if row is None:
                continue  # blank line
            total += 1
            try:
                tokens, label, cat, num, shard_id, created_at = parse_row(row, args)
                if args.vocab_size and max(tokens) >= args.vocab_size:
                    raise RowError(f"token id {max(tokens)} outside --vocab-size {args.vocab_size}")
            except RowError as e:
                rejected.append((path, where, str(e)))
            else:
                accepted.add(row_no)
                for k, v in enumerate(cat):
                    if v is not None:
                        vocab[k].add(v)
                times.append(created_at)
                max_id = max(max_id, max(tokens))
                longest = max(longest, len(tokens))
            row_no += 1
    for path, where, reason in rejected:
        print(f"rejected: {path} {where}: {reason}", file=sys.stderr)
    if not accepted:
        fail("no usable rows")
    vocab_size = args.vocab_size or max(max_id + 1, args.cls_id + 1, args.pad_id + 1)
    vocabularies = [sorted(v) for v in vocab]
    codes = [{v: i + 1 for i, v in enumerate(vs)} for vs in vocabularies]
    for name, vs in zip(args.categorical, vocabularies):
        if len(vs) > 65535:
            fail(f"{name}: more than 65535 distinct values")

    if args.val_from is not None:
        try:
            val_from = to_unix_seconds(args.val_from, "--val-from")
            test_from = to_unix_seconds(args.test_from, "--test-from")
        except RowError as e:
            fail(str(e))
        if val_from > test_from:
            fail("--val-from is after --test-from")
        rule = "by created_at cut-offs given on the command line"
    else:
        times.sort()
        n = len(times)
        n_test = round(args.test_fraction * n)
        n_val = round(args.val_fraction * n)
        test_from = times[n - n_test] if n_test else times[-1] + 1
        val_from = times[max(0, n - n_test - n_val)] if n_val else test_from
        rule = f"by created_at: the latest {args.test_fraction:g} is test, the {args.val_fraction:g} before it val"

    def split_of(t):
        return "test" if t >= test_from else "val" if t >= val_from else "train"

    # Pass 2: write each split's shards in input order.
    writers = {}
    shards = []
    counts = {s: 0 for s in SPLITS}
    positives = {s: 0 for s in SPLITS}
    truncated = 0
    row_no = 0
    for path in args.inputs:
        for where, row in iter_rows(path):
            if row is None:
                continue
            this = row_no
            row_no += 1
            if this not in accepted:
                continue
            tokens, label, cat, num, shard_id, created_at = parse_row(row, args)
            if args.max_length and len(tokens) > args.max_length:
                tokens = tokens[:args.max_length]
                truncated += 1
            split = split_of(created_at)
            w = writers.get(split)
            if w is None:
                index = sum(1 for s in shards if s["split"] == split)
                w = writers[split] = ShardWriter(args.out, f"{split}-{index:05d}", split, vocab_size,
                                                 len(args.categorical), len(args.numeric))
            w.add(this, tokens, label, [0 if v is None else codes[k][v] for k, v in enumerate(cat)], num,
                  shard_id, created_at)
            counts[split] += 1
            positives[split] += label
            if len(w.entries) >= args.records_per_shard:
                shards.append(w.finish())
                del writers[split]
    for split in SPLITS:
        if split in writers:
            shards.append(writers.pop(split).finish())
    shards.sort(key=lambda s: (SPLITS.index(s["split"]), s["name"]))

    with open(os.path.join(args.out, "rejected.csv"), "w", newline="", encoding="utf-8") as f:
        out = csv.writer(f)
        out.writerow(["file", "where", "reason"])
        out.writerows(rejected)
    info = {
        "format": "shoplens-text-shards",
        "format_version": 1,
        "vocab_size": vocab_size,
        "max_length": args.max_length or longest,
        "pad_id": args.pad_id,
        "cls_id": args.cls_id,
        "token_dtype": "uint16" if vocab_size <= 65536 else "int32",
        "metadata": {"categorical": [{"name": n, "vocabulary": v} for n, v in zip(args.categorical, vocabularies)],
                     "numeric": args.numeric},
        "split_rule": {"key": "created_at", "val_from": val_from, "test_from": test_from, "description": rule},
        "shards": shards,
        "source": {"inputs": args.inputs, "rows": total, "written": len(accepted), "rejected": len(rejected),
                   "truncated": truncated},
    }
    # Written last: a folder without it was interrupted.
    write_atomic(os.path.join(args.out, "text_dataset.json"), (json.dumps(info, indent=2) + "\n").encode())
    if len(accepted) + len(rejected) != total:
        fail(f"internal error: {len(accepted)} written + {len(rejected)} rejected != {total} rows")
    for s in SPLITS:
        share = positives[s] / counts[s] if counts[s] else 0.0
        print(f"{s}: {counts[s]} examples, {share:.1%} positive")
    print(f"rows: {total}, written: {len(accepted)}, rejected: {len(rejected)} (rejected.csv), "
          f"truncated: {truncated}, shards: {len(shards)}, vocab_size: {vocab_size}")


if __name__ == "__main__":
    main()
