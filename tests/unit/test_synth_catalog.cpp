// The synthetic catalog generator: exact class counts, determinism across thread counts,
// manifest shape, corruptions that behave as labelled, missing metadata, stratified splits, and
// defects that change the pixels the way their names say.
#include <gtest/gtest.h>
#include <turbojpeg.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <set>
#include <string>
#include <vector>

#include <opencv2/imgproc.hpp>

#include "shoplens/core/errors.h"
#include "shoplens/core/interrupt.h"
#include "shoplens/data/image_io.h"
#include "shoplens/data/synth_catalog.h"
#include "test_util.h"

namespace shoplens {
namespace {

using testing::read_text;
using testing::ScratchDir;
using Row = std::vector<std::string>;

// The generator never needs quoting for its values; a field with a quote would fail the
// column-count checks below.
std::vector<Row> read_csv(const std::filesystem::path& path) {
  std::vector<Row> rows;
  const std::string text = read_text(path);
  std::size_t start = 0;
  while (start < text.size()) {
    const std::size_t end = text.find('\n', start);
    const std::string line = text.substr(start, end - start);
    Row row;
    std::size_t field_start = 0;
    for (;;) {
      const std::size_t comma = line.find(',', field_start);
      row.push_back(line.substr(field_start, comma - field_start));
      if (comma == std::string::npos) break;
      field_start = comma + 1;
    }
    rows.push_back(row);
    if (end == std::string::npos) break;
    start = end + 1;
  }
  return rows;
}

SynthOptions small_options(const std::filesystem::path& out, int n, std::uint64_t seed = 7, int threads = 1) {
  SynthOptions o;
  o.out_dir = out;
  o.num_images = n;
  o.seed = seed;
  o.min_side = 64;
  o.max_side = 96;
  o.threads = threads;
  return o;
}

std::map<std::string, int> class_index() {
  std::map<std::string, int> index;
  for (std::size_t c = 0; c < synth_classes().size(); ++c) index[synth_classes()[c].name] = static_cast<int>(c);
  return index;
}

// BGR, as the generator drew it; empty when the file does not decode.
cv::Mat decode_file(const std::filesystem::path& path) {
  const std::string bytes = read_text(path);
  try {
    const cv::Mat rgb = decode_image(reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size()).rgb;
    cv::Mat bgr;
    cv::cvtColor(rgb, bgr, cv::COLOR_RGB2BGR);
    return bgr;
  } catch (const DataError&) {
    return {};
  }
}

bool starts_with_bytes(const std::string& s, std::initializer_list<unsigned char> magic) {
  if (s.size() < magic.size()) return false;
  std::size_t i = 0;
  for (unsigned char m : magic)
    if (static_cast<unsigned char>(s[i++]) != m) return false;
  return true;
}

// Two catalogs shared by the tests: a small one and a larger one for per-class statistics.
class SynthCatalog : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    small_dir_ = new ScratchDir("synth-small");
    small_ = generate_synthetic_catalog(small_options(small_dir_->path(), 120));
    large_dir_ = new ScratchDir("synth-large");
    SynthOptions o = small_options(large_dir_->path(), 300, 99, 2);
    o.min_side = 160;
    o.max_side = 224;
    large_ = generate_synthetic_catalog(o);
  }
  static void TearDownTestSuite() {
    delete small_dir_;
    delete large_dir_;
  }

  static ScratchDir* small_dir_;
  static ScratchDir* large_dir_;
  static SynthSummary small_;
  static SynthSummary large_;
};

ScratchDir* SynthCatalog::small_dir_ = nullptr;
ScratchDir* SynthCatalog::large_dir_ = nullptr;
SynthSummary SynthCatalog::small_;
SynthSummary SynthCatalog::large_;

