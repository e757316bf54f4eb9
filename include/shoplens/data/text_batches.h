// Text batches for the loader (docs/TEXT.md): tokens padded to the batch's longest row, the
// attention mask, metadata and labels; and the length-bucketed epoch order that keeps padding low
// without giving up exactly-once sampling.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "shoplens/data/loader.h"

namespace shoplens {

class TextSource;

struct TextBatchOptions {
  int max_length = 512;  // longer examples are truncated to their first max_length tokens
  int pad_id = 0;
  int pad_multiple = 8;  // padded length rounded up to this (tensor-core friendly), capped at max_length
  bool bucket_by_length = true;
  int bucket_window = 64;  // units (global batches) sorted by length together
  std::uint64_t seed = 1234;
};

class TextBatchBuilder : public BatchBuilder {
 public:
  TextBatchBuilder(std::shared_ptr<const TextSource> source, TextBatchOptions options);
  // Rows longest first (so a token budget cuts each piece to its own longest row).
  Batch build(const std::vector<std::uint32_t>& indices, const std::vector<std::uint64_t>& positions,
              std::int64_t epoch, std::int64_t batch_index) override;
  // Length bucketing: each window of bucket_window units is sorted by length (longest first, ties
  // by position), cut back into units, and the units are shuffled within the window (seeded by
  // seed, epoch and window). Only whole units move; the tail after the last one stays.
  void arrange(std::vector<std::uint32_t>& order, std::int64_t epoch, std::int64_t unit) const override;

 private:
  std::uint32_t clipped_length(std::uint32_t index) const;
  std::shared_ptr<const TextSource> source_;
  TextBatchOptions options_;
};

}  // namespace shoplens
