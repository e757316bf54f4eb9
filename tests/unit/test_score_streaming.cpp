// The row streaming of score, predict and evaluate: CSV and list inputs read a window of rows at a
// time (forward, or from the start again), a changed input is an error, the chunk stamps that
// verify a resumed score job, and the bounded-memory batch statistics.
#include <gtest/gtest.h>

#include <fstream>
#include <random>

#include <fmt/format.h>

#include "infer/batch_inference.h"
#include "infer/score_chunks.h"
#include "shoplens/core/errors.h"
#include "shoplens/core/stats.h"
#include "shoplens/data/csv.h"
#include "shoplens/infer/scorer.h"
#include "test_util.h"

namespace shoplens {
namespace {

namespace fs = std::filesystem;

// A CSV of `rows` rows: id r<i>, path img-<i>.jpg, label c<i % 3>.
fs::path write_manifest(const fs::path& dir, std::size_t rows) {
  const fs::path file = dir / "rows.csv";
  std::ofstream out(file);
  out << "id,path,label\n";
  for (std::size_t r = 0; r < rows; ++r) out << fmt::format("r{},img-{}.jpg,c{}\n", r, r, r % 3);
  return file;
}

TEST(ScoreRowsWindow, ACsvIsReadAWindowAtATimeForwardOrFromTheStartAgain) {
  testing::ScratchDir dir("rows-window");
  const auto rows = open_score_rows(write_manifest(dir.path(), 3000), {});
  ASSERT_EQ(rows->size(), 3000u);
  EXPECT_TRUE(rows->has_labels());
  rows->load_window(1024, 2048);
  EXPECT_EQ(rows->id(1024), "r1024");
  EXPECT_EQ(rows->label(2047), "c1");
  EXPECT_THROW(rows->id(0), std::out_of_range);  // not held
  EXPECT_THROW(rows->id(2048), std::out_of_range);
  rows->load_window(2048, 3000);
  EXPECT_EQ(rows->id(2999), "r2999");
  rows->load_window(10, 20);  // an earlier row: read from the start again
  EXPECT_EQ(rows->id(10), "r10");
  EXPECT_EQ(rows->identity(10), "r10\n" + (dir.path() / "img-10.jpg").string() + "\n");
  EXPECT_THROW(rows->load_window(2990, 3001), std::out_of_range);
}

TEST(ScoreRowsWindow, AnInputThatLosesRowsWhileReadIsAnError) {
  testing::ScratchDir dir("rows-changed");
  const fs::path file = write_manifest(dir.path(), 10000);  // more than the blocks read ahead
  const auto rows = open_score_rows(file, {});
  write_manifest(dir.path(), 100);
  try {
    rows->load_window(9000, 10000);
    FAIL() << "a shorter input was read as if whole";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("changed while it was read"), std::string::npos) << e.what();
  }
}

TEST(ScoreRowsWindow, AListKeepsCommentsOutAndMakesAnOverlongLineAnErrorRow) {
  testing::ScratchDir dir("rows-list");
  const fs::path file = dir / "rows.txt";
  testing::write_text(file, "# a comment\n\na.jpg\r\n" + std::string(kMaxCsvRecordBytes + 10, 'x') + "\n  b.jpg  ");
  const auto rows = open_score_rows(file, {});
  ASSERT_EQ(rows->size(), 3u);
  rows->load_window(0, 3);
  EXPECT_EQ(rows->id(0), "line-3");
  EXPECT_EQ(rows->identity(0), "line-3\n" + (dir.path() / "a.jpg").string() + "\n");
  EXPECT_EQ(rows->id(1), "line-4");
  try {
    rows->image(1);
    FAIL() << "an overlong line was read as a path";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("rows.txt line 4: longer than"), std::string::npos) << e.what();
  }
  EXPECT_EQ(rows->identity(2), "line-5\n" + (dir.path() / "b.jpg").string() + "\n");
}

TEST(ChunkStamp, FormatsAndParsesAndRejectsAnythingElse) {
  ChunkStamp stamp{2048, 1500, kRowWindow, {0x0123456789abcdefULL, 0xffffffffffffffffULL}, std::nullopt};
  const std::string line = format_chunk_stamp(stamp);
  ASSERT_EQ(line.back(), '\n');
  const auto parsed = parse_chunk_stamp(line.substr(0, line.size() - 1));
  ASSERT_TRUE(parsed);
  EXPECT_EQ(parsed->first_row, 2048u);
  EXPECT_EQ(parsed->rows, 1500u);
  EXPECT_EQ(parsed->block_rows, kRowWindow);
  EXPECT_EQ(parsed->blocks, stamp.blocks);
  for (const char* bad : {"", "7,img7,ok,a,0.5,0.5,0.5,", "#shoplens-chunk first_row=1 rows=2 block_rows=3",
                          "#shoplens-chunk first_row=-1 rows=2 block_rows=3 fingerprints=0123456789abcdef",
                          "#shoplens-chunk first_row=1 rows=2 block_rows=3 fingerprints=0123",
                          "#shoplens-chunk first_row=1 rows=2 block_rows=3 fingerprints=0123456789abcdeg",
                          "#shoplens-chunk first_row=1 rows=2 block_rows=3 fingerprints=0123456789abcdef extra=1"})
    EXPECT_FALSE(parse_chunk_stamp(bad)) << bad;
}

