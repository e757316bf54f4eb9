// tools/text_shards/to_text_shards.py on real Parquet files written by pyarrow (several row groups,
// nulls, NaN, nanosecond and millisecond timestamps, a boolean attention mask, dictionary-encoded
// strings, broken rows and a damaged file), then the shards through `shoplens load --verify`.
// Needs the Python peer with pyarrow: the torch2 build's venv (scripts/venv.sh) pins it, so there
// a missing pyarrow fails the test; elsewhere (Debian's python3 has no python3-pyarrow) it skips.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "shoplens/data/text_shards.h"
#include "test_util.h"

namespace shoplens {
namespace {

namespace fs = std::filesystem;
using testing::read_json;
using testing::run_shell;
using testing::run_shoplens;

// The writer of the fixture files. part-0: 10 rows in row groups of 3 (4 groups), nanosecond UTC
// times with sub-microsecond parts, int32 ids padded with 0 under an int8 mask; row 5 has no label,
// row 8 a null inside input_ids. part-1: 5 rows in row groups of 2, millisecond times, a boolean
// mask, other column types; row 2's mask is shorter than its ids, row 4 has label 7. damaged: part-0
// with row group 2's pages overwritten.
constexpr const char* kWriter = R"PY(
import sys
import pyarrow as pa
import pyarrow.parquet as pq

out = sys.argv[1]
T0 = 1_700_000_000
n = 10
ids = [[1, 10 + i, 20 + i, 0, 0] for i in range(n)]
ids[7] = [1, None, 3, 0, 0]
part0 = pa.table({
    "input_ids": pa.array(ids, type=pa.list_(pa.int32())),
    "attention_mask": pa.array([[1, 1, 1, 0, 0]] * n, type=pa.list_(pa.int8())),
    "label": pa.array([i % 2 if i != 4 else None for i in range(n)], type=pa.int8()),
    "language": pa.array([None if i == 2 else ["en", "de", "fr"][i % 3] for i in range(n)]).dictionary_encode(),
    "source_surface": pa.array(["api" if i % 2 else "chat" for i in range(n)]),
    "model_family": pa.array([""] * n),
    "prompt_length": pa.array([None if i == 1 else i for i in range(n)], type=pa.int32()),
    "response_length": pa.array([float("nan") if i == 3 else 0.5 * i for i in range(n)], type=pa.float64()),
    "shard_id": pa.array([i // 4 for i in range(n)], type=pa.int64()),
    # second i, plus 999999999 ns on the odd rows: floor, not rounding, gives the second
    "created_at": pa.array([(T0 + i) * 10**9 + (999_999_999 if i % 2 else 0) for i in range(n)],
                           type=pa.timestamp("ns", tz="UTC")),
})
pq.write_table(part0, f"{out}/part-0.parquet", row_group_size=3)
m = 5
part1 = pa.table({
    "input_ids": pa.array([[1, 30 + i, 31 + i] for i in range(m)], type=pa.large_list(pa.uint16())),
    "attention_mask": pa.array([[True, True, i != 0] if i != 1 else [True, True] for i in range(m)],
                               type=pa.list_(pa.bool_())),
    "label": pa.array([1, 0, 1, 7, 0], type=pa.int64()),
    "language": pa.array(["de", "de", None, "en", "en"]),
    "source_surface": pa.array([None, "batch", "batch", "api", "api"]),
    "model_family": pa.array(["b"] * m),
    "prompt_length": pa.array([1.0, 2.0, None, 4.0, 5.0], type=pa.float32()),
    "response_length": pa.array([None] * m, type=pa.float32()),
    "shard_id": pa.array([7, 7, 8, 8, 9], type=pa.uint32()),
    "created_at": pa.array([(T0 + 100 + i) * 1000 for i in range(m)], type=pa.timestamp("ms")),
})
pq.write_table(part1, f"{out}/part-1.parquet", row_group_size=2)

meta = pq.ParquetFile(f"{out}/part-0.parquet").metadata
assert meta.num_row_groups == 4, meta.num_row_groups
data = bytearray(open(f"{out}/part-0.parquet", "rb").read())
col = meta.row_group(2).column(0)
start = col.dictionary_page_offset or col.data_page_offset
data[start:start + col.total_compressed_size] = b"\xff" * col.total_compressed_size
open(f"{out}/damaged.parquet", "wb").write(bytes(data))
print("row groups", meta.num_row_groups, pq.ParquetFile(f"{out}/part-1.parquet").metadata.num_row_groups)
)PY";

TEST(E2eTextParquet, RowGroupsNullsBrokenRowsAndADamagedFile) {
  const std::string missing = testing::pyarrow_missing();
  if (!missing.empty()) {
    if (testing::python_is_the_venv())
      FAIL() << "the ShopLens venv must have pyarrow (scripts/python/requirements-torch2.txt): " << missing;
    GTEST_SKIP() << missing;
  }
  testing::ScratchDir dir("text-parquet");
  testing::write_text(dir / "write.py", kWriter);
  auto written = run_shell(testing::python() + " " + (dir / "write.py").string() + " " + dir.path().string());
  ASSERT_EQ(written.exit_code, 0) << written.output;
  ASSERT_NE(written.output.find("row groups 4 3"), std::string::npos) << written.output;

  const std::string convert = testing::python() + " " + testing::source_dir() + "/tools/text_shards/to_text_shards.py";
  const fs::path out = dir / "shards";
  // val from second 8 of part-0, test from part-1 (second 100 on).
  auto r = run_shell(convert + " --out " + out.string() + " --val-from 1700000008 --test-from 1700000100 " +
                     (dir / "part-0.parquet").string() + " " + (dir / "part-1.parquet").string());
  ASSERT_EQ(r.exit_code, 0) << r.output;

  // Every row is written or rejected, the rejected ones with file, row and reason.
  const auto rejected = testing::read_text(out / "rejected.csv");
  for (const char* line :
       {"part-0.parquet,row 5,missing label", "part-0.parquet,row 8,input_ids: None is not an integer",
        "part-1.parquet,row 2,input_ids has 3 positions but attention_mask 2",
        "part-1.parquet,row 4,label 7 is not 0 or 1"})
    EXPECT_NE(rejected.find(line), std::string::npos) << line << " not in\n" << rejected;
  const auto info = read_json(out / "text_dataset.json");
  EXPECT_EQ(info["source"]["rows"], 15);
  EXPECT_EQ(info["source"]["written"], 11);
  EXPECT_EQ(info["source"]["rejected"], 4);
  EXPECT_EQ(info["max_length"], 3);   // padding stripped
  EXPECT_EQ(info["vocab_size"], 36);  // largest id 35 (part-1 row 5) + 1
  // Nulls and empty strings are missing values, not vocabulary.
  EXPECT_EQ(info["metadata"]["categorical"][0]["vocabulary"], (nlohmann::json{"de", "en", "fr"}));
  EXPECT_EQ(info["metadata"]["categorical"][2]["vocabulary"], (nlohmann::json{"b"}));

  // Splits by the times: part-0 rows 1-8 are seconds 0-7 (train; 5 and 8 rejected), rows 9-10
  // seconds 8 and 9.999999999 (val), part-1 rows 1, 3 (test's first seconds), 5.
  auto train = open_text_split(out, Split::kTrain);
  auto val = open_text_split(out, Split::kVal);
  auto test = open_text_split(out, Split::kTest);
  ASSERT_EQ(train->size(), 6u);
  ASSERT_EQ(val->size(), 2u);
  ASSERT_EQ(test->size(), 3u);
  EXPECT_EQ(verify_text_shards(out).examples, 11u);

  // Train holds part-0 rows 1, 2, 3, 4, 6, 7 in that order; row 2: its ids without the padding.
  std::vector<std::int64_t> tokens(5, -1);
  ASSERT_EQ(train->copy_tokens(1, tokens.data(), tokens.size()), 3u);
  EXPECT_EQ(tokens, (std::vector<std::int64_t>{1, 11, 21, -1, -1}));
  std::vector<std::int64_t> cat(3, -1);
  std::vector<float> num(2, -1);
  train->metadata(1, cat.data(), num.data());  // "de", "api", "" (missing); prompt_length null
  EXPECT_EQ(cat, (std::vector<std::int64_t>{1, 1, 0}));
  EXPECT_TRUE(std::isnan(num[0]));
  EXPECT_FLOAT_EQ(num[1], 0.5f);
  train->metadata(2, cat.data(), num.data());  // row 3: language null
  EXPECT_EQ(cat[0], 0);
  // part-1 row 1: the boolean mask's False drops the last id.
  ASSERT_EQ(test->copy_tokens(0, tokens.data(), tokens.size()), 2u);
  EXPECT_EQ(tokens[1], 30);
  EXPECT_EQ(test->label(0), 1);

  // The shards load: checksums, every example once.
  auto load = run_shoplens("load --shards " + out.string() + " --out " + (dir / "load").string() +
                           " --verify --batch-size 2 --epochs 1 --set text.max_length=8");
  ASSERT_EQ(load.exit_code, 0) << load.output;
  const auto loaded = read_json(dir / "load" / "load.json");
  EXPECT_EQ(loaded["samples_in_split"], 6);
  EXPECT_EQ(loaded["epochs"][0]["samples"].get<int>() + loaded["epochs"][0]["not_delivered"].get<int>(), 6);

  // A damaged file stops the conversion (exit 2) naming the file and row group: its rows cannot be
  // counted, so they are neither written nor rejected.
  auto damaged =
      run_shell(convert + " --out " + (dir / "damaged-out").string() + " " + (dir / "damaged.parquet").string());
  EXPECT_EQ(damaged.exit_code, 2) << damaged.output;
  EXPECT_NE(damaged.output.find("damaged.parquet: row group 2"), std::string::npos) << damaged.output;
  EXPECT_EQ(damaged.output.find("Traceback"), std::string::npos) << damaged.output;
  EXPECT_FALSE(fs::exists(dir / "damaged-out" / "text_dataset.json"));
  fs::copy_file(dir / "write.py", dir / "x.parquet");
  auto not_parquet = run_shell(convert + " --out " + (dir / "np-out").string() + " " + (dir / "x.parquet").string());
  EXPECT_EQ(not_parquet.exit_code, 2) << not_parquet.output;
  EXPECT_NE(not_parquet.output.find("x.parquet: not a readable Parquet file"), std::string::npos) << not_parquet.output;
}

}  // namespace
}  // namespace shoplens
