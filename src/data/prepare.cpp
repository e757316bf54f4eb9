#include "shoplens/data/prepare.h"

#include <sys/stat.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <map>
#include <set>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>
#include <opencv2/core.hpp>
#include <spdlog/spdlog.h>

#include "dataset_json.h"
#include "shoplens/core/atomic_file.h"
#include "shoplens/core/errors.h"
#include "shoplens/core/path_overlap.h"
#include "shoplens/core/hash.h"
#include "shoplens/core/interrupt.h"
#include "shoplens/core/plural.h"
#include "shoplens/core/progress.h"
#include "shoplens/core/runtime.h"
#include "shoplens/core/strings.h"
#include "shoplens/core/utf8.h"
#include "shoplens/data/csv.h"
#include "shoplens/data/dataset_file.h"
#include "shoplens/data/image_io.h"
#include "shoplens/data/shards.h"

namespace shoplens {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

// Bump when the stored bytes or the summary format for the same input would change. 2: summaries
// name quarantined rows by sample id (their id and path come from the manifest, byte for byte).
constexpr int kPrepareFormat = 3;  // 3: JPEG originals that need no resize are stored as they are

struct ShardPlan {
  std::string name;
  Split split;
  std::vector<std::size_t> records;  // indices into manifest.records (= sample ids)
};

// A row of the shard that was not kept. Its id, path and line are the manifest's (sample id =
// index into manifest.records): JSON cannot hold them byte for byte when they are not UTF-8.
struct ShardReject {
  std::uint64_t sample = 0;
  std::string stage, reason;
};

// What one shard contributed; also its completion marker (<name>.summary.json).
struct ShardSummary {
  std::string fingerprint;
  ShardListing info;
  std::vector<ShardReject> quarantined;
  std::vector<std::uint64_t> kept_ids;
  std::array<double, 3> pixel_sum{0, 0, 0};
  std::array<double, 3> pixel_sumsq{0, 0, 0};
  double pixel_count = 0;
  std::size_t extension_mismatches = 0;
  std::size_t originals_kept = 0;  // JPEGs stored as their original bytes
  std::uint64_t input_bytes = 0;
};

json summary_to_json(const ShardSummary& s) {
  json q = json::array();
  for (const auto& r : s.quarantined) q.push_back({{"sample", r.sample}, {"stage", r.stage}, {"reason", r.reason}});
  return {{"fingerprint", s.fingerprint},
          {"shard", listing_to_json(s.info, kImageShardFormat)},
          {"quarantined", q},
          {"kept_ids", s.kept_ids},
          {"pixel_sum", s.pixel_sum},
          {"pixel_sumsq", s.pixel_sumsq},
          {"pixel_count", s.pixel_count},
          {"extension_mismatches", s.extension_mismatches},
          {"originals_kept", s.originals_kept},
          {"input_bytes", s.input_bytes}};
}

// nullopt when the summary is missing, unreadable or stale: the shard is then rebuilt.
std::optional<ShardSummary> load_summary(const fs::path& file, const std::string& fingerprint, Split split,
                                         std::size_t num_records) {
  std::error_code ec;
  if (!fs::exists(file, ec)) return std::nullopt;
  try {
    const json doc = json::parse(read_file(file));
    const DatasetFields fields(doc, file.string());
    if (fields.get<std::string>("fingerprint") != fingerprint) return std::nullopt;
    ShardSummary s;
    s.fingerprint = fingerprint;
    s.info = listing_from_json(fields.section("shard"), kImageShardFormat);
    s.info.split = split;
    const std::size_t quarantined = fields.list("quarantined").size();
    for (std::size_t i = 0; i < quarantined; ++i) {
      const DatasetFields q = fields.element("quarantined", i);
      s.quarantined.push_back(
          {q.get<std::uint64_t>("sample"), q.get<std::string>("stage"), q.get<std::string>("reason")});
      if (s.quarantined.back().sample >= num_records) q.fail("sample", "outside the manifest's rows");
    }
    s.kept_ids = fields.get<std::vector<std::uint64_t>>("kept_ids");
    s.pixel_sum = fields.get<std::array<double, 3>>("pixel_sum");
    s.pixel_sumsq = fields.get<std::array<double, 3>>("pixel_sumsq");
    s.pixel_count = fields.get<double>("pixel_count");
    s.extension_mismatches = fields.get<std::uint64_t>("extension_mismatches");
    s.originals_kept = fields.get<std::uint64_t>("originals_kept");
    s.input_bytes = fields.get<std::uint64_t>("input_bytes");
    return s;
  } catch (const std::exception& e) {
    spdlog::warn("{}: unreadable ({}); rebuilding the shard", file.string(), e.what());
    return std::nullopt;
  }
}

// The shard's files must still be there and match what its summary recorded.
bool shard_files_intact(const fs::path& dir, const ShardListing& info) {
  std::error_code ec;
  const fs::path idx = shard_index_path(dir, info.name, kImageShardFormat);
  const fs::path data = shard_payload_path(dir, info.name, kImageShardFormat);
  if (!fs::exists(idx, ec) || !fs::exists(data, ec)) return false;
  if (fs::file_size(data, ec) != info.payload_size) return false;
  std::string bytes = read_file(idx);
  return crc32_of(bytes.data(), bytes.size()) == info.index_crc32;
}

std::string shard_fingerprint(const PrepareOptions& o, const Manifest& m, const ShardPlan& plan) {
  Fingerprint hasher;
  hasher.add(kPrepareFormat);
  hasher.add(o.storage_size);
  hasher.add(static_cast<std::uint64_t>(o.encoding));
  hasher.add(o.jpeg_quality);
  hasher.add(o.scaled_decode ? 1 : 0);
  hasher.add(std::to_string(o.max_megapixels));
  hasher.add(join(m.classes, ","));
  for (std::size_t i : plan.records) {
    const auto& r = m.records[i];
    hasher.add(i);
    hasher.add(r.id);
    hasher.add(r.file.string());
    hasher.add(r.label);
    hasher.add(static_cast<std::uint64_t>(r.split));
    for (const auto& v : r.metadata) hasher.add(v);
    struct stat st {};
    if (::stat(r.file.c_str(), &st) == 0) {
      hasher.add(static_cast<std::uint64_t>(st.st_size));
      hasher.add(static_cast<std::uint64_t>(st.st_mtim.tv_sec) * 1000000000ULL + st.st_mtim.tv_nsec);
    }
  }
  return hasher.hex();
}

std::vector<std::vector<std::string>> build_vocabulary(const Manifest& m) {
  std::vector<std::set<std::string>> sets(m.metadata_fields.size());
  for (const auto& r : m.records)
    for (std::size_t f = 0; f < r.metadata.size() && f < sets.size(); ++f)
      if (!r.metadata[f].empty()) sets[f].insert(r.metadata[f]);
  std::vector<std::vector<std::string>> vocab;
  vocab.reserve(sets.size());
  for (auto& s : sets) vocab.emplace_back(s.begin(), s.end());
  return vocab;
}

MetadataCodes encode_metadata(const ManifestRecord& r, const std::vector<std::vector<std::string>>& vocab) {
  MetadataCodes codes{};
  for (std::size_t f = 0; f < vocab.size() && f < codes.size(); ++f) {
    if (f >= r.metadata.size() || r.metadata[f].empty()) continue;
    auto it = std::lower_bound(vocab[f].begin(), vocab[f].end(), r.metadata[f]);
    std::size_t code = static_cast<std::size_t>(it - vocab[f].begin()) + 1;
    codes[f] = static_cast<std::uint16_t>(std::min<std::size_t>(code, 0xFFFF));  // 0xFFFF: "other" beyond 65534 values
  }
  return codes;
}

struct ProcessedImage {
  bool ok = false;
  std::string reason;
  std::vector<std::uint8_t> payload;
  int height = 0, width = 0;
  bool extension_mismatch = false;
  bool original_kept = false;
  std::uint64_t input_bytes = 0;
  cv::Scalar mean, stddev;
};

// Never throws: whatever goes wrong with one image is that row's quarantine reason (an exception
// escaping a worker thread would end the whole run). Reasons are made valid UTF-8 here, so the
// shard summary (JSON) holds them exactly.
ProcessedImage process_image(const ManifestRecord& r, const PrepareOptions& o, const DatasetRoot& root) {
  ProcessedImage out;
  try {
    std::vector<std::uint8_t> bytes = root.read(r.file, o.max_file_bytes);
    out.input_bytes = bytes.size();
    DecodeOptions decode;
    decode.min_short_side = o.scaled_decode ? o.storage_size : 0;
    decode.max_megapixels = o.max_megapixels;
    DecodedImage img = decode_image(bytes.data(), bytes.size(), decode);
    ImageFormat by_extension = format_from_extension(r.file);
    out.extension_mismatch = by_extension != img.format;
    cv::Mat stored = resize_short_side(img.rgb, o.storage_size, 4 * o.storage_size);
    if (!stored.isContinuous()) stored = stored.clone();
    if (stored.rows > UINT16_MAX || stored.cols > UINT16_MAX) throw DataError("image too large to store");
    cv::meanStdDev(stored, out.mean, out.stddev);
    out.height = stored.rows;
    out.width = stored.cols;
    // A JPEG that needs no resize is stored as its own bytes: stored data equals source data.
    if (o.encoding == PayloadEncoding::kJpeg && img.usable_as_payload && stored.data == img.rgb.data) {
      out.payload = std::move(bytes);
      out.original_kept = true;
    } else if (o.encoding == PayloadEncoding::kJpeg) {
      out.payload = encode_jpeg(stored, o.jpeg_quality);
    } else {
      out.payload.assign(stored.data, stored.data + stored.total() * 3);
    }
    out.ok = true;
  } catch (const DataError& e) {
    out.reason = escape_invalid_utf8(e.what());
  } catch (const cv::Exception& e) {
    out.reason = escape_invalid_utf8(std::string("OpenCV: ") + e.what());
  } catch (const std::bad_alloc&) {
    out.reason = "out of memory while decoding";
  } catch (const std::exception& e) {
    out.reason = escape_invalid_utf8(std::string("unexpected error: ") + e.what());
  }
  return out;
}

// Decodes the shard's images on `o.threads` threads; throws Interrupted when asked to stop.
std::vector<ProcessedImage> process_shard_images(const ShardPlan& plan, const Manifest& m, const PrepareOptions& o,
                                                 const DatasetRoot& root, Progress& progress) {
  std::vector<ProcessedImage> results(plan.records.size());
  std::atomic<std::size_t> next{0};
  std::atomic<bool> stop{false};
  auto worker = [&] {
    while (!stop.load()) {
      std::size_t k = next.fetch_add(1);
      if (k >= plan.records.size()) break;
      if (interrupt_requested()) {
        stop = true;
        break;
      }
      results[k] = process_image(m.records[plan.records[k]], o, root);
      progress.advance();
    }
  };
  const int threads = std::max(1, std::min<int>(o.threads, static_cast<int>(plan.records.size())));
  std::vector<std::thread> pool;
  for (int t = 1; t < threads; ++t) pool.emplace_back(worker);
  worker();
  for (auto& t : pool) t.join();
  throw_if_interrupted();
  return results;
}

// The training split's channel statistics (for dataset.json's mean and std) gain one image.
void add_pixel_statistics(ShardSummary& s, const ProcessedImage& image) {
  const double n = static_cast<double>(image.height) * image.width;
  for (int c = 0; c < 3; ++c) {
    const double mean = image.mean[c] / 255.0, sd = image.stddev[c] / 255.0;
    s.pixel_sum[c] += mean * n;
    s.pixel_sumsq[c] += (sd * sd + mean * mean) * n;
  }
  s.pixel_count += n;
}

ShardSummary build_shard(const ShardPlan& plan, const Manifest& m, const PrepareOptions& o, const DatasetRoot& root,
                         const std::vector<std::vector<std::string>>& vocab, Progress& progress) {
  std::vector<ProcessedImage> results = process_shard_images(plan, m, o, root, progress);
  ShardSummary s;
  ShardWriter writer(o.out_dir, plan.name, plan.split);
  for (std::size_t k = 0; k < plan.records.size(); ++k) {
    const std::size_t id = plan.records[k];
    const auto& r = m.records[id];
    auto& res = results[k];
    s.input_bytes += res.input_bytes;
    if (!res.ok) {
      s.quarantined.push_back({id, "decode", res.reason});
      continue;
    }
    if (res.extension_mismatch) ++s.extension_mismatches;
    if (res.original_kept) ++s.originals_kept;
    writer.add(res.payload.data(), res.payload.size(), res.height, res.width, o.encoding, r.label, id,
               encode_metadata(r, vocab));
    s.kept_ids.push_back(id);
    if (plan.split == Split::kTrain) add_pixel_statistics(s, res);
    res.payload = {};
  }
  s.info = writer.finish();
  return s;
}

std::vector<ShardPlan> plan_shards(const Manifest& m, int records_per_shard) {
  std::vector<ShardPlan> plans;
  for (int split = 0; split < kNumSplits; ++split) {
    std::vector<std::size_t> members;
    for (std::size_t i = 0; i < m.records.size(); ++i)
      if (static_cast<int>(m.records[i].split) == split) members.push_back(i);
    for (std::size_t start = 0; start < members.size(); start += records_per_shard) {
      ShardPlan p;
      char name[64];
      std::snprintf(name, sizeof name, "%s-%05zu", split_name(static_cast<Split>(split)), start / records_per_shard);
      p.name = name;
      p.split = static_cast<Split>(split);
      p.records.assign(members.begin() + start,
                       members.begin() + std::min(members.size(), start + static_cast<std::size_t>(records_per_shard)));
      plans.push_back(std::move(p));
    }
  }
  return plans;
}

void write_records_csv(const fs::path& dir, const Manifest& m, const std::vector<ShardSummary>& summaries) {
  std::vector<std::string> header{"sample_id", "id", "path", "label", "split", "shard"};
  header.insert(header.end(), m.metadata_fields.begin(), m.metadata_fields.end());
  std::string out = csv_line(header) + "\n";
  for (const auto& s : summaries) {
    for (auto id : s.kept_ids) {
      const auto& r = m.records[id];
      std::vector<std::string> row{std::to_string(id),  r.id,       r.path, m.classes[r.label],
                                   split_name(r.split), s.info.name};
      row.insert(row.end(), r.metadata.begin(), r.metadata.end());
      out += csv_line(row) + "\n";
    }
  }
  write_file_atomic(dir / "records.csv", out);
}

void write_quarantine_csv(const fs::path& dir, const std::vector<QuarantinedRow>& rows) {
  std::string out = csv_line({"line", "id", "path", "stage", "reason"}) + "\n";
  for (const auto& r : rows) out += csv_line({std::to_string(r.line), r.id, r.path, r.stage, r.reason}) + "\n";
  write_file_atomic(dir / "quarantine.csv", out);
}

json splits_to_json(const PrepareReport& r) {
  json doc = {{"source", r.split_source}, {"seed", r.split_seed}};
  if (r.split_source != "input") doc["val_fraction"] = r.val_fraction;
  if (r.split_source == "val_carved_from_train") doc["val_carved_from_train"] = r.val_carved_from_train;
  return doc;
}

void describe_splits(const Manifest& m, const ManifestOptions& o, PrepareReport& report) {
  report.split_seed = o.seed;
  report.val_fraction = o.val_fraction;
  report.val_carved_from_train = m.val_carved_from_train;
  report.split_source =
      !m.had_split_column ? "assigned" : (m.val_carved_from_train ? "val_carved_from_train" : "input");
  if (m.val_carved_from_train)
    spdlog::info(
        "prepare: the input has no val split: {} train rows carved into val (data.val_fraction {}, seed {}); "
        "test is left as it is",
        m.val_carved_from_train, o.val_fraction, o.seed);
}

json report_to_json(const PrepareReport& r) {
  json per_class = json::object();
  for (std::size_t c = 0; c < r.classes.size(); ++c)
    per_class[r.classes[c]] = {{"train", r.kept_per_class_split[c][0]},
                               {"val", r.kept_per_class_split[c][1]},
                               {"test", r.kept_per_class_split[c][2]}};
  std::map<std::string, std::size_t> reasons;
  for (const auto& q : r.quarantined) reasons[q.stage + ": " + q.reason.substr(0, q.reason.find(':'))]++;
  json missing = json::object();
  for (std::size_t f = 0; f < r.metadata_fields.size(); ++f) missing[r.metadata_fields[f]] = r.metadata_missing[f];
  return {{"total_rows", r.total_rows},
          {"kept", r.kept},
          {"quarantined", r.quarantined.size()},
          {"accounted", r.kept + r.quarantined.size() == r.total_rows},
          {"per_class", per_class},
          {"quarantine_reasons", reasons},
          {"metadata_missing", missing},
          {"channel_mean", r.mean},
          {"channel_std", r.std},
          {"extension_mismatches", r.extension_mismatches},
          {"jpeg_originals_kept", r.jpeg_originals_kept},
          {"warnings", r.warnings},
          {"shards_written", r.shards_written},
          {"shards_reused", r.shards_reused},
          {"input_bytes", r.input_bytes},
          {"output_bytes", r.output_bytes},
          {"seconds", r.seconds},
          {"images_decoded", r.images_decoded},
          {"images_per_second", r.seconds > 0 ? r.images_decoded / r.seconds : 0.0},
          {"splits", splits_to_json(r)}};
}

// Every shard of the plan, reused when its summary and files are intact, else built.
std::vector<ShardSummary> build_or_reuse_shards(const PrepareOptions& o, const Manifest& m, const DatasetRoot& root,
                                                const std::vector<std::vector<std::string>>& vocab,
                                                PrepareReport& report) {
  const auto plans = plan_shards(m, o.records_per_shard);
  spdlog::info("prepare: {} from {} ({} rejected by the manifest), {}, {}, {}",
               count_of(static_cast<std::int64_t>(m.total_rows()), "row"), m.source, m.rejected.size(),
               count_of(static_cast<std::int64_t>(m.classes.size()), "class", "classes"),
               count_of(static_cast<std::int64_t>(plans.size()), "shard"), count_of(o.threads, "thread"));
  std::vector<ShardSummary> summaries;
  Progress progress("prepare", m.records.size(), "img");
  for (const auto& plan : plans) {
    const std::string fingerprint = shard_fingerprint(o, m, plan);
    const fs::path summary_file = o.out_dir / (plan.name + ".summary.json");
    auto reused = load_summary(summary_file, fingerprint, plan.split, m.records.size());
    if (reused && shard_files_intact(o.out_dir, reused->info)) {
      progress.advance(plan.records.size());
      ++report.shards_reused;
      summaries.push_back(std::move(*reused));
      continue;
    }
    ShardSummary s = build_shard(plan, m, o, root, vocab, progress);
    s.fingerprint = fingerprint;
    write_file_atomic(summary_file, dump_json_escaped(summary_to_json(s)) + "\n");
    report.images_decoded += plan.records.size();
    ++report.shards_written;
    summaries.push_back(std::move(s));
  }
  progress.finish();
  return summaries;
}

// Counts, per-class/split tallies and channel statistics from the shards' summaries.
void tally_shards(const Manifest& m, const std::vector<ShardSummary>& summaries, PrepareReport& report) {
  report.kept_per_class_split.assign(m.classes.size(), {0, 0, 0});
  report.metadata_missing.assign(m.metadata_fields.size(), 0);
  std::array<double, 3> sum{0, 0, 0}, sumsq{0, 0, 0};
  double pixels = 0;
  for (const auto& s : summaries) {
    for (const auto& q : s.quarantined) {
      const auto& r = m.records[q.sample];
      report.quarantined.push_back({r.id, r.path, r.line, q.stage, q.reason});
    }
    report.kept += s.kept_ids.size();
    report.extension_mismatches += s.extension_mismatches;
    report.jpeg_originals_kept += s.originals_kept;
    report.input_bytes += s.input_bytes;
    report.output_bytes += s.info.payload_size;
    for (auto id : s.kept_ids) {
      const auto& r = m.records[id];
      report.kept_per_class_split[r.label][static_cast<int>(r.split)]++;
      for (std::size_t f = 0; f < r.metadata.size(); ++f) report.metadata_missing[f] += r.metadata[f].empty();
    }
    for (int c = 0; c < 3; ++c) {
      sum[c] += s.pixel_sum[c];
      sumsq[c] += s.pixel_sumsq[c];
    }
    pixels += s.pixel_count;
  }
  for (int c = 0; c < 3; ++c) {
    report.mean[c] = pixels > 0 ? sum[c] / pixels : 0.0;
    report.std[c] = pixels > 0 ? std::sqrt(std::max(0.0, sumsq[c] / pixels - report.mean[c] * report.mean[c])) : 0.0;
  }
}

// Warnings about the result, then the checks that nothing was lost.
void check_outcome(const PrepareOptions& o, const Manifest& m, PrepareReport& report) {
  for (std::size_t c = 0; c < m.classes.size(); ++c)
    for (int split = 0; split < kNumSplits; ++split)
      if (report.kept_per_class_split[c][split] == 0)
        report.warnings.push_back("class '" + m.classes[c] + "' has no images in split '" +
                                  split_name(static_cast<Split>(split)) + "'");
  if (report.extension_mismatches)
    report.warnings.push_back(count_of(report.extension_mismatches, "file") +
                              (report.extension_mismatches == 1 ? " has" : " have") +
                              " content that does not match their extension (kept; decoded by content)");
  if (report.kept == 0)
    throw DataError(m.source + ": no image could be decoded (see " + (o.out_dir / "quarantine.csv").string() + ")");
  if (report.kept + report.quarantined.size() != report.total_rows)
    throw Error("internal accounting error: kept + quarantined != total rows");
}

void write_prepare_outputs(const PrepareOptions& o, const Manifest& m,
                           const std::vector<std::vector<std::string>>& vocab,
                           const std::vector<ShardSummary>& summaries, const PrepareReport& report) {
  DatasetInfo info;
  info.classes = m.classes;
  info.metadata_fields = m.metadata_fields;
  info.metadata_vocabulary = vocab;
  info.storage_size = o.storage_size;
  info.encoding = o.encoding == PayloadEncoding::kJpeg ? "jpeg" : "raw";
  for (const auto& s : summaries) info.shards.push_back(s.info);
  info.mean = report.mean;
  info.std = report.std;
  write_records_csv(o.out_dir, m, summaries);
  write_quarantine_csv(o.out_dir, report.quarantined);
  json prepare_params = {{"input", fs::absolute(o.input).string()},
                         {"storage_size", o.storage_size},
                         {"encoding", info.encoding},
                         {"jpeg_quality", o.jpeg_quality},
                         {"records_per_shard", o.records_per_shard},
                         {"scaled_decode", o.scaled_decode},
                         {"splits", splits_to_json(report)}};
  write_dataset_info(o.out_dir, info, dump_json_escaped(prepare_params));
  write_file_atomic(o.out_dir / "report.json", dump_json_escaped(report_to_json(report), 2) + "\n");
  write_file_atomic(o.out_dir / "report.md", format_prepare_report(report));
}

}  // namespace

