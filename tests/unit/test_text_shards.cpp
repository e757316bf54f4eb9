// The tokenized text shard format, its reader, the synthetic text generator and the Parquet/JSONL
// conversion script.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <fstream>
#include <limits>
#include <tuple>
#include <utility>

#include <nlohmann/json.hpp>

#include "shoplens/core/atomic_file.h"
#include "shoplens/core/errors.h"
#include "shoplens/data/open_dataset.h"
#include "shoplens/data/shard_format.h"
#include "shoplens/data/synth_text.h"
#include "shoplens/data/text_shards.h"
#include "shoplens/data/text_task.h"
#include "test_util.h"

namespace shoplens {
namespace {

namespace fs = std::filesystem;
const float kNaN = std::numeric_limits<float>::quiet_NaN();

TextExample example(std::uint64_t id, std::vector<std::int32_t> tokens, int label, Split split,
                    std::vector<std::uint16_t> cat, std::vector<float> num) {
  TextExample e;
  e.sample_id = id;
  e.tokens = std::move(tokens);
  e.label = label;
  e.split = split;
  e.categorical = std::move(cat);
  e.numeric = std::move(num);
  e.shard_id = static_cast<std::uint32_t>(id / 2);
  e.created_at = 1700000000 + static_cast<std::int64_t>(id);
  return e;
}

TextDatasetInfo small_info(int vocab_size) {
  TextDatasetInfo info;
  info.vocab_size = vocab_size;
  info.max_length = 64;
  info.categorical = {{"language", {"en", "de"}}, {"surface", {"chat", "api", "batch"}}};
  info.numeric = {"prompt_length"};
  info.split_rule.val_from = 1700000003;
  info.split_rule.test_from = 1700000004;
  return info;
}

// train: ids 0-2 (two shards), val: id 3, test: id 4.
std::vector<TextExample> small_examples(int vocab_size) {
  const int big = vocab_size - 1;
  return {example(0, {1, 5, 6, big}, 0, Split::kTrain, {1, 3}, {12.0f}),
          example(1, {1, 7}, 1, Split::kTrain, {0, 2}, {kNaN}),
          example(2, {1, big, big, 9, 10, 11}, 0, Split::kTrain, {2, 0}, {3.5f}),
          example(3, {1, 4}, 1, Split::kVal, {1, 1}, {7.0f}), example(4, {1, 2, 3}, 0, Split::kTest, {0, 0}, {kNaN})};
}

void write_folder(const fs::path& dir, int vocab_size) {
  TextDatasetInfo info = small_info(vocab_size);
  const auto ex = small_examples(vocab_size);
  TextShardWriter a(dir, "train-00000", Split::kTrain, info.layout());
  a.add(ex[0]);
  a.add(ex[1]);
  info.shards.push_back(a.finish());
  TextShardWriter b(dir, "train-00001", Split::kTrain, info.layout());
  b.add(ex[2]);
  info.shards.push_back(b.finish());
  TextShardWriter v(dir, "val-00000", Split::kVal, info.layout());
  v.add(ex[3]);
  info.shards.push_back(v.finish());
  TextShardWriter t(dir, "test-00000", Split::kTest, info.layout());
  t.add(ex[4]);
  info.shards.push_back(t.finish());
  write_text_dataset_info(dir, info);
}

void expect_same(const TextSource& src, std::size_t i, const TextExample& e) {
  EXPECT_EQ(src.sample_id(i), e.sample_id);
  EXPECT_EQ(src.label(i), e.label);
  ASSERT_EQ(src.length(i), e.tokens.size());
  std::vector<std::int64_t> out(e.tokens.size() + 3, -7);
  ASSERT_EQ(src.copy_tokens(i, out.data(), out.size()), e.tokens.size());
  for (std::size_t k = 0; k < e.tokens.size(); ++k)
    EXPECT_EQ(out[k], e.tokens[k]) << "sample " << e.sample_id << " token " << k;
  EXPECT_EQ(out[e.tokens.size()], -7);  // nothing written past the example
  std::vector<std::int64_t> cat(src.num_categorical(), -1);
  std::vector<float> num(src.num_numeric(), -1);
  src.metadata(i, cat.data(), num.data());
  for (std::size_t k = 0; k < e.categorical.size(); ++k) EXPECT_EQ(cat[k], e.categorical[k]);
  for (std::size_t k = 0; k < e.numeric.size(); ++k) {
    if (std::isnan(e.numeric[k]))
      EXPECT_TRUE(std::isnan(num[k])) << "sample " << e.sample_id;
    else
      EXPECT_EQ(num[k], e.numeric[k]);
  }
}

class TextShardsDtype : public ::testing::TestWithParam<int> {};

TEST_P(TextShardsDtype, RoundTripEverySplit) {
  const int vocab = GetParam();
  testing::ScratchDir dir("text-shards");
  write_folder(dir.path(), vocab);
  const auto ex = small_examples(vocab);
  auto train = open_text_split(dir.path(), Split::kTrain);
  ASSERT_EQ(train->size(), 3u);
  for (std::size_t i = 0; i < 3; ++i) expect_same(*train, i, ex[i]);
  EXPECT_EQ(train->num_categorical(), 2);
  EXPECT_EQ(train->num_numeric(), 1);
  EXPECT_EQ(train->categorical_cardinalities(), (std::vector<int>{3, 4}));
  EXPECT_EQ(train->vocab_size(), vocab);
  auto val = open_text_split(dir.path(), Split::kVal);
  ASSERT_EQ(val->size(), 1u);
  expect_same(*val, 0, ex[3]);
  auto test = open_text_split(dir.path(), Split::kTest);
  ASSERT_EQ(test->size(), 1u);
  expect_same(*test, 0, ex[4]);

  // Truncation copies only the first max_len tokens.
  std::vector<std::int64_t> out(8, -7);
  EXPECT_EQ(train->copy_tokens(2, out.data(), 2), 2u);
  EXPECT_EQ(out[1], vocab - 1);
  EXPECT_EQ(out[2], -7);

  const auto report = verify_text_shards(dir.path());
  EXPECT_EQ(report.shards, 4u);
  EXPECT_EQ(report.examples, 5u);
  EXPECT_TRUE(report.unlisted_files.empty());
  const auto info = read_text_dataset_info(dir.path());
  EXPECT_EQ(info.split_rule.key, "created_at");
  EXPECT_EQ(info.split_rule.test_from, 1700000004);
  EXPECT_EQ(info.categorical[1].vocabulary[2], "batch");
  // uint16 when the vocabulary fits, int32 beyond.
  const auto bytes_per_token = fs::file_size(dir / "train-00000.tokens") / 6;
  EXPECT_EQ(bytes_per_token, vocab <= 65536 ? 2u : 4u);
}

INSTANTIATE_TEST_SUITE_P(TextShards, TextShardsDtype, ::testing::Values(1000, 65536, 70000));

// The one dataset opener tells text shards by their folder and opens them as text.
TEST(OpenDataset, ATextFolderOpensAsTextWithItsSplitAndClassNames) {
  testing::ScratchDir dir("open-dataset");
  write_folder(dir.path(), 1000);
  const OpenedSplit train = open_split(dir.path(), Split::kTrain, /*verify=*/true);
  EXPECT_TRUE(train.text);
  ASSERT_NE(train.source, nullptr);
  EXPECT_EQ(train.source->size(), 3u);
  EXPECT_EQ(train.class_names, text_class_names());
  EXPECT_EQ(train.loader, nullptr);
  EXPECT_EQ(open_split(dir.path(), Split::kVal).source->size(), 1u);
}

TEST(TextShards, InMemorySourceMatchesTheInterface) {
  InMemoryTextSource src(100, {2, 3}, 1);
  for (auto& e : small_examples(100)) src.add(e);
  ASSERT_EQ(src.size(), 5u);
  for (std::size_t i = 0; i < 5; ++i) expect_same(src, i, small_examples(100)[i]);
  EXPECT_EQ(src.categorical_cardinalities(), (std::vector<int>{3, 4}));
  EXPECT_THROW(src.add(example(9, {1, 100}, 0, Split::kTrain, {0, 0}, {1.0f})), Error);  // token id = vocab
  EXPECT_THROW(src.add(example(9, {1}, 0, Split::kTrain, {3, 0}, {1.0f})), Error);       // code past vocabulary
}

TEST(TextShards, WriterRejectsWhatTheFormatCannotHold) {
  testing::ScratchDir dir("text-shards");
  TextShardWriter w(dir.path(), "s", Split::kTrain, {100, 1, 0});
  EXPECT_THROW(w.add(example(0, {1, 100}, 0, Split::kTrain, {0}, {})), Error);
  EXPECT_THROW(w.add(example(0, {1, -1}, 0, Split::kTrain, {0}, {})), Error);
  EXPECT_THROW(w.add(example(0, {1}, -1, Split::kTrain, {0}, {})), Error);
  EXPECT_THROW(w.add(example(0, {1}, 0, Split::kVal, {0}, {})), Error);
  EXPECT_THROW(w.add(example(0, {}, 0, Split::kTrain, {0}, {})), Error);
  EXPECT_THROW(w.add(example(0, {1}, 0, Split::kTrain, {}, {})), Error);
}

// ---- corrupted indexes ----

std::string index_bytes(const fs::path& dir) {
  write_folder(dir, 1000);
  return read_file(dir / "train-00000.tidx");
}

// Rewrites the entries checksum so that the parser reaches the field checks.
void fix_crc(std::string& bytes) {
  TextIndexHeader h;
  std::memcpy(&h, bytes.data(), sizeof h);
  h.prefix.entries_crc32 = crc32_of(bytes.data() + sizeof h, bytes.size() - sizeof h);
  std::memcpy(bytes.data(), &h, sizeof h);
}

template <class F>
void expect_rejected(const std::string& bytes, const std::string& needle, F&& parse) {
  try {
    parse(bytes);
    ADD_FAILURE() << "accepted an index that should fail with '" << needle << "'";
  } catch (const DataError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("bad.tidx"), std::string::npos) << what;
    EXPECT_NE(what.find(needle), std::string::npos) << what;
  }
}

TEST(TextShardsCorrupt, EachDefectThrowsDataErrorNamingFileAndEntry) {
  testing::ScratchDir dir("text-shards");
  const std::string good = index_bytes(dir.path());
  auto parse = [](const std::string& b) {
    return parse_text_shard_index(reinterpret_cast<const std::uint8_t*>(b.data()), b.size(), "bad.tidx", {2, 3});
  };
  const auto index = parse(good);
  ASSERT_EQ(index.entries.size(), 2u);
  const std::size_t e1 = sizeof(TextIndexHeader) + sizeof(TextIndexEntry);  // second entry

  std::string b = good;
  b[0] = 'X';
  expect_rejected(b, "bad magic", parse);
  expect_rejected(good.substr(0, 20), "shorter than the 48-byte header", parse);
  expect_rejected(good.substr(0, good.size() - 1), "entries", parse);
  b = good;
  b[good.size() - 3] ^= 0x40;
  expect_rejected(b, "checksum", parse);

  b = good;  // second example's length runs past the tokens file
  std::uint32_t len = 5000;
  std::memcpy(&b[e1 + offsetof(TextIndexEntry, length)], &len, 4);
  fix_crc(b);
  expect_rejected(b, "entry 1 (sample 1): tokens", parse);

  b = good;
  std::int32_t label = 2;
  std::memcpy(&b[e1 + offsetof(TextIndexEntry, label)], &label, 4);
  fix_crc(b);
  expect_rejected(b, "entry 1 (sample 1): label 2", parse);
  label = -1;
  std::memcpy(&b[e1 + offsetof(TextIndexEntry, label)], &label, 4);
  fix_crc(b);
  expect_rejected(b, "unlabelled", parse);

  b = good;  // "surface" has 3 values: code 4 is past it
  std::uint16_t code = 4;
  std::memcpy(&b[e1 + offsetof(TextIndexEntry, categorical) + 2], &code, 2);
  fix_crc(b);
  expect_rejected(b, "entry 1 (sample 1): categorical field 1 has code 4", parse);

  b = good;
  b[e1 + offsetof(TextIndexEntry, split)] = 3;
  fix_crc(b);
  expect_rejected(b, "unknown split", parse);
}

TEST(TextShardsCorrupt, OpeningAFolderWithABadIndexNamesTheFile) {
  testing::ScratchDir dir("text-shards");
  std::string b = index_bytes(dir.path());
  b[0] = 'X';
  write_file_atomic(dir / "train-00000.tidx", b);
  try {
    open_text_split(dir.path(), Split::kTrain);
    FAIL() << "opened a corrupted shard";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("train-00000.tidx"), std::string::npos) << e.what();
  }
  // Other splits do not read it.
  EXPECT_EQ(open_text_split(dir.path(), Split::kVal)->size(), 1u);
}

