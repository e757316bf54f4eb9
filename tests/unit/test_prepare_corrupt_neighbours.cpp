// prepare keeps every valid image whatever damaged files come before it on the same thread,
// and keeps the same set for any thread count: for every format and every kind of damage.
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "image_test_util.h"
#include "shoplens/core/atomic_file.h"
#include "shoplens/core/errors.h"
#include "shoplens/data/csv.h"
#include "shoplens/data/image_io.h"
#include "shoplens/data/prepare.h"
#include "test_util.h"

namespace shoplens {
namespace {

namespace fs = std::filesystem;
using testing::Bytes;

struct Format {
  const char* name;
  const char* ext;
  std::size_t signature_bytes;  // kept by the header and bit-flip damage, so the file is still sniffed
  Bytes (*encode)(const cv::Mat& rgb);
};

const Format kFormats[] = {
    {"jpeg", ".jpg", 3, [](const cv::Mat& rgb) { return encode_jpeg(rgb, 80); }},
    {"png", ".png", 8, [](const cv::Mat& rgb) { return testing::png_bytes(rgb); }},
    {"webp", ".webp", 12, [](const cv::Mat& rgb) { return testing::webp_bytes(rgb); }},
    {"webp_lossless", ".webp", 12, [](const cv::Mat& rgb) { return testing::webp_bytes(rgb, true); }},
    {"tiff", ".tif", 4, [](const cv::Mat& rgb) { return testing::tiff_bytes(rgb); }},
    {"bmp", ".bmp", 2, [](const cv::Mat& rgb) { return testing::bmp_bytes(rgb, 24, false); }},
};

struct Damage {
  std::string kind;
  Bytes bytes;
  bool must_fail;  // bit flips in pixel data can leave a decodable image: kept, not asserted
};

// Every kind of damage done to one valid file of a format.
std::vector<Damage> damage_kinds(const Format& f, const Bytes& valid, int seed) {
  std::vector<Damage> kinds = {
      {"truncated_third", testing::truncated(valid, 1.0 / 3), true},
      {"truncated_near_end", testing::truncated(valid, 0.97), true},
      {"empty", {}, true},
      {"text", testing::text_bytes(), true},
      {"bad_header", testing::with_garbage_header(valid, f.signature_bytes), false},
      {"bit_flips", testing::with_bit_flips(valid, 12, seed, f.signature_bytes), false},
  };
  if (std::string(f.name) == "jpeg") {
    kinds.push_back({"jpeg_cut_inside_huffman_table", testing::jpeg_cut_inside_huffman_table(valid), true});
    kinds.push_back({"jpeg_cut_before_scan", testing::jpeg_cut_before_scan(valid), true});
    kinds.push_back({"jpeg_bogus_huffman_table", testing::jpeg_with_bogus_huffman_table(valid), true});
  }
  return kinds;
}

// Decoding `data` must either work or fail with a DataError; anything else fails the test.
bool decodes(const Bytes& data, cv::Mat* rgb = nullptr) {
  try {
    DecodedImage img = decode_image(data.data(), data.size());
    if (rgb) *rgb = img.rgb.clone();
    return true;
  } catch (const DataError&) {
    return false;
  }
}

TEST(DecoderStateAcrossFormats, EveryValidFileDecodesTheSameAfterAnyDamagedFile) {
  std::vector<std::pair<std::string, Bytes>> valid;
  std::vector<Damage> damaged;
  int seed = 0;
  for (const Format& f : kFormats) {
    const Bytes bytes = f.encode(testing::test_picture(57 + seed, 43 + seed, seed));
    valid.emplace_back(f.name, bytes);
    for (auto& d : damage_kinds(f, bytes, seed))
      damaged.push_back({std::string(f.name) + "/" + d.kind, d.bytes, d.must_fail});
    ++seed;
  }
  std::vector<cv::Mat> reference(valid.size());
  for (std::size_t v = 0; v < valid.size(); ++v) ASSERT_TRUE(decodes(valid[v].second, &reference[v])) << valid[v].first;

  for (const auto& d : damaged) {
    const bool decoded = decodes(d.bytes);
    if (d.must_fail) {
      EXPECT_FALSE(decoded) << d.kind << " was decoded";
    }
    for (std::size_t v = 0; v < valid.size(); ++v) {
      decodes(d.bytes);  // the damaged file right before each valid one, on this thread
      cv::Mat rgb;
      ASSERT_TRUE(decodes(valid[v].second, &rgb)) << valid[v].first << " failed after " << d.kind;
      EXPECT_EQ(cv::norm(rgb, reference[v], cv::NORM_INF), 0.0) << valid[v].first << " changed after " << d.kind;
    }
  }
}

// 3 valid images per format (18), each preceded by every kind of damage done to it (about 130
// damaged files), in one manifest.
struct CorruptNeighbourCatalog {
  testing::ScratchDir dir{"prepare-neighbours"};
  std::set<std::string> valid_ids, must_fail_ids;