PrepareOptions prepare_options_from_config(const Config& config) {
  PrepareOptions o;
  o.input = config.data.input;
  o.out_dir = config.data.shards;
  o.manifest.root = config.data.root;
  o.manifest.columns = config.data.columns;
  o.manifest.metadata_fields = config.data.metadata_fields;
  o.manifest.classes = config.data.classes;
  o.manifest.val_fraction = config.data.val_fraction;
  o.manifest.test_fraction = config.data.test_fraction;
  o.manifest.seed = static_cast<std::uint64_t>(config.run.seed);
  o.storage_size = config.data.storage_size;
  o.encoding = config.data.encoding;
  o.jpeg_quality = config.data.jpeg_quality;
  o.records_per_shard = config.data.records_per_shard;
  o.max_megapixels = config.data.max_megapixels;
  o.max_file_bytes = static_cast<std::uint64_t>(config.data.max_file_mb) << 20;
  o.scaled_decode = config.data.scaled_decode;
  o.threads = resolve_threads(config.run.threads);
  return o;
}

void check_prepare_paths(const PrepareOptions& o) {
  if (o.input.empty()) throw UsageError("prepare needs an input (--input or data.input)");
  if (o.out_dir.empty()) throw UsageError("prepare needs an output folder (--out or data.shards)");
  require_output_apart({"--out", o.out_dir}, {{"--input", o.input}});
}