TEST(TextShardsCorrupt, FlippedTokenBitIsCaughtByVerifyOnly) {
  testing::ScratchDir dir("text-shards");
  write_folder(dir.path(), 1000);
  std::string tokens = read_file(dir / "train-00001.tokens");
  tokens[4] ^= 0x01;
  write_file_atomic(dir / "train-00001.tokens", tokens);
  EXPECT_EQ(open_text_split(dir.path(), Split::kTrain)->size(), 3u);  // open skips the tokens CRC
  try {
    verify_text_shards(dir.path());
    FAIL() << "verify accepted a corrupted tokens file";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("train-00001.tokens"), std::string::npos) << e.what();
  }
}

TEST(TextShardsCorrupt, TruncatedTokensFileIsRejectedOnOpen) {
  testing::ScratchDir dir("text-shards");
  write_folder(dir.path(), 1000);
  const std::string tokens = read_file(dir / "train-00000.tokens");
  write_file_atomic(dir / "train-00000.tokens", tokens.substr(0, tokens.size() - 2));
  EXPECT_THROW(open_text_split(dir.path(), Split::kTrain), DataError);
}

TEST(TextShardsCorrupt, MissingDatasetKeyIsNamed) {
  testing::ScratchDir dir("text-shards");
  write_folder(dir.path(), 1000);
  std::string json = read_file(dir / kTextShardFormat.dataset_file);
  const auto at = json.find("\"vocab_size\"");
  ASSERT_NE(at, std::string::npos);
  json.replace(at, 12, "\"vocab_sizes\"");
  write_file_atomic(dir / kTextShardFormat.dataset_file, json);
  try {
    read_text_dataset_info(dir.path());
    FAIL();
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("text_dataset.json"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("'vocab_size'"), std::string::npos) << e.what();
  }
}

