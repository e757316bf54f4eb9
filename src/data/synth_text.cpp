// The synthetic text corpus. Every example comes from its own random stream (seed, index), and
// the split is decided from created_at alone, so output bytes depend on the seed only.
//
// The signal (docs/TEXT.md, "How hard it is"): the text is written for a latent label y; the
// stored label is y flipped with probability label_noise. Quality markers (96 mid-frequency
// tokens, half leaning positive) and 3-token patterns of common words (only their order carries
// the label) lean towards y by a per-example clarity; a negation token before a marker flips its
// meaning, which a bag of words reads backwards. model_family, source_surface and response_length
// shift the prior. No single token decides: each marker is rare and appears in both classes.
#include "shoplens/data/synth_text.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <limits>
#include <numeric>

#include "shoplens/core/errors.h"
#include "shoplens/core/random.h"

namespace shoplens {

namespace {

constexpr int kPadId = 0, kClsId = 1, kSepId = 2;
constexpr int kFirstWord = 8;  // ids below are special tokens
constexpr int kMinVocab = 1024;
constexpr std::int64_t kStartTime = 1735689600;  // 2025-01-01T00:00:00Z
constexpr std::int64_t kSpanSeconds = 180LL * 86400;
constexpr std::uint32_t kSourceShardRows = 1000;  // rows per source (Parquet) file

// Word ranks (0 = most frequent) with a role; the rest is Zipf background.
constexpr int kNegationRank = 15;
constexpr int kPatternRankLo = 20, kPatternRankHi = 200;
constexpr int kLanguageRank = 200, kLanguageTokens = 40;
constexpr int kMarkerRank = 500, kMarkersPerSide = 48;
constexpr int kPatterns = 24;  // per polarity

const std::vector<std::string> kLanguages = {"en", "es", "de", "fr", "ja", "zh", "pt"};
const std::vector<double> kLanguageWeights = {0.55, 0.10, 0.08, 0.08, 0.07, 0.07, 0.05};
const std::vector<std::string> kSurfaces = {"chat", "api", "playground", "eval_harness", "batch"};
const std::vector<double> kSurfacePos = {0.40, 0.28, 0.10, 0.16, 0.06};
const std::vector<double> kSurfaceNeg = {0.46, 0.31, 0.10, 0.08, 0.05};
const std::vector<std::string> kFamilies = {"family-a", "family-b", "family-c", "family-d", "family-e", "family-f"};
const std::vector<double> kFamilyPos = {0.10, 0.14, 0.18, 0.24, 0.19, 0.15};
const std::vector<double> kFamilyNeg = {0.24, 0.21, 0.18, 0.15, 0.12, 0.10};
// Newer families appear part-way through the time range (drift a time split should see).
const std::vector<double> kFamilyFrom = {0.0, 0.0, 0.0, 0.15, 0.40, 0.65};

// The parts of the generator that depend on the seed and vocabulary, built once.
struct Lexicon {
  std::vector<int> rank_to_id;                // a seeded permutation of word ids
  std::vector<double> cumulative;             // Zipf CDF over ranks
  std::vector<std::vector<int>> patterns[2];  // [polarity][k] -> 3 token ids