PrepareReport prepare_dataset(const PrepareOptions& o) {
  check_prepare_paths(o);
  const auto start = std::chrono::steady_clock::now();
  Manifest m = load_dataset_input(o.input, o.manifest);
  const DatasetRoot root(m.root, o.manifest.root.empty() ? "the input's folder" : "data.root");
  std::error_code ec;
  fs::create_directories(o.out_dir, ec);
  if (ec) throw IoError("cannot create '" + o.out_dir.string() + "': " + ec.message());

  PrepareReport report;
  report.total_rows = m.total_rows();
  report.classes = m.classes;
  report.metadata_fields = m.metadata_fields;
  describe_splits(m, o.manifest, report);
  for (const auto& rej : m.rejected) report.quarantined.push_back({rej.id, rej.path, rej.line, "manifest", rej.reason});
  if (m.metadata_fields.size() > kIndexMetadataSlots)
    report.warnings.push_back("only the first " + std::to_string(kIndexMetadataSlots) +
                              " metadata fields are coded in the shard index; all are in records.csv");
  const auto vocab = build_vocabulary(m);
  const std::vector<ShardSummary> summaries = build_or_reuse_shards(o, m, root, vocab, report);
  tally_shards(m, summaries, report);
  check_outcome(o, m, report);
  report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  write_prepare_outputs(o, m, vocab, summaries, report);
  for (const auto& w : report.warnings) spdlog::warn("prepare: {}", w);
  return report;
}