TEST(TextShardsTorn, TokensWithoutIndexAreNeverRead) {
  testing::ScratchDir dir("text-shards");
  write_folder(dir.path(), 1000);
  // A writer that dies before finish() leaves nothing that looks complete.
  {
    TextShardWriter w(dir.path(), "train-00002", Split::kTrain, small_info(1000).layout());
    w.add(small_examples(1000)[0]);
  }
  EXPECT_FALSE(fs::exists(dir / "train-00002.tokens"));
  // A tokens file committed, then a crash before its index: unlisted, reported, not read.
  testing::write_text(dir / "train-00003.tokens", std::string(8, '\x01'));
  EXPECT_EQ(open_text_split(dir.path(), Split::kTrain)->size(), 3u);
  const auto report = verify_text_shards(dir.path());
  EXPECT_EQ(report.unlisted_files, (std::vector<std::string>{"train-00003.tokens"}));
  // A listed shard whose index is gone is an error naming it.
  fs::remove(dir / "val-00000.tidx");
  try {
    open_text_split(dir.path(), Split::kVal);
    FAIL();
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("val-00000.tidx"), std::string::npos) << e.what();
  }
}

// ---- the generator ----

SynthTextSummary generate(const fs::path& dir, int n, std::uint64_t seed, int max_length = 512, int vocab = 8192) {
  SynthTextOptions o;
  o.out_dir = dir;
  o.num_examples = n;
  o.seed = seed;
  o.max_length = max_length;
  o.vocab_size = vocab;
  o.records_per_shard = 700;
  return generate_synthetic_text(o);
}

