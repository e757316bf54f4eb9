// Joins and verifies the shards of a sharded score job (score_merge.h).
#include "shoplens/infer/score_merge.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <map>
#include <optional>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "score_chunks.h"
#include "shoplens/core/atomic_file.h"
#include "shoplens/core/errors.h"
#include "shoplens/core/interrupt.h"
#include "shoplens/core/json_limits.h"
#include "shoplens/core/plural.h"
#include "shoplens/core/price_table.h"
#include "shoplens/core/utf8.h"
#include "shoplens/data/csv.h"
#include "shoplens/infer/score_shard.h"
#include "shoplens/infer/scorer.h"

namespace shoplens {
namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

// NOLINTNEXTLINE(bugprone-exception-escape): its implicit moves move a json, which does not throw
struct ShardOutput {
  fs::path dir;
  json job, report;
  std::size_t index = 0, count = 0, first_row = 0, end_row = 0;
};

json read_json_file(const fs::path& file, const std::string& what) {
  std::error_code ec;
  if (!fs::exists(file, ec))
    throw DataError(
        fmt::format("score-merge: {} has no {}: {}", file.parent_path().string(), file.filename().string(), what));
  const std::string text = read_file(file);
  try {
    if (json_nesting_exceeds(text)) throw DataError("nested too deeply");
    return json::parse(text);
  } catch (const std::exception& e) {
    throw DataError(fmt::format("score-merge: {} is not valid JSON: {}", file.string(), e.what()));
  }
}

// `dir` is a shard folder (its score_job.json names a shard) or holds shard folders.
std::vector<fs::path> shard_folders(const fs::path& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) throw UsageError("score-merge: " + dir.string() + " is not a folder");
  if (fs::exists(dir / "score_job.json", ec) && read_json_file(dir / "score_job.json", "").contains("shard"))
    return {dir};
  std::vector<fs::path> found;
  for (const auto& entry : fs::directory_iterator(dir)) {
    const std::string name = entry.path().filename().string();
    if (entry.is_directory() && name.rfind("shard-", 0) == 0 && name.find("-of-") != std::string::npos)
      found.push_back(entry.path());
  }
  std::sort(found.begin(), found.end());
  return found;
}

ShardOutput read_shard(const fs::path& dir) {
  ShardOutput s;
  s.dir = dir;
  s.job = read_json_file(dir / "score_job.json", "it is not a score shard");
  if (!s.job.contains("shard"))
    throw DataError("score-merge: " + (dir / "score_job.json").string() + " names no shard (scored without --shard)");
  s.report = read_json_file(dir / "report.json",
                            "the shard has not finished (or was killed): rerun its task with the same command, "
                            "it resumes from its chunks");
  try {
    const json& shard = s.job.at("shard");
    s.index = shard.at("index").get<std::size_t>();
    s.count = shard.at("count").get<std::size_t>();
    s.first_row = shard.at("first_row").get<std::size_t>();
    s.end_row = shard.at("end_row").get<std::size_t>();
  } catch (const json::exception& e) {
    throw DataError(
        fmt::format("score-merge: {} has no readable shard: {}", (dir / "score_job.json").string(), e.what()));
  }
  return s;
}

// Every shard scored the same job: the same model, precision, input and its row count.
void check_same_job(const std::vector<ShardOutput>& shards) {
  const ShardOutput& first = shards.front();
  for (const ShardOutput& s : shards) {
    for (const auto& [key, value] : first.job.items()) {
      if (key == "shard" || s.job.value(key, json()) == value) continue;
      throw DataError(fmt::format(
          "score-merge: the shards scored different jobs: {} has {}={}, {} has {}={}{}", first.dir.string(), key,
          value.dump(), s.dir.string(), key, s.job.value(key, json()).dump(),
          key == "rows" || key == "input" ? " (the input changed between shards: rescore the changed ones)" : ""));
    }
    if (s.count != first.count)
      throw DataError(fmt::format("score-merge: {} is a shard of {}, {} one of {}: mixed shard counts",
                                  first.dir.string(), first.count, s.dir.string(), s.count));
  }
}

