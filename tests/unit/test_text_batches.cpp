// The text side of the loader: token batches, length bucketing, token-budget cuts and strided
// evaluation shares, over in-memory sources (no files).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include <torch/torch.h>

#include "shoplens/core/random.h"
#include "shoplens/data/batch.h"
#include "shoplens/data/loader.h"
#include "shoplens/data/text_batches.h"
#include "shoplens/data/text_shards.h"

namespace shoplens {
namespace {

// Example i has a length drawn from [min_len, max_len], tokens 2 + (i + k) % 50, label i % 5 == 0,
// one categorical field (missing for every 7th) and one numeric field (missing for every 11th).
std::shared_ptr<InMemoryTextSource> make_source(int n, int min_len = 3, int max_len = 60, std::uint64_t seed = 5) {
  auto source = std::make_shared<InMemoryTextSource>(64, std::vector<int>{4}, 1);
  Rng rng(seed);
  for (int i = 0; i < n; ++i) {
    TextExample e;
    e.sample_id = 1000 + i;
    const int len = min_len + rng.uniform_int(max_len - min_len + 1);
    for (int k = 0; k < len; ++k) e.tokens.push_back(2 + (i + k) % 50);
    e.label = i % 5 == 0;
    e.split = Split::kTrain;
    e.categorical = {static_cast<std::uint16_t>(i % 7 == 0 ? 0 : 1 + i % 4)};
    e.numeric = {i % 11 == 0 ? std::nanf("") : static_cast<float>(10 * i)};
    source->add(std::move(e));
  }
  return source;
}

TextBatchOptions batch_options(int max_length = 64, bool bucket = true) {
  TextBatchOptions o;
  o.max_length = max_length;
  o.bucket_by_length = bucket;
  o.bucket_window = 4;
  o.seed = 9;
  return o;
}

LoaderOptions loader_options(int batch, std::int64_t global_batch = 0, int rank = 0, int world = 1) {
  LoaderOptions o;
  o.batch_size = batch;
  o.workers = 2;
  o.prefetch_batches = 2;
  o.seed = 9;
  o.global_batch = global_batch;
  o.rank = rank;
  o.world_size = world;
  return o;
}

TEST(TextBatches, PadsToTheLongestRowLongestFirstWithMaskLengthsAndMetadata) {
  auto source = make_source(10);
  TextBatchBuilder builder(source, batch_options(64));
  const Batch b = builder.build({0, 1, 2, 3, 7, 9}, {0, 1, 2, 3, 4, 5}, 0, 0);
  ASSERT_EQ(b.size(), 6);
  std::int64_t longest = 0;
  for (std::uint32_t i : {0u, 1u, 2u, 3u, 7u, 9u}) longest = std::max<std::int64_t>(longest, source->length(i));
  EXPECT_EQ(b.input_ids.size(1), std::min<std::int64_t>(64, (longest + 7) / 8 * 8));
  const auto lengths = b.lengths;
  for (std::int64_t r = 0; r + 1 < b.size(); ++r)
    EXPECT_GE(lengths[r].item<std::int64_t>(), lengths[r + 1].item<std::int64_t>());
  EXPECT_TRUE(torch::equal(b.attention_mask.sum(1), lengths));
  for (std::int64_t r = 0; r < b.size(); ++r) {
    const std::size_t index = b.sample_ids[r] - 1000;
    const std::int64_t len = lengths[r].item<std::int64_t>();
    EXPECT_EQ(len, source->length(index));
    EXPECT_EQ(b.input_ids[r][0].item<std::int64_t>(), 2 + static_cast<std::int64_t>(index) % 50);
    if (len < b.input_ids.size(1)) {
      EXPECT_EQ(b.input_ids[r][len].item<std::int64_t>(), 0) << "pad id after the row";
    }
    EXPECT_EQ(b.labels[r].item<std::int64_t>(), index % 5 == 0 ? 1 : 0);
    EXPECT_EQ(b.meta_categorical[r][0].item<std::int64_t>(),
              index % 7 == 0 ? 0 : 1 + static_cast<std::int64_t>(index) % 4);
    const float numeric = b.meta_numeric[r][0].item<float>();
    if (index % 11 == 0)
      EXPECT_TRUE(std::isnan(numeric)) << "missing stays missing";
    else
      EXPECT_FLOAT_EQ(numeric, std::asinh(10.0f * index));
  }
}

TEST(TextBatches, TruncatesToMaxLength) {
  auto source = make_source(4, 100, 120);
  TextBatchBuilder builder(source, batch_options(32));
  const Batch b = builder.build({0, 1, 2, 3}, {0, 1, 2, 3}, 0, 0);
  EXPECT_EQ(b.input_ids.size(1), 32);
  EXPECT_TRUE(b.attention_mask.all().item<bool>());
  EXPECT_EQ(b.lengths.min().item<std::int64_t>(), 32);
}

TEST(TextBatches, BucketingPermutesWholeUnitsKeepsTheTailAndIsAFunctionOfTheEpoch) {
  auto source = make_source(203);
  TextBatchBuilder builder(source, batch_options());
  std::vector<std::uint32_t> order = epoch_order(source->size(), 9, 0, true);
  const auto original = order;
  const std::int64_t unit = 8;
  builder.arrange(order, 0, unit);
  auto sorted = order, sorted_original = original;
  std::sort(sorted.begin(), sorted.end());
  std::sort(sorted_original.begin(), sorted_original.end());
  EXPECT_EQ(sorted, sorted_original) << "a permutation: every example once";
  const std::size_t whole = original.size() / unit * unit;
  EXPECT_TRUE(std::equal(order.begin() + whole, order.end(), original.begin() + whole)) << "the tail stays";
  // Each window of 4 units holds the same examples as before, rearranged.
  for (std::size_t w = 0; w < whole; w += 4 * unit) {
    const std::size_t end = std::min(whole, w + 4 * unit);
    std::multiset<std::uint32_t> a(order.begin() + w, order.begin() + end),
        b(original.begin() + w, original.begin() + end);
    EXPECT_EQ(a, b);
  }
  auto again = original;
  builder.arrange(again, 0, unit);
  EXPECT_EQ(again, order);
  auto other_epoch = original;
  builder.arrange(other_epoch, 1, unit);
  EXPECT_NE(other_epoch, order);
}

// Padding of the steps an order gives: sum over units of (unit x longest) - real tokens.
double padding_fraction(const TextSource& source, const std::vector<std::uint32_t>& order, std::size_t unit) {
  double padded = 0, real = 0;
  for (std::size_t begin = 0; begin + unit <= order.size(); begin += unit) {
    std::uint32_t longest = 0;
    for (std::size_t p = begin; p < begin + unit; ++p) {
      longest = std::max(longest, source.length(order[p]));
      real += source.length(order[p]);
    }
    padded += static_cast<double>(longest) * unit;
  }
  return 1.0 - real / padded;
}

TEST(TextBatches, BucketingCutsPadding) {
  auto source = make_source(512, 4, 400);
  std::vector<std::uint32_t> order = epoch_order(source->size(), 9, 0, true);
  const double before = padding_fraction(*source, order, 16);
  TextBatchOptions options = batch_options(512);
  options.bucket_window = 16;  // 256 examples sorted together
  TextBatchBuilder(source, options).arrange(order, 0, 16);
  const double after = padding_fraction(*source, order, 16);
  EXPECT_GT(before, 0.35);
  EXPECT_LT(after, before / 3) << "before " << before << " after " << after;
}

TEST(TextBatches, TokenBudgetCutsEveryPieceWithinTheBudgetAndKeepsEveryRow) {
  auto source = make_source(40, 2, 60);
  TextBatchBuilder builder(source, batch_options(64));
  std::vector<std::uint32_t> indices(40);
  std::vector<std::uint64_t> positions(40);
  for (std::uint32_t i = 0; i < 40; ++i) indices[i] = positions[i] = i;
  const Batch whole = builder.build(indices, positions, 0, 0);
  const std::int64_t budget = 256;
  const auto pieces = cut_micro_batches({whole}, 0, budget);
  EXPECT_GT(pieces.size(), 1u);
  std::vector<std::uint64_t> ids;
  std::int64_t real = 0;
  for (const auto& p : pieces) {
    const std::int64_t longest = p.lengths.max().item<std::int64_t>();
    EXPECT_EQ(p.input_ids.size(1), longest) << "a piece keeps only the columns its longest row needs";
    if (p.size() > 1) {
      EXPECT_LE(p.size() * longest, budget);
    }
    EXPECT_TRUE(torch::equal(p.attention_mask.sum(1), p.lengths));
    ids.insert(ids.end(), p.sample_ids.begin(), p.sample_ids.end());
    real += p.real_tokens();
  }
  EXPECT_EQ(ids, whole.sample_ids);
  EXPECT_EQ(real, whole.real_tokens());
  // A sample cap applies on top of the budget.
  for (const auto& p : cut_micro_batches({whole}, 3, budget)) EXPECT_LE(p.size(), 3);
}

TEST(TextBatches, TwoRanksReadTheSingleRankGlobalBatchesBetweenThem) {
  auto source = make_source(100);
  auto read = [&](int rank, int world, int micro) {
    Loader loader(source, std::make_shared<TextBatchBuilder>(source, batch_options()),
                  loader_options(micro, 16, rank, world));
    loader.start_epoch(3);
    std::vector<std::vector<std::uint64_t>> steps;
    const int per_step = 16 / world / micro;
    std::vector<std::uint64_t> step;
    int in_step = 0;
    while (auto b = loader.next()) {
      step.insert(step.end(), b->sample_ids.begin(), b->sample_ids.end());
      if (++in_step == per_step) {
        std::sort(step.begin(), step.end());
        steps.push_back(step);
        step.clear();
        in_step = 0;
      }
    }
    return std::make_pair(steps, loader.unread_sample_ids());
  };
  const auto [single, unread] = read(0, 1, 16);
  const auto [rank0, unread0] = read(0, 2, 4);
  const auto [rank1, unread1] = read(1, 2, 4);
  ASSERT_EQ(single.size(), 6u);
  ASSERT_EQ(rank0.size(), single.size());
  EXPECT_EQ(unread.size(), 4u);
  for (std::size_t s = 0; s < single.size(); ++s) {
    std::vector<std::uint64_t> both = rank0[s];
    both.insert(both.end(), rank1[s].begin(), rank1[s].end());
    std::sort(both.begin(), both.end());
    EXPECT_EQ(both, single[s]) << "step " << s;
  }
  EXPECT_EQ(unread0, unread);
}

TEST(TextBatches, StridedSharesCoverTheSplitOnce) {
  auto source = make_source(23);
  std::multiset<std::uint64_t> seen;
  for (int rank = 0; rank < 3; ++rank) {
    LoaderOptions o = loader_options(4);
    o.shuffle = false;
    o.drop_last = false;
    o.train = false;
    o.strided_share = true;
    o.rank = rank;
    o.world_size = 3;
    Loader loader(source, std::make_shared<TextBatchBuilder>(source, batch_options()), o);
    EXPECT_EQ(loader.dataset_size(), rank < 2 ? 8u : 7u);
    loader.start_epoch(0);
    while (auto b = loader.next())
      for (auto id : b->sample_ids) {
        EXPECT_EQ((id - 1000) % 3, static_cast<std::uint64_t>(rank));
        seen.insert(id);
      }
  }
  EXPECT_EQ(seen.size(), 23u);
  EXPECT_EQ(std::set<std::uint64_t>(seen.begin(), seen.end()).size(), 23u);
}

TEST(TextBatches, LoaderStatsReportThePaddingFraction) {
  auto source = make_source(64, 4, 60);
  Loader loader(source, std::make_shared<TextBatchBuilder>(source, batch_options(64, false)), loader_options(8, 8));
  loader.start_epoch(0);
  std::int64_t padded = 0, real = 0;
  while (auto b = loader.next()) {
    padded += b->padded_tokens();
    real += b->real_tokens();
  }
  EXPECT_EQ(loader.stats().padded_tokens, static_cast<std::uint64_t>(padded));
  EXPECT_EQ(loader.stats().real_tokens, static_cast<std::uint64_t>(real));
  EXPECT_NEAR(loader.stats().padding_fraction(), 1.0 - static_cast<double>(real) / padded, 1e-12);
  EXPECT_GT(loader.stats().padding_fraction(), 0.1);
}

}  // namespace
}  // namespace shoplens