TEST(SynthText, StatisticsMatchTheSeed) {
  testing::ScratchDir dir("synth-text");
  const auto s = generate(dir.path(), 3000, 5);
  EXPECT_EQ(s.examples, 3000u);
  EXPECT_EQ(s.per_split[0] + s.per_split[1] + s.per_split[2], 3000u);
  EXPECT_NEAR(double(s.per_split[1]), 300, 3);
  EXPECT_NEAR(double(s.per_split[2]), 300, 3);
  const double positives = double(s.positives_per_split[0] + s.positives_per_split[1] + s.positives_per_split[2]);
  EXPECT_NEAR(positives / 3000, 0.18, 0.01);
  for (int k = 0; k < 3; ++k) EXPECT_NEAR(double(s.positives_per_split[k]) / double(s.per_split[k]), 0.18, 0.01) << k;
  for (const auto& [field, fraction] : s.missing_fraction) EXPECT_NEAR(fraction, 0.06, 0.015) << field;
  EXPECT_GE(s.length_min, 16u);
  EXPECT_EQ(s.length_max, 512u);  // the long tail reaches max_length
  EXPECT_GT(s.truncated, 0u);
  EXPECT_LT(s.length_p50, 256u);
  EXPECT_NEAR(double(s.label_flips) / 3000, 0.05, 0.015);
  EXPECT_EQ(verify_text_shards(dir.path()).examples, 3000u);

  // Split by time: every train example is older than every val example, val older than test.
  const auto info = read_text_dataset_info(dir.path());
  std::int64_t newest[3] = {INT64_MIN, INT64_MIN, INT64_MIN}, oldest[3] = {INT64_MAX, INT64_MAX, INT64_MAX};
  for (const auto& shard : info.shards) {
    TextShardReader r(dir.path(), shard.name, info, shard.index_crc32, false);
    for (std::size_t i = 0; i < r.size(); ++i) {
      const int k = r.entry(i).split;
      newest[k] = std::max(newest[k], r.entry(i).created_at);
      oldest[k] = std::min(oldest[k], r.entry(i).created_at);
    }
  }
  EXPECT_LT(newest[0], oldest[1]);
  EXPECT_LT(newest[1], oldest[2]);
  EXPECT_EQ(oldest[2], info.split_rule.test_from);
  EXPECT_EQ(oldest[1], info.split_rule.val_from);

  // Every example starts with cls; metadata codes within the vocabularies; tokens complete.
  auto train = open_text_split(dir.path(), Split::kTrain);
  std::vector<std::int64_t> toks(512), cat(3);
  std::vector<float> num(2);
  for (std::size_t i = 0; i < train->size(); ++i) {
    ASSERT_GE(train->copy_tokens(i, toks.data(), toks.size()), 16u);
    ASSERT_EQ(toks[0], info.cls_id);
    train->metadata(i, cat.data(), num.data());
    for (int k = 0; k < 3; ++k) ASSERT_LE(cat[k], static_cast<std::int64_t>(info.categorical[k].vocabulary.size()));
  }
}

