// The library functions behind the verbs that used to orchestrate in tools/shoplens: load's epoch
// check, verify-ledger's run check, find-batch's job and bench's recorder, each on what it refuses
// before it works.
#include <gtest/gtest.h>

#include "prepare_test_util.h"
#include "shoplens/bench/bench_recorder.h"
#include "shoplens/core/errors.h"
#include "shoplens/data/load_check.h"
#include "shoplens/jobs/find_batch_job.h"
#include "shoplens/jobs/ledger_check.h"
#include "test_util.h"

namespace shoplens {
namespace {

namespace fs = std::filesystem;

// Six images of two classes, all in train, prepared into shards in dir/shards.
fs::path prepared_shards(const testing::ScratchDir& dir) {
  std::string csv = "id,path,label,split\n";
  for (int i = 0; i < 6; ++i) {
    const std::string file = "img/" + std::to_string(i) + ".jpg";
    testing::write_picture_jpeg(dir / ("data/" + file), 40, 32, i);
    csv += "s" + std::to_string(i) + "," + file + "," + (i % 2 ? "good" : "blurry") + ",train\n";
  }
  testing::write_text(dir / "data/manifest.csv", csv);
  PrepareOptions o = testing::prepare_options_for(dir / "data/manifest.csv", dir / "shards", 16, 1);
  o.manifest.val_fraction = 0;  // all six stay in train
  prepare_dataset(o);
  return o.out_dir;
}

Config load_config(const fs::path& shards) {
  Config c;
  c.data.shards = shards.string();
  c.loader.batch_size = 4;
  c.loader.workers = 1;
  c.augment.image_size = 16;
  c.run.threads = 1;
  return c;
}

TEST(LoadCheck, EverySampleOfTheSplitIsDeliveredOncePerEpochAndCounted) {
  testing::ScratchDir dir("load-check");
  const Config config = load_config(prepared_shards(dir));
  LoadCheckOptions o;
  o.epochs = 2;
  o.eval = true;  // no drop_last: every sample comes
  const LoadReport report = run_load_check(config, o);
  EXPECT_EQ(report.samples_in_split, 6u);
  EXPECT_FALSE(report.text);
  ASSERT_EQ(report.epochs.size(), 2u);
  for (const auto& epoch : report.epochs) {
    EXPECT_EQ(epoch.samples, 6);
    EXPECT_EQ(epoch.not_delivered, 0u);
    EXPECT_FALSE(epoch.padding_fraction.has_value());  // image shards
  }
  const std::vector<std::pair<std::string, std::uint64_t>> labels{{"blurry", 6}, {"good", 6}};  // 3 per epoch
  EXPECT_EQ(report.labels_delivered, labels);
  const auto doc = report.to_json();  // load.json
  EXPECT_EQ(doc.at("kind"), "image");
  EXPECT_EQ(doc.at("split"), "train");
  EXPECT_EQ(doc.at("labels_delivered").at("good"), 6);
  EXPECT_EQ(doc.at("epochs").at(1).at("not_delivered"), 0);
}

TEST(LoadCheck, NoShardsIsAUsageError) { EXPECT_THROW(run_load_check(Config{}, LoadCheckOptions{}), UsageError); }

TEST(LedgerCheck, ARunWithoutItsConfigIsAnIoErrorNamingTheFile) {
  testing::ScratchDir dir("ledger-check");
  try {
    verify_run_ledger(dir.path(), "");
    FAIL() << "no error";
  } catch (const IoError& e) {
    EXPECT_NE(std::string(e.what()).find((dir / "config.json").string()), std::string::npos) << e.what();
  }
}

TEST(LedgerCheck, AConfigWithoutShardsIsADataErrorThatSuggestsTheFlag) {
  testing::ScratchDir dir("ledger-check");
  testing::write_text(dir / "config.json", R"({"data": {}})");
  try {
    verify_run_ledger(dir.path(), "");
    FAIL() << "no error";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("--shards"), std::string::npos) << e.what();
  }
}

TEST(FindBatchJob, ATextModelWithoutAVocabularyIsAUsageErrorBeforeAnyProbe) {
  FindBatchJob job;
  job.config.model.name = "text_tiny";
  EXPECT_THROW(run_find_batch_job(job), UsageError);
  EXPECT_THROW(run_process_probe_job(job, 4), UsageError);
}

TEST(FindBatchJob, AHeadOfOneClassIsAUsageError) {
  FindBatchJob job;
  job.config.data.classes = {"only"};
  EXPECT_THROW(run_find_batch_job(job), UsageError);
}

TEST(BenchRecorder, CountsFailedScenariosAndRegressionsFromItsResultsAndGate) {
  BenchRecorderResult record;
  record.results.resize(3);
  record.results[1].error = "out of memory";
  record.gate.resize(3);
  record.gate[0].compared = record.gate[0].regressed = true;
  record.gate[2].compared = true;
  EXPECT_EQ(record.failed(), 1);
  EXPECT_EQ(record.regressed(), 1);
  EXPECT_EQ(BenchRecorderResult{}.failed() + BenchRecorderResult{}.regressed(), 0);
}

TEST(BenchRecorder, AMissingBaselineStopsItBeforeAnyScenarioOrOutput) {
  testing::ScratchDir dir("recorder");
  BenchRecorderOptions o;
  o.config = testing::source_dir() + "/configs/bench_ci.json";
  o.out = dir / "out";
  o.baseline = dir / "no-such-results.jsonl";
  try {
    run_bench_recorder(o);
    ADD_FAILURE() << "a missing baseline was accepted";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("no-such-results.jsonl"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(fs::exists(o.out));
}

}  // namespace
}  // namespace shoplens
