// `shoplens score-merge`: joins the shards of a sharded score job (docs/SCORING.md, "Sharded
// scoring"). Every shard's job, report and predictions are read; the merge checks that the shards
// scored the same model over the same input, that every shard of the job is there, finished and
// holds its rows exactly once (none missing, none twice), and, given the input, that each shard's
// rows still give the fingerprint the shard recorded. Then it writes predictions.csv (every input
// row once, in order) and report.json (rows, errors, images/s per shard and in all, cost per
// million images). Every mismatch is a DataError naming the shard folder, the file and the row.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace shoplens {

struct ScoreMergeOptions {
  // score's --out folders (holding shard-IIIII-of-NNNNN folders), or shard folders themselves.
  std::vector<std::filesystem::path> jobs;
  std::filesystem::path out_dir;  // predictions.csv and report.json (empty: the first of `jobs`)
  // Optional: the input the shards scored, to check each shard's rows fingerprint against it.
  std::filesystem::path input;
  std::filesystem::path root;  // CSV or list input: base of relative paths (as score's --root)
  std::string split = "all";   // shards input: as score's --split
  // Device price per hour for the cost per million images; 0: the price the shards recorded
  // (score --prices/--instance or --price-per-hour), none when they recorded none.
  double price_per_hour = 0;
};

// Returns report.json's content (also written). UsageError when no shard folder is found.
nlohmann::json merge_score_shards(const ScoreMergeOptions& options);

}  // namespace shoplens