TEST(SynthText, SameSeedSameBytesOtherSeedOtherBytes) {
  testing::ScratchDir a("synth-text"), b("synth-text"), c("synth-text");
  generate(a.path(), 500, 9);
  generate(b.path(), 500, 9);
  generate(c.path(), 500, 10);
  for (const char* f : {"train-00000.tokens", "train-00000.tidx", "test-00000.tidx", "text_dataset.json"})
    EXPECT_EQ(read_file(a / f), read_file(b / f)) << f;
  EXPECT_NE(read_file(a / "train-00000.tokens"), read_file(c / "train-00000.tokens"));
}

TEST(SynthText, LongSequencesAndLargeVocabularies) {
  testing::ScratchDir dir("synth-text");
  const auto s = generate(dir.path(), 400, 3, 2048, 100000);
  EXPECT_GT(s.length_max, 600u);
  EXPECT_LE(s.length_max, 2048u);
  EXPECT_EQ(fs::file_size(dir / "train-00000.tokens") % 4, 0u);  // int32 tokens
  EXPECT_EQ(verify_text_shards(dir.path()).examples, 400u);
}

TEST(SynthText, BadOptionsNameTheFlag) {
  SynthTextOptions o;
  o.max_length = 8;
  try {
    validate_synth_text_options(o);
    FAIL();
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("--max-length"), std::string::npos);
  }
  o = SynthTextOptions{};
  o.vocab_size = 100;
  EXPECT_THROW(validate_synth_text_options(o), UsageError);
}

