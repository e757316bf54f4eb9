#include "shoplens/data/batch.h"

#include <torch/torch.h>

#include <algorithm>

namespace shoplens {
namespace {

at::Tensor rows(const at::Tensor& t, std::int64_t start, std::int64_t count) {
  return t.defined() ? t.narrow(0, start, count) : t;
}

}  // namespace

Batch Batch::to(const c10::Device& device, bool non_blocking) const {
  Batch out = *this;
  for (at::Tensor* t : {&out.images, &out.input_ids, &out.attention_mask, &out.lengths, &out.meta_categorical,
                        &out.meta_numeric, &out.labels, &out.targets})
    if (t->defined()) *t = t->to(device, non_blocking);
  return out;
}

Batch Batch::slice(std::int64_t start, std::int64_t count) const {
  Batch piece;
  piece.index = index;
  piece.mixed = mixed;
  piece.images = rows(images, start, count);
  piece.labels = rows(labels, start, count);
  piece.targets = rows(targets, start, count);
  piece.meta_categorical = rows(meta_categorical, start, count);
  piece.meta_numeric = rows(meta_numeric, start, count);
  piece.lengths = rows(lengths, start, count);
  if (input_ids.defined()) {
    std::int64_t width = input_ids.size(1);
    if (piece.lengths.defined() && count > 0)
      width = std::max<std::int64_t>(1, piece.lengths.max().item<std::int64_t>());
    piece.input_ids = input_ids.narrow(0, start, count).narrow(1, 0, width);
    piece.attention_mask = attention_mask.narrow(0, start, count).narrow(1, 0, width);
  }
  const auto rows_of = [&](const std::vector<std::uint64_t>& all, std::vector<std::uint64_t>& part) {
    const auto n = static_cast<std::int64_t>(all.size());
    part.assign(all.begin() + std::min(start, n), all.begin() + std::min(start + count, n));
  };
  rows_of(sample_ids, piece.sample_ids);
  rows_of(sample_seeds, piece.sample_seeds);
  return piece;
}

std::int64_t Batch::padded_tokens() const { return input_ids.defined() ? input_ids.numel() : 0; }

std::int64_t Batch::real_tokens() const {
  if (!input_ids.defined()) return 0;
  return lengths.defined() ? lengths.sum().item<std::int64_t>() : attention_mask.sum().item<std::int64_t>();
}

std::vector<Batch> cut_micro_batches(const std::vector<Batch>& batches, int max_samples, std::int64_t max_tokens) {
  if (max_samples <= 0 && max_tokens <= 0) return batches;
  std::vector<Batch> out;
  for (const auto& b : batches) {
    const std::int64_t n = b.size();
    const bool by_tokens = max_tokens > 0 && b.is_text() && b.lengths.defined();
    const at::Tensor lengths = by_tokens ? b.lengths.to(torch::kCPU).contiguous() : at::Tensor();
    const std::int64_t* len = by_tokens ? lengths.data_ptr<std::int64_t>() : nullptr;
    std::int64_t start = 0;
    while (start < n) {
      std::int64_t count = max_samples > 0 ? std::min<std::int64_t>(max_samples, n - start) : n - start;
      if (by_tokens) {
        // Grow the piece while (rows x its longest row) stays within the budget; one row always fits.
        std::int64_t longest = 0, fit = 0;
        for (std::int64_t k = 0; k < count; ++k) {
          const std::int64_t candidate = std::max(longest, std::max<std::int64_t>(1, len[start + k]));
          if (k > 0 && candidate * (k + 1) > max_tokens) break;
          longest = candidate;
          fit = k + 1;
        }
        count = fit;
      }
      out.push_back(b.slice(start, count));
      start += count;
    }
  }
  return out;
}

}  // namespace shoplens