// Shards 0..N-1 each once, each over the rows shard_rows gives, together every row once.
void check_coverage(std::vector<ShardOutput>& shards) {
  std::sort(shards.begin(), shards.end(), [](const auto& a, const auto& b) { return a.index < b.index; });
  const std::size_t count = shards.front().count, rows = shards.front().job.at("rows").get<std::size_t>();
  const auto chunk_rows = shards.front().job.at("chunk_rows").get<std::size_t>();
  std::vector<std::string> missing;
  std::size_t expect = 0;
  for (std::size_t i = 0; i < shards.size(); ++i) {
    const ShardOutput& s = shards[i];
    if (i > 0 && s.index == shards[i - 1].index)
      throw DataError(
          fmt::format("score-merge: shard {} of {} appears twice ({} and {}): its rows {}..{} would be "
                      "merged twice; give each shard once",
                      s.index, count, shards[i - 1].dir.string(), s.dir.string(), s.first_row, s.end_row));
    for (; expect < s.index; ++expect) {
      const RowRange r = shard_rows(rows, expect, count, chunk_rows);
      missing.push_back(fmt::format("{} (rows {}..{})", expect, r.begin, r.end));
    }
    expect = s.index + 1;
    const RowRange r = shard_rows(rows, s.index, count, chunk_rows);
    if (r.begin != s.first_row || r.end != s.end_row)
      throw DataError(fmt::format(
          "score-merge: {} records rows {}..{}, but shard {} of {} over {} rows in chunks of {} is rows {}..{}",
          s.dir.string(), s.first_row, s.end_row, s.index, count, rows, chunk_rows, r.begin, r.end));
  }
  for (; expect < count; ++expect) {
    const RowRange r = shard_rows(rows, expect, count, chunk_rows);
    missing.push_back(fmt::format("{} (rows {}..{})", expect, r.begin, r.end));
  }
  if (!missing.empty())
    throw DataError(
        fmt::format("score-merge: {} of {} missing: {}; run {} (score with --shard I/{}) and merge again",
                    count_of(static_cast<std::int64_t>(missing.size()), "shard"), count,
                    fmt::join(missing.begin(), missing.begin() + std::min<std::size_t>(missing.size(), 10), ", "),
                    missing.size() == 1 ? "it" : "them", count));
}

// Given the input: each shard's rows still give the fingerprint the shard recorded.
void check_fingerprints(const ScoreMergeOptions& o, const std::vector<ShardOutput>& shards) {
  if (o.input.empty()) return;
  RowsOptions rows_options;
  rows_options.split = o.split;
  rows_options.root = o.root;
  const auto rows = open_score_rows(o.input, rows_options);
  for (const ShardOutput& s : shards) {
    const std::string recorded = s.job["shard"].value("rows_fingerprint", std::string());
    const std::string now = fmt::format(
        "{:016x}", shard_fingerprint(
                       *rows, shard_rows(rows->size(), s.index, s.count, s.job.at("chunk_rows").get<std::size_t>())));
    if (rows->size() != s.job.at("rows").get<std::size_t>() || now != recorded)
      throw DataError(fmt::format(
          "score-merge: {} scored rows {}..{} of an input of {} rows with fingerprint {}; {} now has {} rows and "
          "those rows give {}: the input changed since the shard was scored",
          s.dir.string(), s.first_row, s.end_row, s.job.at("rows").dump(), recorded, o.input.string(), rows->size(),
          now));
  }
}

struct MergeCounts {
  std::size_t rows = 0, errors = 0;
};

// One shard's predictions.csv into `out`: its header as the first shard's, then rows first..end,
// each once, in order.
MergeCounts copy_predictions(const ShardOutput& s, std::vector<std::string>& header, AtomicFileWriter& out) {
  const fs::path file = s.dir / "predictions.csv";
  std::ifstream in(file, std::ios::binary);
  if (!in) throw DataError("score-merge: cannot read " + file.string() + ": " + std::strerror(errno));
  CsvStreamReader csv(in, file.string());
  MergeCounts counts;
  std::size_t expect = s.first_row;
  bool first_record = true;
  for (auto records = csv.next(); !records.empty(); records = csv.next()) {
    if (interrupt_requested()) throw InterruptedError();
    for (const CsvRecord& r : records) {
      if (!r.error.empty()) throw DataError(fmt::format("score-merge: {} line {}: {}", file.string(), r.line, r.error));
      if (first_record) {
        first_record = false;
        if (header.empty()) {
          header = r.fields;
          const std::string line = csv_line(header) + "\n";
          out.write(line.data(), line.size());
        } else if (r.fields != header) {
          throw DataError(fmt::format("score-merge: {} has columns {}, the first shard {}", file.string(),
                                      csv_line(r.fields), csv_line(header)));
        }
        continue;
      }
      const std::string want = std::to_string(expect);
      if (r.fields.size() != header.size() || r.fields[0] != want)
        throw DataError(
            fmt::format("score-merge: {} line {} holds row {} where row {} belongs ({}); rescore the shard",
                        file.string(), r.line, r.fields.empty() ? "?" : r.fields[0], want,
                        expect >= s.end_row ? "a row beyond the shard's rows" : "rows missing or repeated"));
      ++expect;
      ++counts.rows;
      counts.errors += r.fields[2] == "error";
      const std::string line = csv_line(r.fields) + "\n";
      out.write(line.data(), line.size());
    }
  }
  if (expect != s.end_row)
    throw DataError(fmt::format("score-merge: {} ends at row {}, the shard's rows run to {}: rescore the shard",
                                file.string(), expect, s.end_row));
  return counts;
}

json number_or_null(const json& report, const char* key) {
  const json value = report.value(key, json());
  return value.is_number() ? value : json(nullptr);
}

