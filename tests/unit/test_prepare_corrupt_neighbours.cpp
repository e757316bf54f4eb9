// prepare keeps every valid image whatever damaged files come before it on the same thread,
// and keeps the same set for any thread count.
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "image_test_util.h"
#include "shoplens/core/atomic_file.h"
#include "shoplens/data/csv.h"
#include "shoplens/data/image_io.h"
#include "shoplens/data/prepare.h"
#include "test_util.h"

namespace shoplens {
namespace {

namespace fs = std::filesystem;
using testing::Bytes;

struct CatalogFile {
  std::string id, file;
  Bytes bytes;
};

// The other damaged file put before each valid image (after its truncated copy), in turn.
Bytes other_damage(const Bytes& jpeg, int i) {
  switch (i % 7) {
    case 0: return testing::truncated(jpeg, 0.5);
    case 1: return {};
    case 2: return testing::text_bytes();
    case 3: return testing::jpeg_cut_before_scan(jpeg);
    case 4: return testing::jpeg_with_garbage_header(jpeg);
    case 5: return testing::jpeg_with_bogus_huffman_table(jpeg);
    default: return testing::jpeg_cut_inside_huffman_table(jpeg);
  }
}

// 28 valid images (20 JPEG, some tiny enough that a third of the file ends in its headers,
// 5 PNG, 3 WebP), each preceded by a copy of itself truncated to a third and one other kind of
// damage.
struct CorruptNeighbourCatalog {
  testing::ScratchDir dir{"prepare-neighbours"};
  std::set<std::string> valid_ids, damaged_ids;

  CorruptNeighbourCatalog() {
    fs::create_directories(dir / "img");
    std::string csv = "id,path,label,split\n";
    for (int i = 0; i < 28; ++i) {
      const cv::Mat picture = testing::test_picture(40 + 13 * i, 32 + 7 * i, i);
      const Bytes jpeg = encode_jpeg(picture, 70 + i);
      const char* ext = i < 20 ? ".jpg" : i < 25 ? ".png" : ".webp";
      const Bytes valid = i < 20 ? jpeg : i < 25 ? testing::png_bytes(picture) : testing::webp_bytes(picture);
      const std::string label = i % 2 ? "blurry" : "good";
      const std::string id = "v" + std::to_string(i);
      csv += add(id + "_other", ext, other_damage(jpeg, i), label, false);
      csv += add(id + "_truncated", ext, testing::truncated(valid, 1.0 / 3), label, false);
      csv += add(id, ext, valid, label, true);
    }
    testing::write_text(dir / "manifest.csv", csv);
  }

  std::string add(const std::string& id, const char* ext, const Bytes& bytes, const std::string& label, bool valid) {
    write_file_atomic(dir / ("img/" + id + ext), std::string(bytes.begin(), bytes.end()));
    (valid ? valid_ids : damaged_ids).insert(id);
    return id + ",img/" + id + ext + "," + label + ",train\n";
  }

  PrepareReport prepare(int threads, const std::string& out) const {
    PrepareOptions o;
    o.input = dir / "manifest.csv";
    o.out_dir = dir / out;
    o.storage_size = 24;
    o.records_per_shard = 30;
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

TEST(PrepareWithCorruptNeighbours, KeepsEveryValidImageForAnyThreadCount) {
  CorruptNeighbourCatalog catalog;
  for (int threads : {1, 2, 8}) {
    const std::string out = "shards-" + std::to_string(threads);
    const PrepareReport report = catalog.prepare(threads, out);
    std::set<std::string> quarantined;
    for (const auto& q : report.quarantined) {
      quarantined.insert(q.id);
      EXPECT_EQ(catalog.valid_ids.count(q.id), 0u) << threads << " threads lost valid " << q.id << ": " << q.reason;
    }
    EXPECT_EQ(catalog.kept_ids(out), catalog.valid_ids) << threads << " threads";
    EXPECT_EQ(quarantined, catalog.damaged_ids) << threads << " threads";
  }
}

}  // namespace
}  // namespace shoplens
