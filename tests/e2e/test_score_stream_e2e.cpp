// End-to-end: `predict` and `score` stream their input. Their peak memory does not grow with the
// number of rows (a list of 20,000 and one of 300,000 unreadable paths: the same peak within a
// small margin), and a resumed `score` job reuses only the chunks whose rows are the ones they
// were scored from: a changed row, or a chunk written without a row fingerprint, is rescored.
#include <gtest/gtest.h>

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "sanitizer.h"
#include "score_shard_fixture.h"
#include "scratch_suite.h"
#include "shoplens/data/csv.h"
#include "test_util.h"

namespace shoplens {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using testing::run_shoplens;

using testing::MeasuredRun;

MeasuredRun run_measured(const std::string& args, const fs::path& log) {
  return testing::run_shoplens_measured(args, log);
}

std::size_t lines_in(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  std::size_t n = 0;
  for (std::string line; std::getline(in, line);) ++n;
  return n;
}

class E2eScoreStream : public testing::ScratchSuite<E2eScoreStream> {
 protected:
  static void SetUpTestSuite() {
    fixture_ = testing::shared_fixture("score-stream", [](const fs::path& dir) {
      const std::string failed = testing::make_exported_model(dir, 40, 11);
      if (!failed.empty()) return failed;
      // 40 rows of the catalog's images (repeated as needed), each with its own id.
      testing::write_catalog_rows(dir, 40);
      return std::string();
    });
  }
  static fs::path model() { return fixture_ / "model"; }

  // A list of `rows` paths that do not exist: every row is an error row, so the job's work is
  // the rows themselves (reading the list, writing the results), not the model.
  static fs::path missing_paths_list(std::size_t rows) {
    const fs::path list = scratch() / fmt::format("missing-{}.txt", rows);
    std::ofstream out(list);
    for (std::size_t r = 0; r < rows; ++r)
      out << fmt::format("/nonexistent-shoplens-images/shelf-{:04d}/photo-{:08d}.jpg\n", r % 997, r);
    return list;
  }

  static std::string score_args(const fs::path& input, const fs::path& out) {
    return "score --weights " + model().string() + " --input " + input.string() + " --out " + out.string() +
           " --chunk-rows 8 -b 4 --workers 1 --threads 1";
  }
  static std::vector<CsvRecord> predictions(const fs::path& out) {
    auto recs = parse_csv(testing::read_text(out / "predictions.csv"));
    recs.erase(recs.begin());  // header
    return recs;
  }

