// A synthetic tokenized corpus shaped like the text workload (docs/TEXT.md): binary quality
// label (18% positive, ~5% label noise), log-normal lengths with a long tail up to max_length,
// five metadata fields with ~6% missing each, created_at/shard_id split keys, and a split by
// time. Written straight into a text shard folder. Deterministic for a seed.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "shoplens/data/text_shards.h"

namespace shoplens {

struct SynthTextOptions {
  std::filesystem::path out_dir;
  int num_examples = 4000;
  std::uint64_t seed = 1234;
  int max_length = 512;
  int vocab_size = 8192;
  int records_per_shard = 2048;
  double val_fraction = 0.1;
  double test_fraction = 0.1;
  double positive_fraction = 0.18;  // of the observed (noisy) labels, exact up to rounding
  double missing_fraction = 0.06;   // per metadata field, independently
  double label_noise = 0.05;        // observed label differs from the one the text was written for
};

// Throws UsageError naming the flag (--num-examples, --max-length, ...) when out of range.
void validate_synth_text_options(const SynthTextOptions& options);

// The metadata schema the generator writes (the seed's five fields).
std::vector<CategoricalField> synth_text_categorical_fields();
std::vector<std::string> synth_text_numeric_fields();

struct SynthTextSummary {
  std::uint64_t examples = 0;
  std::uint64_t tokens = 0;
  std::uint64_t bytes_written = 0;
  std::uint64_t per_split[3] = {0, 0, 0};
  std::uint64_t positives_per_split[3] = {0, 0, 0};
  std::vector<std::pair<std::string, double>> missing_fraction;  // per metadata field
  std::uint32_t length_min = 0, length_p50 = 0, length_p90 = 0, length_p99 = 0, length_max = 0;
  std::uint64_t truncated = 0;    // examples cut at max_length
  std::uint64_t label_flips = 0;  // examples whose observed label is noise
  TextSplitRule split_rule;
  std::vector<ShardListing> shards;
  double seconds = 0;
};

// Writes <out>/<split>-NNNNN.{tokens,tidx} and <out>/text_dataset.json (last).
SynthTextSummary generate_synthetic_text(const SynthTextOptions& options);

}  // namespace shoplens