TEST(SynthCatalogClasses, SharesSumToOneAndMatchTheBrief) {
  const auto& classes = synth_classes();
  ASSERT_EQ(classes.size(), 12u);
  double total = 0, largest = 0, smallest = 1;
  std::set<std::string> names;
  for (const auto& c : classes) {
    total += c.share;
    largest = std::max(largest, c.share);
    smallest = std::min(smallest, c.share);
    names.insert(c.name);
  }
  EXPECT_NEAR(total, 1.0, 1e-9);
  EXPECT_DOUBLE_EQ(largest, 0.41);
  EXPECT_DOUBLE_EQ(smallest, 0.035);
  EXPECT_EQ(classes.front().name, "good_image");
  EXPECT_EQ(names.size(), 12u);
  for (const char* required : {"blurry", "duplicate", "low_light", "background_issue", "watermark", "good_image"})
    EXPECT_TRUE(names.count(required)) << required;
  EXPECT_EQ(synth_metadata_fields(), (std::vector<std::string>{"source_channel", "device_type", "upload_region",
                                                               "aspect_ratio", "category", "seller_tier"}));
}

TEST(SynthCatalogOptions, RejectsBadOptions) {
  ScratchDir dir("synth-bad");
  const auto with = [&](auto change) {
    SynthOptions o = small_options(dir.path(), 10);
    change(o);
    return o;
  };
  EXPECT_THROW(validate_synth_options(with([](SynthOptions& o) { o.num_images = 0; })), UsageError);
  EXPECT_THROW(validate_synth_options(with([](SynthOptions& o) { o.min_side = 16; })), UsageError);
  EXPECT_THROW(validate_synth_options(with([](SynthOptions& o) { o.min_side = 200, o.max_side = 100; })), UsageError);
  EXPECT_THROW(validate_synth_options(with([](SynthOptions& o) { o.corrupt_fraction = 1.5; })), UsageError);
  EXPECT_THROW(validate_synth_options(with([](SynthOptions& o) { o.png_fraction = -0.1; })), UsageError);
  EXPECT_THROW(validate_synth_options(with([](SynthOptions& o) { o.val_fraction = 0.6, o.test_fraction = 0.4; })),
               UsageError);
  EXPECT_THROW(validate_synth_options(with([](SynthOptions& o) { o.out_dir.clear(); })), UsageError);
  EXPECT_NO_THROW(validate_synth_options(with([](SynthOptions&) {})));
  // A regular file where the output folder should be: the file system refuses.
  testing::write_text(dir / "file", "x");
  EXPECT_THROW(generate_synthetic_catalog(small_options(dir / "file" / "out", 5)), IoError);
}

TEST(SynthCatalogDeterminism, SameSeedGivesSameBytesWhateverTheThreads) {
  ScratchDir one("synth-t1"), two("synth-t2"), other("synth-seed");
  generate_synthetic_catalog(small_options(one.path(), 120, 5, 1));
  generate_synthetic_catalog(small_options(two.path(), 120, 5, 2));
  generate_synthetic_catalog(small_options(other.path(), 120, 6, 2));
  const std::string manifest = read_text(one / "manifest.csv");
  ASSERT_FALSE(manifest.empty());
  EXPECT_EQ(manifest, read_text(two / "manifest.csv"));
  EXPECT_EQ(read_text(one / "corruptions.csv"), read_text(two / "corruptions.csv"));
  EXPECT_NE(manifest, read_text(other / "manifest.csv"));

  const auto rows = read_csv(one / "manifest.csv");
  int differing_from_other_seed = 0;
  for (std::size_t i = 1; i < rows.size(); ++i) {
    const std::string bytes = read_text(one / rows[i][1]);
    EXPECT_EQ(bytes, read_text(two / rows[i][1])) << rows[i][1];
    const auto other_path = other.path() / rows[i][1];
    if (!std::filesystem::exists(other_path) || read_text(other_path) != bytes) ++differing_from_other_seed;
  }
  EXPECT_GT(differing_from_other_seed, 110);
}

