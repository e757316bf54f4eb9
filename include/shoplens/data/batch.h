// One micro-batch as the loaders deliver it and the train step, evaluation, the batch finder and
// the benchmarks consume it. Image batches fill `images`; text batches fill the token fields.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <vector>

namespace shoplens {

struct Batch {
  std::int64_t index = 0;       // batch number within the epoch
  at::Tensor images;            // float32 [B, 3, S, S], normalised (image tasks)
  at::Tensor input_ids;         // int64 [B, L], padded with pad_id (text tasks)
  at::Tensor attention_mask;    // bool [B, L], true on real tokens
  at::Tensor lengths;           // int64 [B], real tokens per row (<= L)
  at::Tensor meta_categorical;  // int64 [B, C], 0 = missing; undefined when C = 0
  at::Tensor meta_numeric;      // float32 [B, N], NaN = missing; undefined when N = 0
  at::Tensor labels;            // int64 [B]
  at::Tensor targets;           // float32 [B, C] soft targets when mixing is on, else undefined
  std::vector<std::uint64_t> sample_ids;
  // Image tasks: the seed each sample's augmentation drew from (describe_augmentation says what it did).
  std::vector<std::uint64_t> sample_seeds;
  bool mixed = false;

  std::int64_t size() const { return labels.defined() ? labels.size(0) : 0; }
  bool is_text() const { return input_ids.defined(); }
  // Every tensor on `device` (a copy of the struct; the tensors move only when they are elsewhere).
  Batch to(const c10::Device& device, bool non_blocking = false) const;
  // Rows [start, start + count); text rows keep only the columns their longest row needs.
  Batch slice(std::int64_t start, std::int64_t count) const;
  // Token slots the batch occupies (rows x padded length), and the real tokens among them.
  std::int64_t padded_tokens() const;
  std::int64_t real_tokens() const;
};

// The step's batches cut into micro-batches of at most `max_samples` rows (0: no limit) and, for
// text, at most `max_tokens` padded token slots (0: no limit). The step divides its loss by the
// total sample count, so any cut leaves the step's gradients unchanged. Text rows are expected
// longest first within a batch (the text loader delivers them so), which keeps every piece's
// padding to its own longest row.
std::vector<Batch> cut_micro_batches(const std::vector<Batch>& batches, int max_samples, std::int64_t max_tokens);

}  // namespace shoplens