  static fs::path fixture_;
};
fs::path E2eScoreStream::fixture_;

// Runs predict and score over `rows` missing paths; checks every row is accounted for and returns
// the two peaks (KiB).
std::pair<long, long> peaks_over_missing_rows(const fs::path& list, const fs::path& work, std::size_t rows,
                                              const fs::path& model) {
  const fs::path preds = work / "preds.csv";
  const MeasuredRun predict = run_measured("predict --weights " + model.string() + " --input " + list.string() +
                                               " --out " + preds.string() + " --workers 1 --threads 1",
                                           work / "predict.log");
  EXPECT_EQ(predict.exit_code, 0) << predict.output;
  EXPECT_EQ(lines_in(preds), rows + 1) << "one line per row and the header";
  // Chunks of many row windows: neither the rows nor --chunk-rows may decide the memory.
  const MeasuredRun score = run_measured("score --weights " + model.string() + " --input " + list.string() + " --out " +
                                             (work / "scores").string() + " --chunk-rows 50000 --workers 1 --threads 1",
                                         work / "score.log");
  EXPECT_EQ(score.exit_code, 0) << score.output;
  const json report = testing::read_json(work / "scores" / "report.json");
  EXPECT_EQ(report["rows"].get<std::size_t>(), rows);
  EXPECT_EQ(report["rows_error"].get<std::size_t>(), rows);
  EXPECT_EQ(lines_in(work / "scores" / "predictions.csv"), rows + 1);
  // The reasons are a histogram of causes, not one entry per row.
  EXPECT_LE(report["error_reasons"].size(), 64u) << report["error_reasons"].dump().substr(0, 400);
  std::int64_t counted = 0;
  for (const auto& [reason, count] : report["error_reasons"].items()) counted += count.get<std::int64_t>();
  EXPECT_EQ(counted, static_cast<std::int64_t>(rows));
  return {predict.peak_kib, score.peak_kib};
}

TEST_F(E2eScoreStream, PeakMemoryDoesNotGrowWithTheNumberOfRows) {
  // Under AddressSanitizer the process's memory is the sanitizer's: only the row accounting of a
  // smaller run (several row windows and chunks) is checked there.
  const std::size_t small_rows = testing::kAddressSanitizer ? 3000 : 20000;
  const fs::path small_work = scratch() / "small";
  fs::create_directories(small_work);
  const auto small = peaks_over_missing_rows(missing_paths_list(small_rows), small_work, small_rows, model());
  if (testing::kAddressSanitizer) return;

  const std::size_t large_rows = 300000;
  const fs::path large_work = scratch() / "large";
  fs::create_directories(large_work);
  const auto large = peaks_over_missing_rows(missing_paths_list(large_rows), large_work, large_rows, model());
  // 15 times the rows: the peak stays within a quarter of the small run's (the model and the
  // runtime are most of it, ~200 MB; held rows, at ~260 bytes each, added ~80 MB to predict's
  // peak and ~210 MB to score's).
  std::printf("peak RSS: predict %ld / %ld KiB, score %ld / %ld KiB (%zu / %zu rows)\n", small.first, large.first,
              small.second, large.second, small_rows, large_rows);
  EXPECT_LE(large.first, small.first * 5 / 4) << "predict: " << small.first << " KiB for " << small_rows << " rows, "
                                              << large.first << " KiB for " << large_rows;
  EXPECT_LE(large.second, small.second * 5 / 4) << "score: " << small.second << " KiB for " << small_rows << " rows, "
                                                << large.second << " KiB for " << large_rows;
}

// The manifest with row `row`'s path replaced by a file that does not exist.
fs::path with_row_missing(const fs::path& manifest, int row, const fs::path& out) {
  auto records = parse_csv(testing::read_text(manifest));
  std::ofstream file(out);
  for (std::size_t r = 0; r < records.size(); ++r) {
    auto fields = records[r].fields;
    if (static_cast<int>(r) == row + 1) fields[1] = (out.parent_path() / "no_such_image.jpg").string();
    file << csv_line(fields) << "\n";
  }
  return out;
}

TEST_F(E2eScoreStream, AResumedJobRescoresTheChunksWhoseRowsChanged) {
  const fs::path manifest = scratch() / "rows.csv";
  fs::copy_file(fixture_ / "rows.csv", manifest, fs::copy_options::overwrite_existing);
  const fs::path out = scratch() / "resumed";
  ASSERT_EQ(run_shoplens(score_args(manifest, out)).exit_code, 0);
  // An interrupted job: chunks 0 and 1 done (8 rows each), the rest not yet.
  for (const char* name : {"chunk-000002.csv", "chunk-000003.csv", "chunk-000004.csv"})
    ASSERT_TRUE(fs::remove(out / "chunks" / name)) << name;
  fs::remove(out / "predictions.csv");
  fs::remove(out / "report.json");

  // Row 5 (chunk 0) now names a file that does not exist.
  with_row_missing(fixture_ / "rows.csv", 5, manifest);
  auto resumed = run_shoplens(score_args(manifest, out));
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  EXPECT_NE(resumed.output.find("chunk 0 rows changed since it was scored: rescoring"), std::string::npos)
      << resumed.output;
  const auto recs = predictions(out);
  ASSERT_EQ(recs.size(), 40u);
  EXPECT_EQ(recs[5].fields[2], "error");
  EXPECT_NE(recs[5].fields.back().find("cannot read"), std::string::npos) << recs[5].fields.back();
  const json report = testing::read_json(out / "report.json");
  EXPECT_EQ(report["chunks_reused"].get<int>(), 1);  // chunk 1 only
  EXPECT_EQ(report.value("chunks_rescored", -1), 1);
  EXPECT_EQ(report["chunks_written"].get<int>(), 4);

  // The same as a fresh job over the edited manifest, byte for byte.
  const fs::path fresh = scratch() / "fresh";
  ASSERT_EQ(run_shoplens(score_args(manifest, fresh)).exit_code, 0);
  EXPECT_EQ(testing::read_text(out / "predictions.csv"), testing::read_text(fresh / "predictions.csv"));

  // A chunk written without a row fingerprint (by an earlier version) cannot be verified: rescored.
  const fs::path chunk1 = out / "chunks" / "chunk-000001.csv";
  const std::string text = testing::read_text(chunk1);
  const auto stamp = text.rfind("\n#shoplens-chunk ");
  ASSERT_NE(stamp, std::string::npos) << "a chunk ends with its row fingerprints:\n" << text;
  testing::write_text(chunk1, text.substr(0, stamp + 1));
  auto unverified = run_shoplens(score_args(manifest, out));
  ASSERT_EQ(unverified.exit_code, 0) << unverified.output;
  EXPECT_NE(unverified.output.find("chunk 1 has no row fingerprint"), std::string::npos) << unverified.output;
  EXPECT_EQ(testing::read_json(out / "report.json").value("chunks_rescored", -1), 1);
  EXPECT_EQ(testing::read_text(out / "predictions.csv"), testing::read_text(fresh / "predictions.csv"));

  // Unchanged rows: every chunk is reused.
  auto again = run_shoplens(score_args(manifest, out));
  ASSERT_EQ(again.exit_code, 0) << again.output;
  EXPECT_EQ(testing::read_json(out / "report.json")["chunks_reused"].get<int>(), 5);
}

TEST_F(E2eScoreStream, ErrorReasonsAreCountedByCauseAndAFileNameThatIsNotUtf8CostsNoJob) {
  // A Latin-1 file name that does not exist: report.json (JSON, so UTF-8) failed to be written.
  const fs::path list = scratch() / "latin1.txt";
  testing::write_text(list, "/nonexistent-shoplens-images/caf\xe9.jpg\n/nonexistent-shoplens-images/tea.jpg\n");
  const fs::path out = scratch() / "latin1";
  auto r = run_shoplens(score_args(list, out));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const json report = testing::read_json(out / "report.json");
  EXPECT_EQ(report["rows_error"].get<int>(), 2);
  EXPECT_EQ(report["error_reasons"], json({{"cannot read file: No such file or directory", 2}})) << report.dump(2);
  EXPECT_NE(testing::read_text(out / "predictions.csv").find("caf\xe9.jpg"), std::string::npos)
      << "the CSV keeps the name's bytes";
}

TEST_F(E2eScoreStream, AChunkOfManyRowWindowsRescoresOnlyItsChangedWindow) {
  // 12,000 unreadable paths in chunks of 10,000 rows: chunk 0 is three windows (4096, 4096, 1808).
  const fs::path list = scratch() / "windows.txt";
  fs::copy_file(missing_paths_list(12000), list, fs::copy_options::overwrite_existing);
  const std::string args = " --chunk-rows 10000 --workers 1 --threads 1";
  const fs::path out = scratch() / "windows";
  ASSERT_EQ(run_shoplens("score --weights " + model().string() + " --input " + list.string() + " --out " +
                         out.string() + args)
                .exit_code,
            0);
  // Row 5000 (the second window) names another file now.
  std::string text = testing::read_text(list);
  const std::string old_path = fmt::format("photo-{:08d}.jpg", 5000);
  text.replace(text.find(old_path), old_path.size(), "photo-edited.jpg");
  testing::write_text(list, text);

  auto resumed = run_shoplens("score --weights " + model().string() + " --input " + list.string() + " --out " +
                              out.string() + args);
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  EXPECT_NE(resumed.output.find("chunk 0 rows changed since it was scored: rescoring (rows 4096..8192 differ)"),
            std::string::npos)
      << resumed.output;
  const json report = testing::read_json(out / "report.json");
  EXPECT_EQ(report.value("chunks_rescored", -1), 1);
  EXPECT_EQ(report["chunks_reused"].get<int>(), 1);
  EXPECT_EQ(report["images_scored_this_run"].get<int>(), 0);  // unreadable rows: no image reached the model
  const auto recs = predictions(out);
  ASSERT_EQ(recs.size(), 12000u);
  EXPECT_NE(recs[5000].fields.back().find("photo-edited.jpg"), std::string::npos) << recs[5000].fields.back();

  const fs::path fresh = scratch() / "windows-fresh";
  ASSERT_EQ(run_shoplens("score --weights " + model().string() + " --input " + list.string() + " --out " +
                         fresh.string() + args)
                .exit_code,
            0);
  EXPECT_EQ(testing::read_text(out / "predictions.csv"), testing::read_text(fresh / "predictions.csv"));
  // The chunk's rows and fingerprints too; its stamp's measurement (scored_images, scored_seconds)
  // is what each run timed, so it is left out of the comparison.
  const auto without_timing = [](std::string chunk) { return chunk.substr(0, chunk.find(" scored_images=")); };
  EXPECT_EQ(without_timing(testing::read_text(out / "chunks" / "chunk-000000.csv")),
            without_timing(testing::read_text(fresh / "chunks" / "chunk-000000.csv")));
}

}  // namespace
}  // namespace shoplens