namespace {

// "decode: 3, manifest: 1": the reasons' stages, counted, for one line.
std::string quarantine_reasons(const std::vector<QuarantinedRow>& rows) {
  std::map<std::string, std::size_t> stages;
  for (const auto& q : rows) stages[q.stage]++;
  std::string text;
  for (const auto& [stage, n] : stages) text += (text.empty() ? "" : ", ") + stage + ": " + std::to_string(n);
  return text;
}

}  // namespace

std::string format_prepare_summary(const PrepareReport& r, const fs::path& out_dir) {
  std::array<std::uint64_t, 3> per_split{0, 0, 0};
  for (const auto& counts : r.kept_per_class_split)
    for (std::size_t s = 0; s < 3; ++s) per_split[s] += counts[s];
  std::ostringstream os;
  os << "prepare: " << count_of(r.total_rows, "row") << ": " << r.kept << " kept, " << r.quarantined.size()
     << " quarantined";
  if (!r.quarantined.empty()) os << " (" << quarantine_reasons(r.quarantined) << ")";
  os << "\nsplits: train " << per_split[0] << ", val " << per_split[1] << ", test " << per_split[2] << " over "
     << count_of(r.classes.size(), "class", "classes") << "\n";
  char timing[96];
  std::snprintf(timing, sizeof timing, "%.1f s, %.0f images/s decoded", r.seconds,
                r.seconds > 0 ? r.images_decoded / r.seconds : 0.0);
  os << "shards: " << out_dir.string() << " (" << timing << ")\nreport: " << (out_dir / "report.md").string();
  if (!r.quarantined.empty()) os << "; every quarantined row: " << (out_dir / "quarantine.csv").string();
  os << "\n";
  return os.str();
}