  CorruptNeighbourCatalog() {
    fs::create_directories(dir / "img");
    std::string csv = "id,path,label,split\n";
    int i = 0;
    for (int copy = 0; copy < 3; ++copy) {
      for (const Format& f : kFormats) {
        const Bytes valid = f.encode(testing::test_picture(40 + 13 * i, 32 + 7 * i, i));
        const std::string label = i % 2 ? "blurry" : "good";
        const std::string id = std::string(f.name) + std::to_string(copy);
        for (const auto& d : damage_kinds(f, valid, i)) {
          csv += add(id + "_" + d.kind, f.ext, d.bytes, label);
          if (d.must_fail) must_fail_ids.insert(id + "_" + d.kind);
        }
        csv += add(id, f.ext, valid, label);
        valid_ids.insert(id);
        ++i;
      }
    }
    testing::write_text(dir / "manifest.csv", csv);
  }

  std::string add(const std::string& id, const char* ext, const Bytes& bytes, const std::string& label) {
    write_file_atomic(dir / ("img/" + id + ext), std::string(bytes.begin(), bytes.end()));
    return id + ",img/" + id + ext + "," + label + ",train\n";
  }

  PrepareReport prepare(int threads, const std::string& out) const {
    PrepareOptions o;
    o.input = dir / "manifest.csv";
    o.out_dir = dir / out;
    o.storage_size = 24;
    o.records_per_shard = 40;
    o.threads = threads;
    return prepare_dataset(o);
  }

  std::set<std::string> kept_ids(const std::string& out) const {
    std::set<std::string> ids;
    const auto rows = parse_csv(read_file(dir / out / "records.csv"));
    for (std::size_t r = 1; r < rows.size(); ++r) ids.insert(rows[r].fields.at(1));
    return ids;
  }
};

TEST(PrepareWithCorruptNeighbours, KeepsEveryValidImageAndTheSameSetForAnyThreadCount) {
  CorruptNeighbourCatalog catalog;
  std::set<std::string> kept_with_one_thread;
  std::string quarantine_with_one_thread;
  for (int threads : {1, 2, 8}) {
    const std::string out = "shards-" + std::to_string(threads);
    const PrepareReport report = catalog.prepare(threads, out);
    std::set<std::string> quarantined;
    for (const auto& q : report.quarantined) {
      quarantined.insert(q.id);
      EXPECT_EQ(catalog.valid_ids.count(q.id), 0u) << threads << " threads lost valid " << q.id << ": " << q.reason;
    }
    for (const auto& id : catalog.must_fail_ids)
      EXPECT_EQ(quarantined.count(id), 1u) << threads << " threads kept " << id;
    const std::set<std::string> kept = catalog.kept_ids(out);
    for (const auto& id : catalog.valid_ids) EXPECT_EQ(kept.count(id), 1u) << threads << " threads lost " << id;
    if (threads == 1) {
      kept_with_one_thread = kept;
      quarantine_with_one_thread = read_file(catalog.dir / out / "quarantine.csv");
    } else {
      EXPECT_EQ(kept, kept_with_one_thread) << threads << " threads";
      EXPECT_EQ(read_file(catalog.dir / out / "quarantine.csv"), quarantine_with_one_thread) << threads << " threads";
    }
  }
}

}  // namespace
}  // namespace shoplens