TEST_F(SynthCatalog, ManifestHasTheHeaderColumnsAndOneRowPerImage) {
  const auto rows = read_csv(small_dir_->path() / "manifest.csv");
  ASSERT_EQ(rows.size(), 121u);
  EXPECT_EQ(rows[0], (Row{"id", "path", "label", "split", "source_channel", "device_type", "upload_region",
                          "aspect_ratio", "category", "seller_tier"}));
  const auto classes = class_index();
  std::set<std::string> ids;
  for (std::size_t i = 1; i < rows.size(); ++i) {
    const Row& r = rows[i];
    ASSERT_EQ(r.size(), 10u) << "row " << i;
    EXPECT_TRUE(ids.insert(r[0]).second) << r[0];
    EXPECT_EQ(r[0].rfind("img_", 0), 0u) << r[0];
    EXPECT_TRUE(classes.count(r[2])) << r[2];
    EXPECT_TRUE(r[3] == "train" || r[3] == "val" || r[3] == "test") << r[3];
    const std::string jpg = "images/" + r[2] + "/" + r[0] + ".jpg", png = "images/" + r[2] + "/" + r[0] + ".png";
    EXPECT_TRUE(r[1] == jpg || r[1] == png) << r[1];
    EXPECT_TRUE(std::filesystem::is_regular_file(small_dir_->path() / r[1])) << r[1];
  }
  std::string expected_classes;
  for (const auto& c : synth_classes()) expected_classes += c.name + "\n";
  EXPECT_EQ(read_text(small_dir_->path() / "classes.txt"), expected_classes);
  EXPECT_EQ(small_.manifest, small_dir_->path() / "manifest.csv");
  EXPECT_EQ(small_.images, 120);
}

TEST_F(SynthCatalog, ClassCountsFollowTheSharesAndBothFormatsAppear) {
  const auto rows = read_csv(small_dir_->path() / "manifest.csv");
  const auto classes = class_index();
  std::vector<int> counts(synth_classes().size(), 0);
  int png = 0;
  for (std::size_t i = 1; i < rows.size(); ++i) {
    ++counts[classes.at(rows[i][2])];
    png += rows[i][1].size() > 4 && rows[i][1].substr(rows[i][1].size() - 4) == ".png";
  }
  for (std::size_t c = 0; c < counts.size(); ++c) {
    EXPECT_LE(std::abs(counts[c] - synth_classes()[c].share * 120), 1.0) << synth_classes()[c].name;
    EXPECT_EQ(counts[c], small_.per_class[c]);
  }
  EXPECT_GT(png, 5);  // png_fraction 0.15 of 120
  EXPECT_LT(png, 40);
}

TEST(SynthCatalogCorruption, EachKindBehavesAsLabelled) {
  ScratchDir dir("synth-corrupt");
  SynthOptions o = small_options(dir.path(), 100, 11, 2);
  o.corrupt_fraction = 0.1;
  const SynthSummary s = generate_synthetic_catalog(o);
  EXPECT_EQ(s.corrupted, 10);
  const auto rows = read_csv(dir / "corruptions.csv");
  ASSERT_EQ(rows.size(), 11u);
  EXPECT_EQ(rows[0], (Row{"id", "path", "kind"}));
  std::map<std::string, int> kinds;
  tjhandle tj = tjInitDecompress();
  for (std::size_t i = 1; i < rows.size(); ++i) {
    const std::string& kind = rows[i][2];
    ++kinds[kind];
    const auto path = dir.path() / rows[i][1];
    const std::string bytes = read_text(path);
    const bool named_jpg = path.extension() == ".jpg";
    if (kind == "zero_bytes") {
      EXPECT_EQ(std::filesystem::file_size(path), 0u) << path;
    } else if (kind == "truncated") {
      ASSERT_TRUE(named_jpg) << path;
      ASSERT_TRUE(starts_with_bytes(bytes, {0xFF, 0xD8})) << path;
      EXPECT_FALSE(starts_with_bytes(bytes.substr(bytes.size() - 2), {0xFF, 0xD9})) << path;
      // The headers survive (a decoder starts), the scan data does not (it cannot finish).
      const auto* data = reinterpret_cast<const unsigned char*>(bytes.data());
      int w = 0, h = 0, sub = 0, space = 0;
      ASSERT_EQ(tjDecompressHeader3(tj, data, bytes.size(), &w, &h, &sub, &space), 0) << path;
      std::vector<unsigned char> pixels(static_cast<std::size_t>(w) * h * 3);
      EXPECT_NE(tjDecompress2(tj, data, bytes.size(), pixels.data(), w, 0, h, TJPF_BGR, 0), 0)
          << "a truncated JPEG must not decode cleanly: " << path;
    } else if (kind == "not_an_image" || kind == "bad_header") {
      EXPECT_FALSE(bytes.empty()) << path;
      EXPECT_TRUE(decode_file(path).empty()) << kind << " decoded: " << path;
    } else if (kind == "wrong_extension") {
      const bool is_png = starts_with_bytes(bytes, {0x89, 'P', 'N', 'G'});
      const bool is_jpeg = starts_with_bytes(bytes, {0xFF, 0xD8, 0xFF});
      EXPECT_TRUE(named_jpg ? is_png : is_jpeg) << path;
      EXPECT_FALSE(decode_file(path).empty()) << "sniffing the content must decode it: " << path;
    } else {
      ADD_FAILURE() << "unknown corruption kind " << kind;
    }
  }
  tjDestroy(tj);
  EXPECT_EQ(kinds.size(), synth_corruption_kinds().size());
  for (const auto& [kind, n] : kinds) {
    EXPECT_EQ(n, 2) << kind;
    EXPECT_EQ(s.corrupted_by_kind.at(kind), 2) << kind;
  }
}