std::string format_prepare_report(const PrepareReport& r) {
  std::ostringstream os;
  os << "# Prepare report\n\n";
  os << "Rows: " << r.total_rows << " total = " << r.kept << " kept + " << r.quarantined.size() << " quarantined\n\n";
  if (r.split_source == "val_carved_from_train")
    os << "Splits: the input had no val split; " << r.val_carved_from_train << " train rows (data.val_fraction "
       << r.val_fraction << " of each class, seed " << r.split_seed
       << ") were carved into val. Test is the input's.\n\n";
  else if (r.split_source == "assigned")
    os << "Splits: the input had none; assigned per class by a hash of the id (seed " << r.split_seed << ").\n\n";
  os << "| class | train | val | test |\n|---|---:|---:|---:|\n";
  for (std::size_t c = 0; c < r.classes.size(); ++c)
    os << "| " << r.classes[c] << " | " << r.kept_per_class_split[c][0] << " | " << r.kept_per_class_split[c][1]
       << " | " << r.kept_per_class_split[c][2] << " |\n";
  std::map<std::string, std::size_t> reasons;
  for (const auto& q : r.quarantined) reasons[q.stage + ": " + q.reason.substr(0, q.reason.find(':'))]++;
  os << "\n## Quarantined by reason\n\n";
  if (reasons.empty()) os << "none\n";
  for (const auto& [reason, n] : reasons) os << "- " << reason << ": " << n << "\n";
  os << "\nEvery quarantined row, with file and line: quarantine.csv\n";
  os << "\n## Metadata missing (kept rows)\n\n";
  for (std::size_t f = 0; f < r.metadata_fields.size(); ++f) {
    char pct[32];
    std::snprintf(pct, sizeof pct, "%.1f%%", r.kept ? 100.0 * r.metadata_missing[f] / r.kept : 0.0);
    os << "- " << r.metadata_fields[f] << ": " << r.metadata_missing[f] << " (" << pct << ")\n";
  }
  char stats[256];
  std::snprintf(stats, sizeof stats,
                "\n## Channel statistics (train, stored pixels)\n\nmean %.4f %.4f %.4f, std %.4f %.4f %.4f\n",
                r.mean[0], r.mean[1], r.mean[2], r.std[0], r.std[1], r.std[2]);
  os << stats;
  os << "\n## Shards\n\n"
     << r.shards_written << " written, " << r.shards_reused << " reused; " << format_bytes(r.input_bytes) << " read, "
     << format_bytes(r.output_bytes) << " stored\n";
  os << "\nStored images: " << r.jpeg_originals_kept << " JPEG originals byte for byte (no resize needed), "
     << r.kept - r.jpeg_originals_kept
     << " resized or converted, then encoded as data.encoding and data.jpeg_quality say\n";
  if (!r.warnings.empty()) {
    os << "\n## Warnings\n\n";
    for (const auto& w : r.warnings) os << "- " << w << "\n";
  }
  return os.str();
}

}  // namespace shoplens