// A chunk records what scoring it measured, so a rerun that reuses it still knows the job's rate;
// a stamp from before that (no measurement) still verifies its rows.
TEST(ChunkStamp, CarriesTheImagesAndSecondsItsScoringMeasured) {
  const ChunkStamp stamp{0, 16, kRowWindow, {0x0123456789abcdefULL}, ScoredFigures{16, 0.25}};
  const std::string line = format_chunk_stamp(stamp);
  const auto parsed = parse_chunk_stamp(line.substr(0, line.size() - 1));
  ASSERT_TRUE(parsed && parsed->scored) << line;
  EXPECT_EQ(parsed->scored->images, 16);
  EXPECT_DOUBLE_EQ(parsed->scored->seconds, 0.25);
  const auto older =
      parse_chunk_stamp("#shoplens-chunk first_row=0 rows=16 block_rows=4096 fingerprints=0123456789abcdef");
  ASSERT_TRUE(older);
  EXPECT_FALSE(older->scored);
  for (const char* bad :
       {"#shoplens-chunk first_row=0 rows=16 block_rows=4096 fingerprints=0123456789abcdef scored_images=16",
        "#shoplens-chunk first_row=0 rows=16 block_rows=4096 fingerprints=0123456789abcdef scored_images=16 "
        "scored_seconds=-1",
        "#shoplens-chunk first_row=0 rows=16 block_rows=4096 fingerprints=0123456789abcdef scored_images=16 "
        "scored_seconds=nan",
        "#shoplens-chunk first_row=0 rows=16 rows=16 block_rows=4096 fingerprints=0123456789abcdef"})
    EXPECT_FALSE(parse_chunk_stamp(bad)) << bad;
}

// A rerun that reuses every chunk reports the rate they recorded, never 0 images/s; with nothing
// measured at all it says so.
TEST(JobThroughput, ARerunThatReusesEveryChunkReportsTheirRecordedRate) {
  BatchTimings nothing_scored;
  ChunkCounts reused;
  reused.reused = 2;
  reused.recorded = ScoredFigures{300, 2.0};
  const JobThroughput rerun = job_throughput(nothing_scored, reused);
  ASSERT_TRUE(rerun.measured());
  EXPECT_DOUBLE_EQ(rerun.images_per_second(), 150.0);
  EXPECT_NE(rerun.source().find("recorded"), std::string::npos) << rerun.source();
  EXPECT_EQ(rerun.to_json()["images_per_second"], 150.0);

  BatchTimings scored;
  scored.images = 100;
  scored.wall_seconds = 2.0;
  const JobThroughput mixed = job_throughput(scored, reused);
  EXPECT_DOUBLE_EQ(mixed.images_per_second(), 100.0);  // (300 + 100) / (2 + 2)

  ChunkCounts unmeasured;
  unmeasured.reused = 1;
  unmeasured.reused_unmeasured = 1;
  const JobThroughput none = job_throughput(nothing_scored, unmeasured);
  EXPECT_FALSE(none.measured());
  EXPECT_EQ(none.images_per_second(), 0.0);
  EXPECT_TRUE(none.to_json()["images_per_second"].is_null());
  EXPECT_NE(none.source().find("not measured"), std::string::npos) << none.source();
  EXPECT_NE(none.source().find("1 reused chunk recorded no timing"), std::string::npos) << none.source();
}

TEST(ChunkStamp, TheFingerprintOfRowsChangesWithAnyRow) {
  testing::ScratchDir dir("rows-print");
  const auto before = open_score_rows(write_manifest(dir.path(), 40), {});
  before->load_window(0, 40);
  const std::uint64_t print = rows_fingerprint(*before, 0, 40);
  EXPECT_EQ(rows_fingerprint(*before, 0, 40), print);
  EXPECT_NE(rows_fingerprint(*before, 1, 40), print);
  std::string text = testing::read_text(dir / "rows.csv");
  text.replace(text.find("img-5.jpg"), 9, "img-X.jpg");
  testing::write_text(dir / "rows.csv", text);
  const auto after = open_score_rows(dir / "rows.csv", {});
  after->load_window(0, 40);
  EXPECT_NE(rows_fingerprint(*after, 0, 40), print);
  EXPECT_EQ(rows_fingerprint(*after, 6, 40), rows_fingerprint(*before, 6, 40));
}

TEST(DurationHistogram, PercentilesWithinOnePercentInConstantMemory) {
  std::mt19937 rng(7);
  std::lognormal_distribution<double> ms(1.0, 0.8);
  std::vector<double> all;
  DurationHistogram histogram;
  for (int i = 0; i < 20000; ++i) {
    all.push_back(ms(rng));
    histogram.add(all.back());
  }
  EXPECT_EQ(histogram.count(), 20000);
  for (double q : {0.0, 0.5, 0.95, 0.99, 1.0})
    EXPECT_NEAR(histogram.percentile(q), percentile(all, q), 0.011 * percentile(all, q)) << q;
  EXPECT_EQ(DurationHistogram().percentile(0.5), 0.0);
  DurationHistogram one;
  one.add(3.25);
  EXPECT_EQ(one.percentile(0.95), 3.25);
}

TEST(DurationHistogram, CountedIntegersGiveNumpysPercentiles) {
  const std::map<int, std::int64_t> counts{{0, 3}, {2, 1}, {5, 2}};  // 0 0 0 2 5 5
  const std::vector<double> values{0, 0, 0, 2, 5, 5};
  for (double q : {0.0, 0.25, 0.5, 0.9, 1.0}) EXPECT_DOUBLE_EQ(percentile_of_counts(counts, q), percentile(values, q));
  EXPECT_EQ(percentile_of_counts({}, 0.5), 0.0);
}

}  // namespace
}  // namespace shoplens