TEST_F(SynthCatalog, SomeRecordsMissOneToThreeMetadataFields) {
  const auto rows = read_csv(small_dir_->path() / "manifest.csv");
  int missing = 0;
  for (std::size_t i = 1; i < rows.size(); ++i) {
    const int empty = static_cast<int>(std::count(rows[i].begin() + 4, rows[i].end(), ""));
    EXPECT_LE(empty, 3) << rows[i][0];
    missing += empty > 0;
  }
  EXPECT_EQ(missing, 10);  // round(0.08 * 120)
  EXPECT_EQ(small_.records_missing_metadata, missing);
}

TEST_F(SynthCatalog, ImagesDecodeToTheDeclaredSizeAndAspectRatio) {
  const auto rows = read_csv(small_dir_->path() / "manifest.csv");
  std::set<std::string> corrupted;
  for (const auto& r : read_csv(small_dir_->path() / "corruptions.csv")) corrupted.insert(r[0]);
  int checked = 0;
  std::set<std::string> aspects;
  for (std::size_t i = 1; i < rows.size(); ++i) {
    if (corrupted.count(rows[i][0])) continue;
    const cv::Mat image = decode_file(small_dir_->path() / rows[i][1]);
    ASSERT_FALSE(image.empty()) << rows[i][1];
    EXPECT_GE(std::max(image.cols, image.rows), 64);
    EXPECT_LE(std::max(image.cols, image.rows), 96);
    if (rows[i][7].empty()) continue;
    aspects.insert(rows[i][7]);
    EXPECT_NEAR(static_cast<double>(image.cols) / image.rows, std::stod(rows[i][7]), 0.0051) << rows[i][1];
    ++checked;
  }
  EXPECT_GT(checked, 100);
  EXPECT_GE(aspects.size(), 6u);  // varied, not one format
}

TEST_F(SynthCatalog, EverySplitHoldsEveryClass) {
  const auto rows = read_csv(large_dir_->path() / "manifest.csv");
  ASSERT_EQ(rows.size(), 301u);
  std::map<std::string, std::map<std::string, int>> counts;
  std::map<std::string, int> split_totals;
  for (std::size_t i = 1; i < rows.size(); ++i) {
    ++counts[rows[i][3]][rows[i][2]];
    ++split_totals[rows[i][3]];
  }
  for (const char* split : {"train", "val", "test"})
    for (const auto& c : synth_classes()) EXPECT_GE(counts[split][c.name], 1) << split << " " << c.name;
  EXPECT_NEAR(split_totals["val"], 30, 8);
  EXPECT_NEAR(split_totals["test"], 30, 8);
}

