// `shoplens make-data` through the real binary: a small catalog, its summary, and usage errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include <nlohmann/json.hpp>

#include "test_util.h"

namespace shoplens {
namespace {

using testing::ScratchDir;
using testing::read_text;
using testing::run_shoplens;

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
  for (const char* text : {"--out", "--num-images", "1000", "--seed", "1234", "--image-size-range", "160:640",
                           "--corrupt-fraction", "0.02", "--missing-metadata-fraction", "0.08", "--png-fraction",
                           "0.15", "--threads"})
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

}  // namespace
}  // namespace shoplens
