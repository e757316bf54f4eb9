// `shoplens make-data` through the real binary: a small catalog, its summary, and usage errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include <nlohmann/json.hpp>

#include "shoplens/data/text_shards.h"
#include "test_util.h"

namespace shoplens {
namespace {

using testing::read_text;
using testing::run_shoplens;
using testing::ScratchDir;

TEST(E2eMakeData, WritesACatalogWithManifestAndSummary) {
  ScratchDir dir("e2e-make-data");
  const auto out = dir / "catalog";
  const auto r = run_shoplens("make-data --out " + out.string() + " --num-images 40 --image-size-range 64:96");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::string manifest = read_text(out / "manifest.csv");
  EXPECT_EQ(std::count(manifest.begin(), manifest.end(), '\n'), 41) << manifest;
  EXPECT_EQ(manifest.rfind("id,path,label,split,source_channel,", 0), 0u);
  const std::string classes = read_text(out / "classes.txt");
  EXPECT_EQ(std::count(classes.begin(), classes.end(), '\n'), 12);
  const auto summary = nlohmann::json::parse(read_text(out / "make-data.json"));
  EXPECT_EQ(summary.at("num_images"), 40);
  EXPECT_EQ(summary.at("per_class").at("good_image"), 16);  // round(0.41 * 40)
  EXPECT_EQ(summary.at("image_size_range"), nlohmann::json({64, 96}));
  EXPECT_NE(r.output.find("manifest"), std::string::npos) << r.output;
}

TEST(E2eMakeData, HelpShowsEveryDefault) {
  const auto r = run_shoplens("make-data --help");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  for (const char* text :
       {"--out", "--num-images", "1000", "--seed", "1234", "--image-size-range", "160:640", "--corrupt-fraction",
        "0.02", "--missing-metadata-fraction", "0.08", "--png-fraction", "0.15", "--threads"})
    EXPECT_NE(r.output.find(text), std::string::npos) << text << " missing from:\n" << r.output;
}

TEST(E2eMakeData, MalformedSizeRangeIsAUsageErrorNamingTheFlag) {
  ScratchDir dir("e2e-make-data-range");
  for (const char* bad : {"99", "64:abc", "16:64", "200:100"}) {
    const auto r = run_shoplens("make-data --out " + (dir / "out").string() + " --image-size-range " + bad);
    EXPECT_EQ(r.exit_code, 2) << bad << ": " << r.output;
    EXPECT_NE(r.output.find("--image-size-range"), std::string::npos) << r.output;
  }
  EXPECT_FALSE(std::filesystem::exists(dir / "out" / "manifest.csv"));
}

TEST(E2eMakeData, ZeroImagesOrAMissingOutIsAUsageError) {
  ScratchDir dir("e2e-make-data-zero");
  auto r = run_shoplens("make-data --out " + (dir / "out").string() + " --num-images 0");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("--num-images"), std::string::npos) << r.output;
  r = run_shoplens("make-data --num-images 5");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("--out"), std::string::npos) << r.output;
}

TEST(E2eMakeDataText, WritesTextShardsAndASummary) {
  ScratchDir dir("e2e-make-data-text");
  const auto out = dir / "text";
  const auto r = run_shoplens("make-data --task text --out " + out.string() +
                              " --num-examples 300 --max-length 256 --records-per-shard 100 --seed 3");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(std::filesystem::exists(out / "text_dataset.json"));
  EXPECT_TRUE(std::filesystem::exists(out / "train-00000.tokens"));
  EXPECT_TRUE(std::filesystem::exists(out / "train-00001.tidx"));
  EXPECT_FALSE(std::filesystem::exists(out / "manifest.csv"));
  const auto summary = nlohmann::json::parse(read_text(out / "make-data.json"));
  EXPECT_EQ(summary.at("task"), "text");
  EXPECT_EQ(summary.at("num_examples"), 300);
  const auto& splits = summary.at("splits");
  EXPECT_EQ(splits.at("train").at("count").get<int>() + splits.at("val").at("count").get<int>() +
                splits.at("test").at("count").get<int>(),
            300);
  EXPECT_EQ(splits.at("test").at("count"), 30);
  EXPECT_NEAR(summary.at("positive_fraction").get<double>(), 0.18, 0.005);
  for (const char* field : {"language", "source_surface", "model_family", "prompt_length", "response_length"})
    EXPECT_LT(summary.at("missing_fraction").at(field).get<double>(), 0.15) << field;
  EXPECT_LE(summary.at("length").at("max").get<int>(), 256);
  EXPECT_GE(summary.at("length").at("min").get<int>(), 16);
  EXPECT_LT(summary.at("split_rule").at("val_from").get<long long>(),
            summary.at("split_rule").at("test_from").get<long long>());
  // The folder reads back through the loader's interface.
  const auto train = open_text_split(out, Split::kTrain);
  EXPECT_EQ(train->size(), splits.at("train").at("count").get<std::size_t>());
  EXPECT_EQ(train->num_categorical(), 3);
  EXPECT_EQ(train->num_numeric(), 2);
  EXPECT_EQ(verify_text_shards(out).examples, 300u);

  // Same seed, same bytes.
  const auto again = dir / "again";
  ASSERT_EQ(run_shoplens("make-data --task text --out " + again.string() +
                         " --num-examples 300 --max-length 256 --records-per-shard 100 --seed 3")
                .exit_code,
            0);
  EXPECT_EQ(read_text(out / "train-00001.tokens"), read_text(again / "train-00001.tokens"));
  EXPECT_EQ(read_text(out / "text_dataset.json"), read_text(again / "text_dataset.json"));
}

TEST(E2eMakeDataText, BadFlagsAreUsageErrorsNamingTheFlag) {
  ScratchDir dir("e2e-make-data-text-bad");
  const std::string out = " --out " + (dir / "out").string();
  const std::pair<const char*, const char*> cases[] = {
      {"--task text --max-length 8", "--max-length"},
      {"--task text --vocab-size 10", "--vocab-size"},
      {"--task text --num-examples 0", "--num-examples"},
      {"--task text --image-size-range 64:96", "--image-size-range"},
      {"--task image --max-length 128", "--max-length"},
      {"--task audio", "--task"},
      {"--task text --val-fraction 0.6 --test-fraction 0.5", "--test-fraction"},
  };
  for (const auto& [args, flag] : cases) {
    const auto r = run_shoplens(std::string("make-data") + out + " " + args);
    EXPECT_EQ(r.exit_code, 2) << args << ": " << r.output;
    EXPECT_NE(r.output.find(flag), std::string::npos) << args << ": " << r.output;
  }
  EXPECT_FALSE(std::filesystem::exists(dir / "out" / "text_dataset.json"));
}

}  // namespace
}  // namespace shoplens