TEST(SynthCatalogInterrupt, AnInterruptedRunLeavesNoManifest) {
  ScratchDir dir("synth-int");
  request_interrupt();
  EXPECT_THROW(generate_synthetic_catalog(small_options(dir.path(), 20)), InterruptedError);
  clear_interrupt();
  EXPECT_FALSE(std::filesystem::exists(dir / "manifest.csv"));
}

// ---- the defects are the physical processes they are named after ----

struct ImageStats {
  double mean_luma = 0;        // 0..255
  double clipped = 0;          // fraction of pixels at >= 250 in every channel
  double sharpness = 0;        // variance of the Laplacian
  double grain = 0;            // mean |image - median3(image)|
  double saturation_mean = 0;  // mean |channel - mean of channels|
};

ImageStats measure(const cv::Mat& bgr) {
  ImageStats s;
  cv::Mat gray;
  cv::cvtColor(bgr, gray, cv::COLOR_BGR2GRAY);
  s.mean_luma = cv::mean(gray)[0];
  cv::Mat white;
  cv::inRange(bgr, cv::Scalar(250, 250, 250), cv::Scalar(255, 255, 255), white);
  s.clipped = cv::countNonZero(white) / static_cast<double>(bgr.total());
  cv::Mat lap;
  cv::Laplacian(gray, lap, CV_64F);
  cv::Scalar mu, sigma;
  cv::meanStdDev(lap, mu, sigma);
  s.sharpness = sigma[0] * sigma[0];
  cv::Mat med, diff;
  cv::medianBlur(gray, med, 3);
  cv::absdiff(gray, med, diff);
  s.grain = cv::mean(diff)[0];
  cv::Mat f;
  bgr.convertTo(f, CV_32FC3);
  std::vector<cv::Mat> ch;
  cv::split(f, ch);
  const cv::Mat avg = (ch[0] + ch[1] + ch[2]) / 3;
  s.saturation_mean =
      (cv::mean(cv::abs(ch[0] - avg))[0] + cv::mean(cv::abs(ch[1] - avg))[0] + cv::mean(cv::abs(ch[2] - avg))[0]) / 3;
  return s;
}

double median(std::vector<double> v) {
  std::nth_element(v.begin(), v.begin() + v.size() / 2, v.end());
  return v[v.size() / 2];
}

TEST_F(SynthCatalog, DefectsChangeThePixelsAsTheirNamesSay) {
  const auto rows = read_csv(large_dir_->path() / "manifest.csv");
  std::set<std::string> corrupted;
  for (const auto& r : read_csv(large_dir_->path() / "corruptions.csv")) corrupted.insert(r[0]);
  std::map<std::string, std::vector<ImageStats>> by_class;
  for (std::size_t i = 1; i < rows.size(); ++i) {
    if (corrupted.count(rows[i][0])) continue;
    by_class[rows[i][2]].push_back(measure(decode_file(large_dir_->path() / rows[i][1])));
  }
  const auto med = [&](const std::string& cls, double ImageStats::*field) {
    std::vector<double> v;
    for (const auto& s : by_class.at(cls)) v.push_back(s.*field);
    return median(v);
  };
  const std::string good = "good_image";
  EXPECT_LT(med("low_light", &ImageStats::mean_luma), 0.5 * med(good, &ImageStats::mean_luma));
  EXPECT_GT(med("overexposed", &ImageStats::clipped), med(good, &ImageStats::clipped) + 0.2);
  EXPECT_LT(med("blurry", &ImageStats::sharpness), 0.5 * med(good, &ImageStats::sharpness));
  EXPECT_LT(med("low_resolution", &ImageStats::sharpness), med(good, &ImageStats::sharpness));
  EXPECT_GT(med("noisy", &ImageStats::grain), 2.0 * med(good, &ImageStats::grain));
  EXPECT_GT(med("color_cast", &ImageStats::saturation_mean), med(good, &ImageStats::saturation_mean) + 5);
  EXPECT_GT(med("background_issue", &ImageStats::saturation_mean), med(good, &ImageStats::saturation_mean));
}

}  // namespace
}  // namespace shoplens
