#include <gtest/gtest.h>

#include <map>

#include <opencv2/imgproc.hpp>

#include "shoplens/core/atomic_file.h"
#include "shoplens/core/errors.h"
#include "shoplens/core/interrupt.h"
#include "shoplens/data/csv.h"
#include "shoplens/data/image_io.h"
#include "shoplens/data/prepare.h"
#include "shoplens/data/shards.h"
#include "image_test_util.h"
#include "prepare_test_util.h"
#include "test_util.h"

namespace shoplens {
namespace {

namespace fs = std::filesystem;

// The file's extension picks the format (JPEG at quality 95 or PNG).
void write_image(const fs::path& path, int w, int h, int shade, const std::string& ext) {
  cv::Mat img(h, w, CV_8UC3, cv::Scalar(shade, 255 - shade, (shade * 3) % 256));
  cv::circle(img, {w / 2, h / 2}, std::min(w, h) / 3, cv::Scalar(20, 40, 200), -1);
  fs::create_directories(path.parent_path());
  write_image_file(path, img, ChannelOrder::kBgr);
}

// A prepare of `input` into `out` at a small storage size, every other option at its default.
PrepareOptions small_prepare(const fs::path& input, const fs::path& out, int storage_size) {
  PrepareOptions o;
  o.input = input;
  o.out_dir = out;
  o.storage_size = storage_size;
  return o;
}

// 12 good images (JPEG and PNG, two classes, all splits), 4 broken files, 2 bad manifest rows.
struct TinyDataset {
  testing::ScratchDir dir{"prepare"};
  fs::path manifest = dir / "data/manifest.csv";
  TinyDataset() {
    std::string csv = "id,path,label,split,channel\n";
    const char* splits[] = {"train", "train", "val", "test"};
    for (int i = 0; i < 12; ++i) {
      std::string ext = i % 4 == 3 ? ".png" : ".jpg";
      std::string rel = "img/" + std::to_string(i) + ext;
      write_image(dir / ("data/" + rel), 300 + 10 * i, 200 + 5 * i, i * 20, ext);
      csv += "i" + std::to_string(i) + "," + rel + "," + (i % 2 ? "blurry" : "good") + "," + splits[i % 4] + "," +
             (i % 5 == 0 ? "" : "web") + "\n";
    }
    testing::write_text(dir / "data/img/empty.jpg", "");
    testing::write_text(dir / "data/img/text.jpg", "hello, not an image");
    std::string jpeg = read_file(dir / "data/img/0.jpg");
    testing::write_text(dir / "data/img/truncated.jpg", jpeg.substr(0, jpeg.size() / 2));
    csv += "e1,img/empty.jpg,good,train,web\n";
    csv += "e2,img/text.jpg,good,train,web\n";
    csv += "e3,img/truncated.jpg,blurry,train,web\n";
    csv += "e4,img/missing.jpg,blurry,train,web\n";
    csv += "e5,../outside.jpg,good,train,web\n";
    csv += "e6,img/1.jpg,good,somewhere,web\n";
    testing::write_text(manifest, csv);
  }
  PrepareOptions options(const std::string& out = "shards") {
    PrepareOptions o;
    o.input = manifest;
    o.out_dir = dir / out;
    o.storage_size = 64;
    o.records_per_shard = 4;
    o.threads = 2;
    return o;
  }
};

TEST(Prepare, AccountsForEveryRowAndQuarantinesWithReasons) {
  TinyDataset data;
  PrepareReport r = prepare_dataset(data.options());
  EXPECT_EQ(r.total_rows, 18u);
  EXPECT_EQ(r.kept, 12u);
  EXPECT_EQ(r.quarantined.size(), 6u);
  EXPECT_NE(testing::quarantine_reason(r, "e1").find("decode: empty file"), std::string::npos);
  EXPECT_NE(testing::quarantine_reason(r, "e2").find("not an image"), std::string::npos);
  EXPECT_NE(testing::quarantine_reason(r, "e3").find("corrupt JPEG"), std::string::npos);
  EXPECT_NE(testing::quarantine_reason(r, "e4").find("cannot read file"), std::string::npos);
  EXPECT_NE(testing::quarantine_reason(r, "e5").find("manifest: path escapes"), std::string::npos);
  EXPECT_NE(testing::quarantine_reason(r, "e6").find("manifest: unknown split"), std::string::npos);
  // Missing metadata is counted, and the rows are kept.
  ASSERT_EQ(r.metadata_fields, (std::vector<std::string>{"channel"}));
  EXPECT_EQ(r.metadata_missing[0], 3u);  // i0, i5, i10
  // Per class and split.
  EXPECT_EQ(r.kept_per_class_split[0][0] + r.kept_per_class_split[1][0], 6u);  // train
  EXPECT_GT(r.mean[0], 0.0);
  EXPECT_GT(r.std[0], 0.0);

  const fs::path out = data.dir / "shards";
  for (const char* f : {"dataset.json", "records.csv", "quarantine.csv", "report.json", "report.md"})
    EXPECT_TRUE(fs::exists(out / f)) << f;
  auto quarantine = parse_csv(read_file(out / "quarantine.csv"));
  EXPECT_EQ(quarantine.size(), 7u);  // header + 6
  auto records = parse_csv(read_file(out / "records.csv"));
  EXPECT_EQ(records.size(), 13u);  // header + 12
}

TEST(Prepare, ShardsHoldDecodableImagesAtStorageSize) {
  TinyDataset data;
  prepare_dataset(data.options());
  std::size_t total = 0;
  for (Split s : {Split::kTrain, Split::kVal, Split::kTest}) {
    auto ds = ShardDataset::open(data.dir / "shards", s, /*verify_data=*/true);
    total += ds->size();
    for (std::size_t i = 0; i < ds->size(); ++i) {
      SampleRef ref = ds->sample(i);
      cv::Mat rgb;
      decode_jpeg_into(ref.data, ref.size, rgb);
      EXPECT_EQ(std::min(rgb.rows, rgb.cols), 64);
      EXPECT_EQ(rgb.rows, ref.height);
      EXPECT_EQ(ds->entry(i).split, static_cast<int>(s));
    }
  }
  EXPECT_EQ(total, 12u);
}

TEST(Prepare, RawEncodingStoresPixels) {
  TinyDataset data;
  PrepareOptions o = data.options("raw");
  o.encoding = PayloadEncoding::kRaw;
  prepare_dataset(o);
  auto ds = ShardDataset::open(data.dir / "raw", Split::kTrain, true);
  ASSERT_GT(ds->size(), 0u);
  SampleRef ref = ds->sample(0);
  EXPECT_EQ(ref.encoding, PayloadEncoding::kRaw);
  EXPECT_EQ(ref.size, static_cast<std::size_t>(ref.height) * ref.width * 3);
}

TEST(Prepare, RerunReusesCompleteShardsAndRebuildsChangedOnes) {
  TinyDataset data;
  PrepareReport first = prepare_dataset(data.options());
  EXPECT_EQ(first.shards_reused, 0u);
  PrepareReport second = prepare_dataset(data.options());
  EXPECT_EQ(second.shards_written, 0u);
  EXPECT_EQ(second.shards_reused, first.shards_written);
  EXPECT_EQ(second.kept, first.kept);
  EXPECT_EQ(second.quarantined.size(), first.quarantined.size());

  // A damaged shard file is rebuilt, the others are reused.
  const fs::path out = data.dir / "shards";
  std::string idx = read_file(out / "train-00000.idx");
  write_file_atomic(out / "train-00000.idx", idx.substr(0, idx.size() - 3));
  PrepareReport third = prepare_dataset(data.options());
  EXPECT_EQ(third.shards_written, 1u);
  EXPECT_NO_THROW(ShardDataset::open(out, Split::kTrain, true));
}

TEST(Prepare, InterruptedRunLeavesNoCompleteLookingShard) {
  TinyDataset data;
  request_interrupt();
  EXPECT_THROW(prepare_dataset(data.options()), InterruptedError);
  clear_interrupt();
  const fs::path out = data.dir / "shards";
  for (const auto& e : fs::directory_iterator(out)) {
    const std::string name = e.path().filename().string();
    EXPECT_TRUE(e.path().extension() != ".idx" && e.path().extension() != ".data") << name;
  }
  EXPECT_FALSE(fs::exists(out / "dataset.json"));
  PrepareReport r = prepare_dataset(data.options());
  EXPECT_EQ(r.kept, 12u);
}

TEST(Prepare, ClassAbsentFromSplitIsWarned) {
  testing::ScratchDir dir("prepare-warn");
  write_image(dir / "a.jpg", 80, 80, 10, ".jpg");
  write_image(dir / "b.jpg", 80, 80, 90, ".jpg");
  testing::write_text(dir / "m.csv", "path,label,split\na.jpg,x,train\nb.jpg,y,train\n");
  PrepareOptions o = small_prepare(dir / "m.csv", dir / "out", 32);
  PrepareReport r = prepare_dataset(o);
  bool warned = false;
  for (const auto& w : r.warnings) warned |= w.find("class 'x' has no images in split 'val'") != std::string::npos;
  EXPECT_TRUE(warned);
}

// An ImageFolder with train/ and test/ only (the usual public layout): the run says where its
// val came from, in dataset.json, report.json and report.md.
TEST(Prepare, TrainAndTestFoldersRecordTheCarvedValidation) {
  testing::ScratchDir dir("prepare-carve");
  for (int i = 0; i < 10; ++i) {
    write_image(dir / "ds/train/good" / (std::to_string(i) + ".jpg"), 64, 64, 10 + i, ".jpg");
    write_image(dir / "ds/train/blurry" / (std::to_string(i) + ".png"), 64, 64, 120 + i, ".png");
  }
  write_image(dir / "ds/test/good/t.jpg", 64, 64, 50, ".jpg");
  write_image(dir / "ds/test/blurry/t.png", 64, 64, 150, ".png");
  PrepareOptions o = small_prepare(dir / "ds", dir / "out", 32);
  o.manifest.val_fraction = 0.2;
  const PrepareReport r = prepare_dataset(o);
  for (std::size_t c = 0; c < r.classes.size(); ++c) {
    EXPECT_EQ(r.kept_per_class_split[c][0], 8u) << r.classes[c];
    EXPECT_EQ(r.kept_per_class_split[c][1], 2u) << r.classes[c];
    EXPECT_EQ(r.kept_per_class_split[c][2], 1u) << r.classes[c];
  }
  const auto dataset = testing::read_json(dir / "out/dataset.json");
  EXPECT_EQ(dataset.at("prepare").at("splits").at("source"), "val_carved_from_train");
  EXPECT_EQ(dataset.at("prepare").at("splits").at("val_carved_from_train"), 4);
  EXPECT_EQ(testing::read_json(dir / "out/report.json").at("splits").at("seed"), o.manifest.seed);
  EXPECT_NE(read_file(dir / "out/report.md").find("carved into val"), std::string::npos);
  EXPECT_EQ(ShardDataset::open(dir / "out", Split::kVal)->size(), 4u);
}

// Stored data equals source data where it can: a JPEG that needs no resize keeps its bytes; one
// that is resized, and a CMYK JPEG (which only the full decoder converts), are encoded anew.
TEST(Prepare, JpegsThatNeedNoResizeKeepTheirOriginalBytes) {
  testing::ScratchDir dir("prepare-originals");
  const auto small = encode_jpeg(testing::test_picture(48, 40, 3), JpegEncodeOptions{});
  const auto large = encode_jpeg(testing::test_picture(200, 160, 4), JpegEncodeOptions{});
  testing::write_text(dir / "small.jpg", std::string(small.begin(), small.end()));
  testing::write_text(dir / "large.jpg", std::string(large.begin(), large.end()));
  const auto cmyk = testing::cmyk_jpeg(false);
  testing::write_text(dir / "cmyk.jpg", std::string(cmyk.begin(), cmyk.end()));
  testing::write_text(dir / "m.csv", "path,label,split\nsmall.jpg,x,train\nlarge.jpg,y,train\ncmyk.jpg,x,train\n");
  PrepareOptions o = small_prepare(dir / "m.csv", dir / "out", 64);
  const PrepareReport r = prepare_dataset(o);
  ASSERT_EQ(r.kept, 3u);
  EXPECT_EQ(r.jpeg_originals_kept, 1u);
  const auto train = ShardDataset::open(o.out_dir, Split::kTrain);
  ASSERT_EQ(train->size(), 3u);
  std::map<std::uint64_t, std::vector<std::uint8_t>> stored;
  for (std::size_t i = 0; i < train->size(); ++i) {
    const SampleRef s = train->sample(i);
    stored[s.sample_id].assign(s.data, s.data + s.size);
  }
  EXPECT_EQ(stored.at(0), small);  // sample ids are manifest rows
  EXPECT_NE(stored.at(1), large);
  EXPECT_NE(stored.at(2), cmyk);
  cv::Mat decoded;
  decode_jpeg_into(stored.at(2).data(), stored.at(2).size(), decoded);  // the store's decoder reads every payload
  EXPECT_EQ(decoded.size(), cv::Size(32, 32));
  EXPECT_EQ(testing::read_json(dir / "out/report.json").at("jpeg_originals_kept"), 1);
}

// The terminal gets a few lines and the paths; report.md keeps the whole report.
TEST(Prepare, TheTerminalSummaryCountsRowsSplitsAndNamesTheReport) {
  PrepareReport report;
  report.total_rows = 10;
  report.kept = 7;
  report.classes = {"blurry", "sharp"};
  report.kept_per_class_split = {{3, 1, 0}, {2, 0, 1}};
  report.quarantined = {{"a", "a.jpg", 2, "decode", "not an image"},
                        {"b", "b.jpg", 3, "decode", "truncated"},
                        {"c", "", 4, "manifest", "no label"}};
  const std::string summary = format_prepare_summary(report, "shards");
  EXPECT_NE(summary.find("10 rows: 7 kept, 3 quarantined (decode: 2, manifest: 1)"), std::string::npos) << summary;
  EXPECT_NE(summary.find("train 5, val 1, test 1 over 2 classes"), std::string::npos) << summary;
  EXPECT_NE(summary.find((fs::path("shards") / "report.md").string()), std::string::npos) << summary;
  EXPECT_NE(summary.find((fs::path("shards") / "quarantine.csv").string()), std::string::npos) << summary;
  EXPECT_EQ(summary.find("| class |"), std::string::npos) << "the per-class table belongs to report.md";
}

TEST(ImageIo, ScaledJpegDecodeKeepsShortSideAboveTarget) {
  cv::Mat img(800, 1200, CV_8UC3, cv::Scalar(10, 120, 240));
  JpegEncodeOptions bgr;
  bgr.order = ChannelOrder::kBgr;
  std::vector<std::uint8_t> bytes = encode_jpeg(img, bgr);
  DecodeOptions o;
  o.min_short_side = 180;
  DecodedImage d = decode_image(bytes.data(), bytes.size(), o);
  EXPECT_EQ(d.original_width, 1200);
  EXPECT_EQ(d.scale_denominator, 4);  // 800/4 = 200 >= 180, 800/8 = 100 < 180
  EXPECT_EQ(d.rgb.rows, 200);
  // RGB order: the encoder was given BGR (10,120,240), so red is 240.
  EXPECT_NEAR(d.rgb.at<cv::Vec3b>(100, 100)[0], 240, 3);
  o.max_megapixels = 0.5;
  EXPECT_THROW(decode_image(bytes.data(), bytes.size(), o), DataError);
}

TEST(ImageIo, SniffsFormatsByContent) {
  cv::Mat img(10, 10, CV_8UC3, cv::Scalar(1, 2, 3));
  std::vector<std::uint8_t> png = encode_png(img);
  EXPECT_EQ(sniff_format(png.data(), png.size()), ImageFormat::kPng);
  DecodedImage d = decode_image(png.data(), png.size());
  EXPECT_EQ(d.format, ImageFormat::kPng);
  const std::uint8_t text[] = "GIF89a.....";
  EXPECT_THROW(decode_image(text, sizeof text), DataError);
}

}  // namespace
}  // namespace shoplens