// ---- tools/text_shards/to_text_shards.py ----

// The converter packs its shards with the layout tools/text_shards/shard_layout.py reads from the
// C++ headers: every field at the offset the compiler gives it, the sizes, magic, version, codes.
TEST(TextShardsConvert, LayoutReadFromTheHeadersIsTheCompilersLayout) {
  if (!fs::exists(testing::python())) GTEST_SKIP() << testing::python() << " not found";
  const auto r =
      testing::run_shell(testing::python() + " " + testing::source_dir() + "/tools/text_shards/shard_layout.py 2>&1");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto layout = nlohmann::json::parse(r.output);
  const std::size_t prefix = offsetof(TextIndexHeader, prefix);
  const std::vector<std::pair<const char*, std::size_t>> header = {
      {"prefix.magic", prefix + offsetof(ShardIndexPrefix, magic)},
      {"prefix.version", prefix + offsetof(ShardIndexPrefix, version)},
      {"prefix.entry_size", prefix + offsetof(ShardIndexPrefix, entry_size)},
      {"prefix.count", prefix + offsetof(ShardIndexPrefix, count)},
      {"prefix.payload_size", prefix + offsetof(ShardIndexPrefix, payload_size)},
      {"prefix.payload_crc32", prefix + offsetof(ShardIndexPrefix, payload_crc32)},
      {"prefix.entries_crc32", prefix + offsetof(ShardIndexPrefix, entries_crc32)},
      {"token_dtype", offsetof(TextIndexHeader, token_dtype)},
      {"num_categorical", offsetof(TextIndexHeader, num_categorical)},
      {"num_numeric", offsetof(TextIndexHeader, num_numeric)},
      {"reserved", offsetof(TextIndexHeader, reserved)}};
  const std::vector<std::pair<const char*, std::size_t>> entry = {
      {"sample_id", offsetof(TextIndexEntry, sample_id)},
      {"offset", offsetof(TextIndexEntry, offset)},
      {"length", offsetof(TextIndexEntry, length)},
      {"label", offsetof(TextIndexEntry, label)},
      {"created_at", offsetof(TextIndexEntry, created_at)},
      {"shard_id", offsetof(TextIndexEntry, shard_id)},
      {"split", offsetof(TextIndexEntry, split)},
      {"reserved", offsetof(TextIndexEntry, reserved)},
      {"categorical", offsetof(TextIndexEntry, categorical)},
      {"numeric", offsetof(TextIndexEntry, numeric)}};
  for (const auto& [part, size, fields] : {std::make_tuple("header", sizeof(TextIndexHeader), header),
                                           std::make_tuple("entry", sizeof(TextIndexEntry), entry)}) {
    EXPECT_EQ(layout.at(part).at("size"), size) << part;
    EXPECT_EQ(layout.at(part).at("offsets").size(), fields.size()) << part << ": every field, no more";
    for (const auto& [field, offset] : fields) EXPECT_EQ(layout.at(part).at("offsets").at(field), offset) << field;
  }
  EXPECT_EQ(layout.at("magic"), std::string(kTextShardFormat.magic, sizeof kTextShardFormat.magic));
  EXPECT_EQ(layout.at("version"), kTextShardFormat.version);
  EXPECT_EQ(layout.at("dtype_uint16"), static_cast<int>(TokenDtype::kUInt16));
  EXPECT_EQ(layout.at("dtype_int32"), static_cast<int>(TokenDtype::kInt32));
  EXPECT_EQ(layout.at("max_categorical"), kTextMaxCategorical);
  EXPECT_EQ(layout.at("max_numeric"), kTextMaxNumeric);
  EXPECT_EQ(layout.at("splits").at("val"), static_cast<int>(Split::kVal));
  EXPECT_EQ(layout.at("splits").at("test"), static_cast<int>(Split::kTest));
}