json shard_entry(const ShardOutput& s, const MergeCounts& counts) {
  const json throughput = s.report.value("throughput", json::object());
  return {{"index", s.index},
          {"folder", s.dir.string()},
          {"first_row", s.first_row},
          {"end_row", s.end_row},
          {"rows", counts.rows},
          {"rows_error", counts.errors},
          {"device", s.report.value("device", "")},
          {"images", throughput.value("images", 0)},
          {"seconds", throughput.value("seconds", 0.0)},
          {"images_per_second", number_or_null(s.report, "images_per_second")},
          {"wall_seconds", number_or_null(s.report, "wall_seconds")},
          {"price_per_device_hour", number_or_null(s.report, "price_per_device_hour")}};
}

// Rates and cost over the shards: the images/s of one device (all images over all device-seconds)
// and of the whole job when the shards run side by side (the sum of the shards' rates).
void add_totals(json& report, const json& entries, double price_per_hour) {
  std::int64_t images = 0;
  double seconds = 0, summed_rate = 0;
  std::optional<double> recorded_price;
  bool one_price = true;
  for (const json& e : entries) {
    images += e["images"].get<std::int64_t>();
    seconds += e["seconds"].get<double>();
    if (e["images_per_second"].is_number()) summed_rate += e["images_per_second"].get<double>();
    const json& p = e["price_per_device_hour"];
    if (!p.is_number() || (recorded_price && *recorded_price != p.get<double>())) one_price = false;
    if (p.is_number()) recorded_price = p.get<double>();
  }
  const double per_device = images > 0 && seconds > 0 ? static_cast<double>(images) / seconds : 0.0;
  report["images"] = images;
  report["device_seconds"] = seconds;
  report["images_per_second_per_device"] = per_device > 0 ? json(per_device) : json(nullptr);
  report["images_per_second_all_shards"] = summed_rate > 0 ? json(summed_rate) : json(nullptr);
  const double price = price_per_hour > 0 ? price_per_hour : (one_price && recorded_price ? *recorded_price : 0.0);
  if (price > 0 && per_device > 0) {
    report["price_per_device_hour"] = price;
    report["price_source"] = price_per_hour > 0 ? "--price-per-hour" : "recorded by every shard";
    report["cost_per_million_images"] = cost_per_million_images(price, per_device);
  } else {
    report["cost_per_million_images"] = nullptr;
  }
}

void add_error_reasons(json& report, const std::vector<ShardOutput>& shards) {
  std::map<std::string, std::int64_t> reasons;
  for (const ShardOutput& s : shards) {
    const json counted = s.report.value("error_reasons", json::object());
    for (const auto& [reason, rows] : counted.items())
      if (rows.is_number_integer()) reasons[reason] += rows.get<std::int64_t>();
  }
  report["error_reasons"] = reasons;
}

std::vector<ShardOutput> gather_shards(const ScoreMergeOptions& o) {
  std::vector<ShardOutput> shards;
  for (const fs::path& job : o.jobs)
    for (const fs::path& dir : shard_folders(job)) shards.push_back(read_shard(dir));
  if (shards.empty())
    throw UsageError(fmt::format("score-merge: no shard folder (shard-IIIII-of-NNNNN) in {}",
                                 o.jobs.empty() ? std::string("(none given)") : o.jobs.front().string()));
  check_same_job(shards);
  check_coverage(shards);
  check_fingerprints(o, shards);
  return shards;
}

}  // namespace

json merge_score_shards(const ScoreMergeOptions& o) {
  std::vector<ShardOutput> shards = gather_shards(o);
  const fs::path out_dir = o.out_dir.empty() ? o.jobs.front() : o.out_dir;
  fs::create_directories(out_dir);
  json entries = json::array();
  MergeCounts total;
  {
    AtomicFileWriter out(out_dir / "predictions.csv");
    std::vector<std::string> header;
    for (const ShardOutput& s : shards) {
      const MergeCounts counts = copy_predictions(s, header, out);
      total.rows += counts.rows;
      total.errors += counts.errors;
      entries.push_back(shard_entry(s, counts));
    }
    out.commit();
  }
  const json& first = shards.front().job;
  json report = {{"rows", total.rows},
                 {"input_rows", first.at("rows")},
                 {"rows_ok", total.rows - total.errors},
                 {"rows_error", total.errors},
                 {"shards", shards.size()},
                 {"input", first.value("input", "")},
                 {"job", first},
                 {"fingerprints_checked_against_input", !o.input.empty()},
                 {"per_shard", entries}};
  report["job"].erase("shard");
  add_error_reasons(report, shards);
  add_totals(report, entries, o.price_per_hour);
  write_file_atomic(out_dir / "report.json", dump_json_escaped(report, 2) + "\n");
  spdlog::info("score-merge: {} from {} ({}) -> {}", count_of(static_cast<std::int64_t>(total.rows), "row"),
               count_of(static_cast<std::int64_t>(shards.size()), "shard"),
               count_of(static_cast<std::int64_t>(total.errors), "error"), (out_dir / "predictions.csv").string());
  return report;
}

}  // namespace shoplens
