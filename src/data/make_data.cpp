// `shoplens make-data`: the synthetic catalog or text dataset written with its log and summary.
#include "shoplens/data/make_data.h"

#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "shoplens/core/atomic_file.h"
#include "shoplens/core/errors.h"
#include "shoplens/core/logging.h"
#include "shoplens/core/plural.h"
#include "shoplens/core/runtime.h"
#include "shoplens/core/strings.h"
#include "shoplens/data/manifest.h"
#include "shoplens/data/text_shards.h"

namespace shoplens {
namespace {

nlohmann::json summary_json(const SynthOptions& o, const SynthSummary& s) {
  nlohmann::json per_class = nlohmann::json::object();
  for (std::size_t c = 0; c < synth_classes().size(); ++c) per_class[synth_classes()[c].name] = s.per_class[c];
  return {
      {"command", "make-data"},
      {"version", shoplens_version()},
      {"commit", build_commit()},
      {"out", o.out_dir.string()},
      {"seed", o.seed},
      {"num_images", s.images},
      {"image_size_range", {o.min_side, o.max_side}},
      {"corrupt_fraction", o.corrupt_fraction},
      {"missing_metadata_fraction", o.missing_metadata_fraction},
      {"png_fraction", o.png_fraction},
      {"val_fraction", o.val_fraction},
      {"test_fraction", o.test_fraction},
      {"threads", s.threads},
      {"seconds", s.seconds},
      {"images_per_second", s.seconds > 0 ? s.images / s.seconds : 0.0},
      {"bytes_written", s.bytes_written},
      {"per_class", per_class},
      {"corrupted", {{"total", s.corrupted}, {"by_kind", s.corrupted_by_kind}}},
      {"records_missing_metadata", s.records_missing_metadata},
      {"manifest", "manifest.csv"},
      {"corruptions", "corruptions.csv"},
      {"classes", "classes.txt"},
  };
}

nlohmann::json text_summary_json(const SynthTextOptions& o, const SynthTextSummary& s) {
  nlohmann::json splits = nlohmann::json::object();
  for (int k = 0; k < kNumSplits; ++k) {
    const auto n = s.per_split[k];
    splits[split_name(static_cast<Split>(k))] = {
        {"count", n},
        {"positives", s.positives_per_split[k]},
        {"positive_fraction", n ? double(s.positives_per_split[k]) / double(n) : 0.0}};
  }
  nlohmann::json missing = nlohmann::json::object();
  for (const auto& [field, fraction] : s.missing_fraction) missing[field] = fraction;
  std::uint64_t positives = 0;
  for (auto p : s.positives_per_split) positives += p;
  return {
      {"command", "make-data"},
      {"task", "text"},
      {"version", shoplens_version()},
      {"commit", build_commit()},
      {"out", o.out_dir.string()},
      {"seed", o.seed},
      {"num_examples", s.examples},
      {"vocab_size", o.vocab_size},
      {"max_length", o.max_length},
      {"records_per_shard", o.records_per_shard},
      {"val_fraction", o.val_fraction},
      {"test_fraction", o.test_fraction},
      {"label_noise", o.label_noise},
      {"missing_metadata_fraction", o.missing_fraction},
      {"positive_fraction", s.examples ? double(positives) / double(s.examples) : 0.0},
      {"splits", splits},
      {"split_rule",
       {{"key", s.split_rule.key},
        {"val_from", s.split_rule.val_from},
        {"test_from", s.split_rule.test_from},
        {"description", s.split_rule.description}}},
      {"missing_fraction", missing},
      {"length",
       {{"min", s.length_min},
        {"p50", s.length_p50},
        {"p90", s.length_p90},
        {"p99", s.length_p99},
        {"max", s.length_max},
        {"truncated", s.truncated}}},
      {"tokens", s.tokens},
      {"label_flips", s.label_flips},
      {"shards", s.shards.size()},
      {"bytes_written", s.bytes_written},
      {"seconds", s.seconds},
      {"dataset", kTextShardFormat.dataset_file},
  };
}

// The output folder, with make-data.log in it from here on.
void open_output_folder(const std::filesystem::path& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) throw IoError("cannot create '" + dir.string() + "': " + ec.message());
  add_log_file(dir / "make-data.log");
}

// make-data.json beside the data; returns its path.
std::filesystem::path write_summary(const std::filesystem::path& dir, const nlohmann::json& summary) {
  auto path = dir / "make-data.json";
  write_file_atomic(path, summary.dump(2) + "\n");
  spdlog::info("summary: {}", path.string());
  return path;
}

}  // namespace

std::filesystem::path make_image_catalog(const SynthOptions& o) {
  open_output_folder(o.out_dir);
  spdlog::info("make-data: {} of {}-{} px into {} (seed {})", count_of(o.num_images, "image"), o.min_side, o.max_side,
               o.out_dir.string(), o.seed);
  const SynthSummary s = generate_synthetic_catalog(o);

  std::vector<std::string> per_class;
  for (std::size_t c = 0; c < synth_classes().size(); ++c)
    per_class.push_back(synth_classes()[c].name + " " + std::to_string(s.per_class[c]));
  std::vector<std::string> kinds;
  for (const auto& [kind, n] : s.corrupted_by_kind) kinds.push_back(kind + " " + std::to_string(n));
  spdlog::info("make-data: {} in {:.1f} s ({:.0f} images/s on {}, {})", count_of(s.images, "image"), s.seconds,
               s.seconds > 0 ? s.images / s.seconds : 0.0, count_of(s.threads, "thread"),
               format_bytes(double(s.bytes_written)));
  spdlog::info("per class: {}", join(per_class, ", "));
  spdlog::info("corrupted files: {}{}", s.corrupted, kinds.empty() ? "" : " (" + join(kinds, ", ") + ")");
  spdlog::info("records missing metadata: {}", s.records_missing_metadata);

  spdlog::info("manifest: {}", s.manifest.string());
  return write_summary(o.out_dir, summary_json(o, s));
}

std::filesystem::path make_text_dataset(const SynthTextOptions& o) {
  validate_synth_text_options(o);
  open_output_folder(o.out_dir);
  spdlog::info("make-data: {} text examples, max length {}, vocabulary {} into {} (seed {})", o.num_examples,
               o.max_length, o.vocab_size, o.out_dir.string(), o.seed);
  const SynthTextSummary s = generate_synthetic_text(o);
  std::vector<std::string> splits;
  splits.reserve(kNumSplits);
  for (int k = 0; k < kNumSplits; ++k)
    splits.push_back(fmt::format("{} {} ({:.1f}% positive)", split_name(static_cast<Split>(k)), s.per_split[k],
                                 s.per_split[k] ? 100.0 * s.positives_per_split[k] / s.per_split[k] : 0.0));
  spdlog::info("make-data: {}, {} in {}, {:.1f} s", count_of(s.examples, "example"), count_of(s.tokens, "token"),
               count_of(static_cast<std::int64_t>(s.shards.size()), "shard"), s.seconds);
  spdlog::info("splits by created_at: {}", join(splits, ", "));
  spdlog::info("length: min {}, median {}, p99 {}, max {} ({} truncated)", s.length_min, s.length_p50, s.length_p99,
               s.length_max, s.truncated);
  spdlog::info("dataset: {}", (o.out_dir / kTextShardFormat.dataset_file).string());
  return write_summary(o.out_dir, text_summary_json(o, s));
}

}  // namespace shoplens