  Lexicon(int vocab_size, std::uint64_t seed) {
    const int words = vocab_size - kFirstWord;
    rank_to_id.resize(words);
    std::iota(rank_to_id.begin(), rank_to_id.end(), kFirstWord);
    Rng rng(mix_seed(seed, 0x1e71c0));
    // Keep the structured ranks' ids apart from frequency order without moving their ranks.
    rng.shuffle(rank_to_id);
    cumulative.resize(words);
    double total = 0;
    for (int r = 0; r < words; ++r) cumulative[r] = total += 1.0 / std::pow(r + 2.7, 1.05);
    for (int polarity = 0; polarity < 2; ++polarity)
      for (int k = 0; k < kPatterns; ++k) {
        std::vector<int> p(3);
        for (auto& t : p) t = word(kPatternRankLo + rng.uniform_int(kPatternRankHi - kPatternRankLo));
        patterns[polarity].push_back(p);
      }
  }
  int word(int rank) const { return rank_to_id[rank]; }
  int background(Rng& rng) const {
    const double u = rng.uniform() * cumulative.back();
    const auto r = std::upper_bound(cumulative.begin(), cumulative.end(), u) - cumulative.begin();
    return word(static_cast<int>(std::min<std::ptrdiff_t>(r, cumulative.size() - 1)));
  }
  int marker(int polarity, Rng& rng) const {
    return word(kMarkerRank + 2 * rng.uniform_int(kMarkersPerSide) + polarity);
  }
  int language_token(int language, Rng& rng) const {
    return word(kLanguageRank + language * kLanguageTokens + rng.uniform_int(kLanguageTokens));
  }
};

int lognormal_length(Rng& rng, double median, double sigma, int lo) {
  const double v = median * std::exp(sigma * rng.normal());
  return std::max(lo, static_cast<int>(std::min(v, 1e6)));
}

std::int64_t created_at_of(const SynthTextOptions& o, std::uint64_t i) {
  Rng rng(mix_seed(o.seed, i, 2));
  const double t = (static_cast<double>(i) + 0.5) / o.num_examples * kSpanSeconds + rng.normal() * 6 * 3600;
  return kStartTime + static_cast<std::int64_t>(std::llround(std::clamp(t, 0.0, double(kSpanSeconds))));
}

struct Generated {
  TextExample example;
  bool truncated = false;
  bool flipped = false;
};

// What one example is made of, drawn in this order from the example's stream.
struct ExampleDraws {
  int written_for = 0;  // the label the text is written for (the observed one, unless flipped)
  int language = 0, surface = 0, family = 0;
  int prompt_len = 0, response_len = 0;
  double lean = 0;  // per-example clarity: some texts are plain, some say almost nothing
};

ExampleDraws draw_example(Rng& rng, int written_for, double when) {
  ExampleDraws d;
  const int y = d.written_for = written_for;
  d.language = static_cast<int>(rng.pick(kLanguageWeights));
  d.surface = static_cast<int>(rng.pick(y ? kSurfacePos : kSurfaceNeg));
  std::vector<double> family_w = y ? kFamilyPos : kFamilyNeg;
  for (std::size_t k = 0; k < family_w.size(); ++k)
    if (when < kFamilyFrom[k]) family_w[k] = 0;
  d.family = static_cast<int>(rng.pick(family_w));
  d.prompt_len = lognormal_length(rng, 40, 0.9, 4);
  d.response_len = lognormal_length(rng, y ? 90 : 72, 0.85, 10);
  d.lean = 0.28 * rng.uniform(0.2, 1.7);
  return d;
}

// [CLS] prompt [SEP] response, cut at `keep` tokens; the response carries markers, negated
// markers and word patterns whose polarity leans towards the label the text is written for.
void write_tokens(std::vector<std::int32_t>& tokens, Rng& rng, const Lexicon& lex, const ExampleDraws& d,
                  std::size_t keep) {
  const double p_marker = 0.06, p_pattern = 0.02, p_negate = 0.25, p_language = 0.06;
  auto polarity = [&](Rng& r) { return r.bernoulli(d.written_for ? 0.5 + d.lean : 0.5 - d.lean) ? 1 : 0; };
  auto plain_word = [&] {
    return rng.bernoulli(p_language) ? lex.language_token(d.language, rng) : lex.background(rng);
  };
  tokens.reserve(keep + 4);
  tokens.push_back(kClsId);
  for (int k = 0; k < d.prompt_len && tokens.size() < keep; ++k) tokens.push_back(plain_word());
  if (tokens.size() < keep) tokens.push_back(kSepId);
  while (tokens.size() < keep) {
    const double u = rng.uniform();
    if (u < p_marker) {
      const int meaning = polarity(rng);
      if (rng.bernoulli(p_negate)) {
        tokens.push_back(lex.word(kNegationRank));
        tokens.push_back(lex.marker(1 - meaning, rng));
      } else {
        tokens.push_back(lex.marker(meaning, rng));
      }
    } else if (u < p_marker + p_pattern) {
      const auto& p = lex.patterns[polarity(rng)][rng.uniform_int(kPatterns)];
      tokens.insert(tokens.end(), p.begin(), p.end());
    } else {
      tokens.push_back(plain_word());
    }
  }
  tokens.resize(keep);
}

void set_metadata(TextExample& ex, const ExampleDraws& d, const SynthTextOptions& o, std::uint64_t i) {
  ex.categorical = {static_cast<std::uint16_t>(d.language + 1), static_cast<std::uint16_t>(d.surface + 1),
                    static_cast<std::uint16_t>(d.family + 1)};
  ex.numeric = {static_cast<float>(d.prompt_len), static_cast<float>(d.response_len)};
  // Missingness from its own stream, so changing the rate does not change the text.
  Rng miss(mix_seed(o.seed, i, 4));
  for (auto& c : ex.categorical)
    if (miss.bernoulli(o.missing_fraction)) c = 0;
  for (auto& v : ex.numeric)
    if (miss.bernoulli(o.missing_fraction)) v = std::numeric_limits<float>::quiet_NaN();
}

Generated make_example(const SynthTextOptions& o, const Lexicon& lex, std::uint64_t i, int observed_label,
                       std::int64_t created_at, Split split) {
  Rng rng(mix_seed(o.seed, i, 3));
  Generated g;
  g.flipped = rng.bernoulli(o.label_noise);
  const double when = double(created_at - kStartTime) / kSpanSeconds;
  const ExampleDraws d = draw_example(rng, g.flipped ? 1 - observed_label : observed_label, when);
  const std::size_t full = 2 + std::size_t(d.prompt_len) + std::size_t(d.response_len);
  const std::size_t keep = std::min<std::size_t>(full, o.max_length);
  g.truncated = full > keep;
  write_tokens(g.example.tokens, rng, lex, d, keep);
  auto& ex = g.example;
  ex.sample_id = i;
  ex.label = observed_label;
  ex.split = split;
  ex.created_at = created_at;
  ex.shard_id = static_cast<std::uint32_t>(i / kSourceShardRows);
  set_metadata(ex, d, o, i);
  return g;
}

std::uint32_t percentile(const std::vector<std::uint32_t>& sorted, double q) {
  if (sorted.empty()) return 0;
  const auto k = static_cast<std::size_t>(std::llround(q * double(sorted.size() - 1)));
  return sorted[k];
}

}  // namespace

void validate_synth_text_options(const SynthTextOptions& o) {
  if (o.num_examples < 1)
    throw UsageError("--num-examples must be at least 1 (got " + std::to_string(o.num_examples) + ")");
  if (o.max_length < 16 || o.max_length > 65536)
    throw UsageError("--max-length must be in [16, 65536] (got " + std::to_string(o.max_length) + ")");
  if (o.vocab_size < kMinVocab || o.vocab_size > 16777216)
    throw UsageError("--vocab-size must be in [" + std::to_string(kMinVocab) + ", 16777216] (got " +
                     std::to_string(o.vocab_size) + ")");
  if (o.records_per_shard < 1)
    throw UsageError("--records-per-shard must be at least 1 (got " + std::to_string(o.records_per_shard) + ")");
  if (o.val_fraction < 0 || o.test_fraction < 0 || o.val_fraction + o.test_fraction >= 1)
    throw UsageError("--val-fraction + --test-fraction must be below 1");
  if (o.positive_fraction <= 0 || o.positive_fraction >= 1) throw UsageError("--positive-fraction must be in (0, 1)");
  if (o.missing_fraction < 0 || o.missing_fraction > 1)
    throw UsageError("--missing-metadata-fraction must be in [0, 1]");
  if (o.label_noise < 0 || o.label_noise > 0.5) throw UsageError("--label-noise must be in [0, 0.5]");
}

std::vector<CategoricalField> synth_text_categorical_fields() {
  return {{"language", kLanguages}, {"source_surface", kSurfaces}, {"model_family", kFamilies}};
}

std::vector<std::string> synth_text_numeric_fields() { return {"prompt_length", "response_length"}; }

namespace {

Split split_at(const TextSplitRule& rule, std::int64_t t) {
  return t >= rule.test_from ? Split::kTest : t >= rule.val_from ? Split::kVal : Split::kTrain;
}

// Split by time: the latest test_fraction is test, the val_fraction before it val.
TextSplitRule time_split_rule(const SynthTextOptions& o, const std::vector<std::int64_t>& created) {
  const auto n = static_cast<std::uint64_t>(created.size());
  std::vector<std::int64_t> sorted = created;
  std::sort(sorted.begin(), sorted.end());
  const auto n_test = static_cast<std::uint64_t>(std::llround(o.test_fraction * double(n)));
  const auto n_val = static_cast<std::uint64_t>(std::llround(o.val_fraction * double(n)));
  const std::uint64_t n_train = n - std::min(n, n_val + n_test);
  TextSplitRule rule;
  rule.test_from = n_test > 0 ? sorted[n - n_test] : sorted.back() + 1;
  rule.val_from = n_val > 0 ? sorted[n_train] : rule.test_from;
  rule.description = "by created_at: train before val_from, val in [val_from, test_from), test from test_from on";
  return rule;
}

// Observed labels: exactly round(positive_fraction * count) positives in each split, at seeded
// positions (the split is by time, which the label does not depend on).
std::vector<std::uint8_t> split_balanced_labels(const SynthTextOptions& o, const std::vector<std::int64_t>& created,
                                                const TextSplitRule& rule) {
  std::vector<std::uint8_t> labels(created.size(), 0);
  for (Split split : {Split::kTrain, Split::kVal, Split::kTest}) {
    std::vector<std::uint32_t> members;
    for (std::size_t i = 0; i < created.size(); ++i)
      if (split_at(rule, created[i]) == split) members.push_back(static_cast<std::uint32_t>(i));
    Rng label_rng(mix_seed(o.seed, 0x1abe1, static_cast<std::uint64_t>(split)));
    label_rng.shuffle(members);
    const auto positives = static_cast<std::size_t>(std::llround(o.positive_fraction * double(members.size())));
    for (std::size_t k = 0; k < positives; ++k) labels[members[k]] = 1;
  }
  return labels;
}

// Running totals of the generated examples.
struct TextTally {
  std::vector<std::uint64_t> missing;  // categorical fields, then numeric ones
  std::vector<std::uint32_t> lengths;