TEST(TextShardsConvert, JsonLinesRoundTripThroughTheScript) {
  if (!fs::exists(testing::python())) GTEST_SKIP() << testing::python() << " not found";
  testing::ScratchDir dir("text-convert");
  // Row 2 has padding to strip, row 3 misses a label, row 4 an attention mask; nulls are missing
  // metadata; the last two rows are the latest and become val/test by the cut-offs.
  testing::write_text(
      dir / "in.jsonl",
      R"({"input_ids": [1, 5, 9, 70000], "attention_mask": [1, 1, 1, 1], "label": 1, "language": "en", "source_surface": "chat", "model_family": "b", "prompt_length": 12, "response_length": 30.5, "shard_id": 3, "created_at": 100})"
      "\n"
      R"({"input_ids": [1, 7, 8, 0, 0], "attention_mask": [1, 1, 1, 0, 0], "label": 0, "language": null, "source_surface": "api", "model_family": "a", "prompt_length": null, "response_length": 4, "shard_id": 3, "created_at": 101})"
      "\n"
      R"({"input_ids": [1, 2], "attention_mask": [1, 1], "label": null, "language": "de", "source_surface": "api", "model_family": "a", "prompt_length": 1, "response_length": 1, "shard_id": 4, "created_at": 102})"
      "\n"
      R"({"input_ids": [1, 2], "language": "de", "label": 0, "source_surface": "api", "model_family": "a", "prompt_length": 1, "response_length": 1, "shard_id": 4, "created_at": 103})"
      "\n"
      R"({"input_ids": [1, 3, 3], "attention_mask": [1, 1, 1], "label": 0, "language": "de", "model_family": "a", "prompt_length": 2, "response_length": 9, "shard_id": 5, "created_at": 200})"
      "\n"
      R"({"input_ids": [1, 4], "attention_mask": [1, 1], "label": 1, "language": "en", "source_surface": "batch", "model_family": "c", "prompt_length": 5, "response_length": 6, "shard_id": 6, "created_at": 300})"
      "\n");
  const auto out = dir / "shards";
  const auto r = testing::run_shell(
      testing::python() + " " + testing::source_dir() + "/tools/text_shards/to_text_shards.py --out " + out.string() +
      " --vocab-size 70001 --val-from 200 --test-from 300 " + (dir / "in.jsonl").string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("line 3: missing label"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("line 4: missing attention_mask"), std::string::npos) << r.output;

  const auto info = read_text_dataset_info(out);
  ASSERT_EQ(info.categorical.size(), 3u);
  EXPECT_EQ(info.categorical[0].name, "language");
  EXPECT_EQ(info.numeric, (std::vector<std::string>{"prompt_length", "response_length"}));
  auto code = [&](int field, const std::string& value) -> std::uint16_t {
    const auto& v = info.categorical[field].vocabulary;
    return static_cast<std::uint16_t>(std::find(v.begin(), v.end(), value) - v.begin() + 1);
  };
  auto train = open_text_split(out, Split::kTrain);
  ASSERT_EQ(train->size(), 2u);
  TextExample e0 =
      example(0, {1, 5, 9, 70000}, 1, Split::kTrain, {code(0, "en"), code(1, "chat"), code(2, "b")}, {12.0f, 30.5f});
  TextExample e1 = example(1, {1, 7, 8}, 0, Split::kTrain, {0, code(1, "api"), code(2, "a")}, {kNaN, 4.0f});
  expect_same(*train, 0, e0);
  expect_same(*train, 1, e1);
  auto val = open_text_split(out, Split::kVal);
  ASSERT_EQ(val->size(), 1u);
  expect_same(*val, 0, example(4, {1, 3, 3}, 0, Split::kVal, {code(0, "de"), 0, code(2, "a")}, {2.0f, 9.0f}));
  auto test = open_text_split(out, Split::kTest);
  ASSERT_EQ(test->size(), 1u);
  expect_same(*test, 0,
              example(5, {1, 4}, 1, Split::kTest, {code(0, "en"), code(1, "batch"), code(2, "c")}, {5.0f, 6.0f}));
  EXPECT_EQ(verify_text_shards(out).examples, 4u);
  const std::string rejects = read_file(out / "rejected.csv");
  EXPECT_NE(rejects.find("missing label"), std::string::npos) << rejects;
}

}  // namespace
}  // namespace shoplens
