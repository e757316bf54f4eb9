#!/usr/bin/env python3
"""Parquet around `shoplens score` (docs/SCORING.md, "Parquet"): a Parquet manifest in, Parquet
predictions out. Both directions stream a record batch at a time, so memory does not grow with
the row count.

    score_parquet.py to-csv catalog.parquet manifest.csv [--path-column path] [--id-column id] [--label-column label]
    score_parquet.py to-parquet predictions.csv predictions.parquet

to-csv writes score's CSV manifest (id, path and, when the column exists, label) in the Parquet
file's row order, so row R of the predictions is row R of the Parquet file. A null path stays an
empty field: score makes it an error row, as it does for an empty path in a CSV. to-parquet types
the predictions' columns: row int64, confidence and p_<class> float64 (null on error rows), the
others strings. Needs pyarrow (pinned in scripts/python/requirements-torch2.txt; Debian bookworm
has no python3-pyarrow).
"""
import argparse
import csv
import sys

BATCH_ROWS = 65536


def fail(message):
    print("score_parquet: " + message, file=sys.stderr)
    sys.exit(1)


def text(value):
    return "" if value is None else str(value)


def to_csv(args):
    import pyarrow.parquet as pq

    try:
        source = pq.ParquetFile(args.input)
    except Exception as e:  # noqa: BLE001 - pyarrow raises several kinds for a file that is not Parquet
        fail(f"{args.input} is not a readable Parquet file: {e}")
    names = source.schema_arrow.names
    if args.path_column not in names:
        fail(f"{args.input} has no column '{args.path_column}' (columns: {', '.join(names)}); give --path-column")
    columns = [c for c in (args.id_column, args.path_column, args.label_column) if c in names]
    header = ["id" if c == args.id_column else "path" if c == args.path_column else "label" for c in columns]
    rows = 0
    with open(args.output, "w", newline="", encoding="utf-8") as out:
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(header)
        for batch in source.iter_batches(batch_size=BATCH_ROWS, columns=columns):
            values = [batch.column(i).to_pylist() for i in range(batch.num_columns)]
            for r in range(batch.num_rows):
                writer.writerow([text(v[r]) for v in values])
            rows += batch.num_rows
    print(f"score_parquet: {rows} rows -> {args.output}")


def to_parquet(args):
    import pyarrow as pa
    import pyarrow.csv as pcsv
    import pyarrow.parquet as pq

    with open(args.input, newline="", encoding="utf-8") as f:
        header = next(csv.reader(f), None)
    if not header or header[:3] != ["row", "id", "status"]:
        fail(f"{args.input} is not score's predictions.csv (its header is {header})")
    types = {name: pa.string() for name in header}
    types["row"] = pa.int64()
    for name in header:
        if name == "confidence" or name.startswith("p_"):
            types[name] = pa.float64()
    convert = pcsv.ConvertOptions(column_types=types, strings_can_be_null=False, quoted_strings_can_be_null=False)
    reader = pcsv.open_csv(args.input, read_options=pcsv.ReadOptions(block_size=1 << 24), convert_options=convert)
    schema = pa.schema([(name, types[name]) for name in header])
    rows = 0
    with pq.ParquetWriter(args.output + ".tmp", schema) as writer:
        for batch in reader:
            writer.write_batch(batch)
            rows += batch.num_rows
    import os

    os.replace(args.output + ".tmp", args.output)  # a file with the name is complete
    print(f"score_parquet: {rows} rows -> {args.output}")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    verbs = parser.add_subparsers(dest="verb", required=True)
    manifest = verbs.add_parser("to-csv", help="a Parquet manifest into score's CSV manifest")
    manifest.add_argument("input")
    manifest.add_argument("output")
    manifest.add_argument("--path-column", default="path", help="the image path column (default: path)")
    manifest.add_argument("--id-column", default="id", help="the row id column, when present (default: id)")
    manifest.add_argument("--label-column", default="label", help="the label column, when present (default: label)")
    predictions = verbs.add_parser("to-parquet", help="score's predictions.csv into Parquet")
    predictions.add_argument("input")
    predictions.add_argument("output")
    args = parser.parse_args()
    to_csv(args) if args.verb == "to-csv" else to_parquet(args)


if __name__ == "__main__":
    main()