  void add(const Generated& g, int split, SynthTextSummary& s) {
    s.per_split[split]++;
    s.positives_per_split[split] += g.example.label;
    s.truncated += g.truncated;
    s.label_flips += g.flipped;
    s.tokens += g.example.tokens.size();
    lengths.push_back(static_cast<std::uint32_t>(g.example.tokens.size()));
    const std::size_t n_categorical = g.example.categorical.size();
    for (std::size_t k = 0; k < n_categorical; ++k) missing[k] += g.example.categorical[k] == 0;
    for (std::size_t k = 0; k < g.example.numeric.size(); ++k)
      missing[n_categorical + k] += std::isnan(g.example.numeric[k]);
  }
};

void summarize(const SynthTextOptions& o, const TextDatasetInfo& info, TextTally& tally, SynthTextSummary& s) {
  const auto n = static_cast<std::uint64_t>(o.num_examples);
  s.examples = n;
  s.shards = info.shards;
  for (const auto& sh : info.shards)
    s.bytes_written += sh.payload_size * token_dtype_size(token_dtype_for(o.vocab_size)) + 48 + sh.count * 88;
  std::size_t k = 0;
  for (const auto& f : info.categorical)
    s.missing_fraction.emplace_back(f.name, double(tally.missing[k++]) / double(n));
  for (const auto& f : info.numeric) s.missing_fraction.emplace_back(f, double(tally.missing[k++]) / double(n));
  auto& lengths = tally.lengths;
  std::sort(lengths.begin(), lengths.end());
  s.length_min = lengths.front();
  s.length_p50 = percentile(lengths, 0.5);
  s.length_p90 = percentile(lengths, 0.9);
  s.length_p99 = percentile(lengths, 0.99);
  s.length_max = lengths.back();
}

}  // namespace

SynthTextSummary generate_synthetic_text(const SynthTextOptions& o) {
  validate_synth_text_options(o);
  const auto start = std::chrono::steady_clock::now();
  std::filesystem::create_directories(o.out_dir);
  const auto n = static_cast<std::uint64_t>(o.num_examples);
  std::vector<std::int64_t> created(n);
  for (std::uint64_t i = 0; i < n; ++i) created[i] = created_at_of(o, i);
  const TextSplitRule rule = time_split_rule(o, created);
  const std::vector<std::uint8_t> labels = split_balanced_labels(o, created, rule);

  TextDatasetInfo info;
  info.vocab_size = o.vocab_size;
  info.max_length = o.max_length;
  info.pad_id = kPadId;
  info.cls_id = kClsId;
  info.categorical = synth_text_categorical_fields();
  info.numeric = synth_text_numeric_fields();
  info.split_rule = rule;

  const Lexicon lex(o.vocab_size, o.seed);
  SynthTextSummary s;
  s.split_rule = rule;
  TextTally tally;
  tally.missing.assign(info.categorical.size() + info.numeric.size(), 0);
  tally.lengths.reserve(n);
  for (Split split : {Split::kTrain, Split::kVal, Split::kTest}) {
    std::unique_ptr<TextShardWriter> writer;
    int shard_no = 0;
    for (std::uint64_t i = 0; i < n; ++i) {
      if (split_at(rule, created[i]) != split) continue;
      if (!writer) {
        char name[32];
        std::snprintf(name, sizeof name, "%s-%05d", split_name(split), shard_no++);
        writer = std::make_unique<TextShardWriter>(o.out_dir, name, split, info.layout());
      }
      const Generated g = make_example(o, lex, i, labels[i], created[i], split);
      writer->add(g.example);
      tally.add(g, static_cast<int>(split), s);
      if (writer->count() >= static_cast<std::size_t>(o.records_per_shard)) {
        info.shards.push_back(writer->finish());
        writer.reset();
      }
    }
    if (writer) info.shards.push_back(writer->finish());
  }
  // The dataset file is written last: a folder without it was interrupted.
  write_text_dataset_info(o.out_dir, info);
  summarize(o, info, tally, s);
  s.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return s;
}

}  // namespace shoplens
