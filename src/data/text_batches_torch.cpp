#include "shoplens/data/text_batches.h"

#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "shoplens/core/errors.h"
#include "shoplens/core/random.h"
#include "shoplens/data/text_shards.h"

namespace shoplens {

TextBatchBuilder::TextBatchBuilder(std::shared_ptr<const TextSource> source, TextBatchOptions options)
    : source_(std::move(source)), options_(options) {
  if (!source_) throw Error("TextBatchBuilder: no source");
  if (options_.max_length < 1)
    throw ConfigError("text.max_length must be >= 1, got " + std::to_string(options_.max_length));
  if (options_.pad_multiple < 1) options_.pad_multiple = 1;
}

std::uint32_t TextBatchBuilder::clipped_length(std::uint32_t index) const {
  return std::min<std::uint32_t>(source_->length(index), static_cast<std::uint32_t>(options_.max_length));
}

Batch TextBatchBuilder::build(const std::vector<std::uint32_t>& indices, const std::vector<std::uint64_t>& positions,
                              std::int64_t epoch, std::int64_t batch_index) {
  const auto n = static_cast<std::int64_t>(indices.size());
  std::vector<std::int64_t> rows(static_cast<std::size_t>(n));
  std::iota(rows.begin(), rows.end(), 0);
  std::vector<std::uint32_t> lengths(static_cast<std::size_t>(n));
  for (std::int64_t k = 0; k < n; ++k) lengths[k] = clipped_length(indices[k]);
  std::stable_sort(rows.begin(), rows.end(), [&](std::int64_t a, std::int64_t b) { return lengths[a] > lengths[b]; });
  std::int64_t longest = 1;
  for (auto l : lengths) longest = std::max<std::int64_t>(longest, l);
  const std::int64_t m = options_.pad_multiple;
  const std::int64_t width = std::min<std::int64_t>(options_.max_length, (longest + m - 1) / m * m);

  Batch batch;
  batch.index = batch_index;
  batch.input_ids = torch::full({n, width}, static_cast<std::int64_t>(options_.pad_id), torch::kLong);
  batch.attention_mask = torch::zeros({n, width}, torch::kBool);
  batch.lengths = torch::empty({n}, torch::kLong);
  batch.labels = torch::empty({n}, torch::kLong);
  batch.sample_ids.resize(static_cast<std::size_t>(n));
  const int c = source_->num_categorical(), f = source_->num_numeric();
  if (c > 0) batch.meta_categorical = torch::empty({n, c}, torch::kLong);
  if (f > 0) batch.meta_numeric = torch::empty({n, f}, torch::kFloat);
  auto* ids = batch.input_ids.data_ptr<std::int64_t>();
  auto* mask = batch.attention_mask.data_ptr<bool>();
  auto* lens = batch.lengths.data_ptr<std::int64_t>();
  auto* labels = batch.labels.data_ptr<std::int64_t>();
  float* numeric_out = f > 0 ? batch.meta_numeric.data_ptr<float>() : nullptr;
  std::int64_t* categorical_out = c > 0 ? batch.meta_categorical.data_ptr<std::int64_t>() : nullptr;
  std::vector<float> numeric(static_cast<std::size_t>(std::max(f, 1)));
  for (std::int64_t r = 0; r < n; ++r) {
    const std::uint32_t index = indices[rows[r]];
    const std::size_t copied = source_->copy_tokens(index, ids + r * width, static_cast<std::size_t>(width));
    std::fill(mask + r * width, mask + r * width + copied, true);
    lens[r] = static_cast<std::int64_t>(copied);
    labels[r] = source_->label(index);
    batch.sample_ids[r] = source_->sample_id(index);
    source_->metadata(index, categorical_out ? categorical_out + r * c : nullptr, numeric.data());
    // asinh: counts such as prompt_length span orders of magnitude; NaN (missing) passes through.
    for (int j = 0; j < f; ++j) numeric_out[r * f + j] = std::asinh(numeric[j]);
  }
  return batch;
}

void TextBatchBuilder::arrange(std::vector<std::uint32_t>& order, std::int64_t epoch, std::int64_t unit) const {
  if (!options_.bucket_by_length || unit <= 0) return;
  const std::size_t u = static_cast<std::size_t>(unit);
  const std::size_t whole = order.size() / u * u;
  const std::size_t window = u * static_cast<std::size_t>(std::max(1, options_.bucket_window));
  std::vector<std::uint32_t> sorted;
  std::vector<std::size_t> groups;
  for (std::size_t begin = 0, w = 0; begin < whole; begin += window, ++w) {
    const std::size_t end = std::min(whole, begin + window);
    std::vector<std::pair<std::uint32_t, std::size_t>> keyed;  // (length, position)
    keyed.reserve(end - begin);
    for (std::size_t p = begin; p < end; ++p) keyed.emplace_back(clipped_length(order[p]), p);
    std::sort(keyed.begin(), keyed.end(), [](const auto& a, const auto& b) {
      return a.first != b.first ? a.first > b.first : a.second < b.second;
    });
    sorted.clear();
    for (const auto& k : keyed) sorted.push_back(order[k.second]);
    groups.resize((end - begin) / u);
    std::iota(groups.begin(), groups.end(), std::size_t{0});
    // Long and short steps alternate at random instead of the epoch running longest first.
    Rng(mix_seed(options_.seed, 0xB0C4E7ULL + static_cast<std::uint64_t>(epoch), w)).shuffle(groups);
    for (std::size_t g = 0; g < groups.size(); ++g)
      std::copy(sorted.begin() + groups[g] * u, sorted.begin() + (groups[g] + 1) * u, order.begin() + begin + g * u);
  }
}

}  // namespace shoplens
