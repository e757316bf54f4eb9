#include "shoplens/batch/batch_search.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>

#include <fmt/format.h>

#include "shoplens/core/errors.h"
#include "shoplens/core/strings.h"

namespace shoplens {

int MemoryFit::largest_within(double bytes, int max_batch) const {
  if (points < 2) return 0;
  if (bytes_per_sample <= 0) return bytes >= static_bytes ? max_batch : 0;
  const double b = std::floor((bytes - static_bytes) / bytes_per_sample + 1e-9);  // 299.999.. is 300
  if (b < 0) return 0;
  return static_cast<int>(std::min<double>(b, max_batch));
}

MemoryFit fit_memory(const std::vector<std::pair<double, double>>& points) {
  MemoryFit fit;
  const double n = static_cast<double>(points.size());
  if (points.size() < 2) return fit;
  double sx = 0, sy = 0;
  for (const auto& [x, y] : points) {
    sx += x;
    sy += y;
  }
  const double mx = sx / n, my = sy / n;
  double sxx = 0, sxy = 0, syy = 0;
  for (const auto& [x, y] : points) {
    sxx += (x - mx) * (x - mx);
    sxy += (x - mx) * (y - my);
    syy += (y - my) * (y - my);
  }
  if (sxx <= 0) return fit;  // one distinct batch: no slope
  fit.bytes_per_sample = sxy / sxx;
  fit.static_bytes = my - fit.bytes_per_sample * mx;
  double ss_res = 0;
  for (const auto& [x, y] : points) {
    const double e = y - fit.predict(x);
    ss_res += e * e;
  }
  fit.r2 = syy > 0 ? 1.0 - ss_res / syy : 1.0;
  fit.points = static_cast<int>(points.size());
  return fit;
}

const ProbeResult* SearchResult::probe_at(int b) const {
  for (auto it = probes.rbegin(); it != probes.rend(); ++it)
    if (it->batch == b) return &*it;
  return nullptr;
}

std::vector<int> throughput_ladder(int reference, int largest) {
  std::vector<int> ladder;
  if (largest < 1) return ladder;
  for (long b = std::max(1, std::min(reference, largest)); b < largest; b *= 2) ladder.push_back(static_cast<int>(b));
  ladder.push_back(largest);
  return ladder;
}

std::vector<double> ladder_rates(const std::vector<ProbeResult>& probes, const std::vector<int>& ladder) {
  std::vector<double> rates;
  for (int batch : ladder) {
    double rate = 0;
    for (auto it = probes.rbegin(); it != probes.rend(); ++it)
      if (it->batch == batch && it->fits && it->images_per_second > 0) {
        rate = it->images_per_second;
        break;
      }
    rates.push_back(rate);
  }
  return rates;
}

int throughput_knee(const std::vector<double>& rates, const std::vector<int>& ladder, double min_gain) {
  if (ladder.empty()) return 0;
  auto rate = [&](std::size_t i) { return i < rates.size() ? rates[i] : 0.0; };
  if (rate(0) <= 0) return ladder.back();
  std::size_t at = 0;
  for (std::size_t next = 1; next < ladder.size(); ++next) {
    const double doublings = std::log2(static_cast<double>(ladder[next]) / ladder[at]);
    if (rate(next) < rate(at) * (1.0 + min_gain * doublings)) break;
    at = next;
  }
  return ladder[at];
}

std::vector<double> cap_rates(std::vector<double> rates, double input_rate) {
  if (input_rate > 0)
    for (double& r : rates) r = std::min(r, input_rate);
  return rates;
}

namespace {

using Outcome = ProbeResult::Outcome;

class Search {
 public:
  Search(const ProbeFn& probe, const SearchOptions& options) : probe_(probe), o_(options) {
    if (o_.budget_bytes <= 0) throw ConfigError("the batch search needs a memory budget > 0");
    if (o_.max_batch < 1) throw ConfigError("find_batch.max_batch must be >= 1");
    result_.budget_bytes = o_.budget_bytes;
    update_headroom();
  }

  SearchResult run() {
    const auto start = std::chrono::steady_clock::now();
    switch (o_.strategy) {
      case SearchStrategy::kFit:
        fit_strategy();
        break;
      case SearchStrategy::kBinsearch:
        binsearch_strategy();
        break;
      case SearchStrategy::kExact:
        exact_strategy();
        break;
    }
    result_.fit = fit_memory(ran_points());
    if (result_.fit.points >= 2)
      result_.predicted_peak_bytes = static_cast<std::int64_t>(result_.fit.predict(result_.batch));
    if (const auto* p = result_.probe_at(result_.batch); p && p->outcome == Outcome::kRan)
      result_.measured_peak_bytes = p->peak_bytes;
    if (o_.strategy == SearchStrategy::kFit && result_.fit.points >= 3 && result_.fit.r2 < 0.99)
      result_.warnings.push_back(fmt::format("memory is not linear in the batch size (R^2 {:.3f} over {} probes)",
                                             result_.fit.r2, result_.fit.points));
    result_.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return std::move(result_);
  }

 private:
  bool use_headroom() const { return o_.strategy == SearchStrategy::kFit; }

  void update_headroom() {
    std::int64_t h = use_headroom() ? static_cast<std::int64_t>(o_.headroom_fraction * o_.budget_bytes) : 0;
    if (use_headroom()) h = std::max(h, measured_headroom_);
    result_.headroom_bytes = h;
    result_.usable_bytes = o_.budget_bytes - h;
    for (auto& p : result_.probes) p.fits = p.outcome == Outcome::kRan && p.peak_bytes <= result_.usable_bytes;
  }

  // Runs (or recalls) the probe at batch b.
  ProbeResult probe(int b) {
    if (const auto* known = result_.probe_at(b)) return *known;
    ProbeResult p = probe_(b);
    p.batch = b;
    if (p.outcome == Outcome::kFailed)
      throw Error(fmt::format("the probe at batch {} failed, and not for lack of memory: {}", b, p.error));
    if (p.outcome == Outcome::kRan)
      measured_headroom_ = std::max({measured_headroom_, fragmentation(p), 2 * p.step_spread_bytes});
    result_.probes.push_back(p);
    update_headroom();
    return *result_.probe_at(b);
  }

  // What the caching allocator held beyond the probe's tensors because of this batch: the reserved
  // gap less the cache the probe found when it started. After an OOM the failed step's blocks can
  // still be cached when the next probe empties the cache (an H200 probe at batch 3 then showed
  // 13.6 GiB reserved and unallocated); that is not fragmentation a run at this batch would have.
  static std::int64_t fragmentation(const ProbeResult& p) {
    return std::max<std::int64_t>(0, p.reserved_gap_bytes - p.cached_at_start_bytes);
  }

  // Probes land on multiples of the granularity (from it up): the answer then needs no rounding.
  int snap(int b) const {
    const int g = std::max(1, o_.granularity);
    return g > 1 && b >= g ? b - b % g : b;
  }

  std::vector<std::pair<double, double>> ran_points() const {
    std::vector<std::pair<double, double>> pts;
    for (const auto& p : result_.probes)
      if (p.outcome == Outcome::kRan) pts.emplace_back(p.batch, static_cast<double>(p.peak_bytes));
    return pts;
  }

  int largest_fitting() const {
    int best = 0;
    for (const auto& p : result_.probes)
      if (p.fits) best = std::max(best, p.batch);
    return best;
  }

  bool close_enough(int lo, int hi) const {
    // With a granularity the answer is a multiple of it: none lies strictly between lo and lo + g.
    const int step = lo >= o_.granularity ? std::max(1, o_.granularity) : 1;
    return hi - lo <= std::max(step, static_cast<int>(std::floor(o_.tolerance * lo)));
  }

  bool out_of_probes() const { return static_cast<int>(result_.probes.size()) >= o_.max_probes; }

  [[noreturn]] void batch_one_does_not_fit(const ProbeResult& p) {
    const std::string need =
        p.peak_bytes > 0 ? format_bytes(static_cast<double>(p.peak_bytes)) : "more than the budget";
    throw Error(fmt::format(
        "batch 1 does not fit: the training step at batch 1 needs {}{}, the budget is {} ({} usable after {} "
        "headroom). "
        "Raise train.memory_budget, use train.precision=bf16, a smaller model or {}",
        p.outcome == Outcome::kOutOfMemory ? "at least " : "", need, format_bytes(static_cast<double>(o_.budget_bytes)),
        format_bytes(static_cast<double>(result_.usable_bytes)),
        format_bytes(static_cast<double>(result_.headroom_bytes)), o_.input_size_key));
  }

  // Fit: one small probe, a jump to the batch that must fit if memory is linear, then probes at
  // the edge of the usable budget on a line through the largest probes that ran (close_in).
  void fit_strategy() {
    const int b1 = std::clamp(o_.first_batch, 1, o_.max_batch);
    ProbeResult first = probe(b1);
    if (!first.fits) {
      if (b1 == 1) batch_one_does_not_fit(first);
      ProbeResult one = probe(1);
      if (!one.fits) batch_one_does_not_fit(one);
      close_in();
      return;
    }
    // peak(b) = S + k b with S >= baseline gives k <= (peak(b1) - baseline) / b1: the batch below
    // fits for sure when memory is linear, and is usually close to the answer.
    const double slope_bound =
        std::max(1.0, static_cast<double>(first.peak_bytes - std::min(first.baseline_bytes, first.peak_bytes)) / b1);
    double jump = b1 + std::floor(static_cast<double>(result_.usable_bytes - first.peak_bytes) / slope_bound);
    int b2 = static_cast<int>(std::clamp<double>(jump, b1, o_.max_batch));
    // No room by that bound: the first peak is mostly batch-independent memory (a text encoder's
    // optimizer step) close to the budget. Double, as creeping up by one would learn nothing.
    if (b2 <= b1) b2 = std::min(2 * b1, o_.max_batch);
    b2 = std::max(b1, snap(b2));
    if (b2 > b1) probe(b2);
    close_in();
  }

  // Between the largest batch that fits (lo) and the smallest that does not (hi), probe where the
  // line through the largest probes that ran reaches the usable budget. A line that has not yet
  // predicted a probe's peak is aimed a tenth short when it extrapolates, so the probe lands inside
  // and adds a point near the edge; once it has predicted one (within half a sample), its word that
  // lo + 1 does not fit ends the search without probing it. Bisection only when the line has no
  // guess inside the bracket.
  void close_in() {
    bool line_trusted = false;
    for (;;) {
      const int lo = largest_fitting(), hi = smallest_miss();
      if (lo >= o_.max_batch || close_enough(lo, hi) || out_of_probes()) break;
      const MemoryFit line = fit_near(lo);
      const int edge =
          line.points >= 2 ? snap(line.largest_within(static_cast<double>(result_.usable_bytes), o_.max_batch)) : 0;
      if (edge <= lo && line_trusted) break;
      const bool flat =
          line.points >= 2 &&
          line.largest_within(static_cast<double>(result_.usable_bytes), std::numeric_limits<int>::max()) / kFlatLine >
              largest_ran();
      const int target = line.points >= 2 ? next_target(lo, hi, edge, line_trusted, flat) : after_a_miss(lo, hi);
      const ProbeResult p = probe(target);
      const double error = std::abs(static_cast<double>(p.peak_bytes) - line.predict(target));
      line_trusted = line.points >= 2 && p.outcome == Outcome::kRan &&
                     error <= std::max(0.5 * line.bytes_per_sample, 0.002 * static_cast<double>(o_.budget_bytes));
    }
    result_.batch = largest_fitting();
  }

  // Only one probe ran (the first) and the jump did not fit: its slope bound was too low, because
  // the first probe's peak was not yet its activations (resnet50 on an H200: batch 2 bounded the
  // slope at 36.6 MB a sample, the real one is 44.7). Between them lies the edge: where the line
  // through lo and an OOM's known need (a lower bound) reaches the usable budget, aimed a tenth
  // short, and no further than three quarters of the way, so that the probe lands inside the budget
  // and gives the line its second point near the edge (not lo + 1, which would teach it nothing).
  int after_a_miss(int lo, int hi) const {
    const ProbeResult* low = result_.probe_at(lo);
    const ProbeResult* miss = result_.probe_at(hi);
    double target = lo + kAfterMissShare * (hi - lo);
    if (low && miss && miss->peak_bytes > result_.usable_bytes && miss->peak_bytes > low->peak_bytes) {
      const double slope = static_cast<double>(miss->peak_bytes - low->peak_bytes) / (hi - lo);
      const double edge = lo + static_cast<double>(result_.usable_bytes - low->peak_bytes) / slope;
      target = std::min(target, edge - (edge - lo) / 10);
    }
    const int b = snap(static_cast<int>(std::floor(target)));
    return b > lo && b < hi ? b : lo + std::max(1, (hi - lo) / 2);
  }

  // Where to probe next. An unproven line that extrapolates far (its edge beyond
  // kFarExtrapolation x the largest batch that ran) is aimed halfway there: peaks are flat at small
  // batches (batch-independent memory dominates) and a line through such a probe is too shallow
  // (text_tiny: 2 and 46 put the edge at 347, the answer is 248). A flat line (the probes' peaks
  // barely grew: its edge beyond kFlatLine x the largest batch that ran) says nothing about the
  // edge: double until the peak grows or a batch does not fit.
  int next_target(int lo, int hi, int edge, bool line_trusted, bool flat) {
    const int ran = largest_ran();
    if (flat && hi > o_.max_batch) return std::min(2 * ran, o_.max_batch);
    if (edge > lo && edge < hi && !flat) {
      const int beyond_ran = edge - ran;
      if (!line_trusted && beyond_ran > 0 && edge > kFarExtrapolation * ran)
        return std::max(lo + 1, snap_above(lo, ran + beyond_ran / 2));
      const int short_by = !line_trusted && beyond_ran > 0 ? beyond_ran / 10 : 0;
      return std::max(lo + 1, snap_above(lo, edge - short_by));
    }
    const int next = lo >= o_.granularity ? lo + std::max(1, o_.granularity) : lo + 1;
    if (edge <= lo && next < hi) return next;  // an unproven line says lo is the edge: check
    if (!result_.bisected)
      result_.warnings.push_back(fmt::format(
          "the memory model has no guess between {} and {} (batch {} does not fit); bisecting", lo, hi, hi));
    result_.bisected = true;
    return snap_above(lo, lo + (hi - lo) / 2);
  }

  // The ran probes in the upper half of what fits (memory is most nearly linear there), or the two
  // largest that ran when fewer lie there.
  MemoryFit fit_near(int lo) const {
    std::vector<std::pair<double, double>> pts = ran_points();
    std::sort(pts.begin(), pts.end());
    std::vector<std::pair<double, double>> upper;
    for (const auto& p : pts)
      if (p.first >= lo / 2.0) upper.push_back(p);
    if (upper.size() < 2 && pts.size() >= 2) upper.assign(pts.end() - 2, pts.end());
    return fit_memory(upper);
  }

  int smallest_miss() const {
    int miss = o_.max_batch + 1;
    for (const auto& p : result_.probes)
      if (!p.fits) miss = std::min(miss, p.batch);
    return miss;
  }

  int largest_ran() const {
    int most = 0;
    for (const auto& p : result_.probes)
      if (p.outcome == Outcome::kRan) most = std::max(most, p.batch);
    return most;
  }

  // Lightning's BatchSizeFinder(mode="binsearch"): double from init_val until a trial runs out of
  // memory, then bisect; the answer keeps a fixed margin. No memory model, OOM is the only signal.
  void binsearch_strategy() {
    int low = 1, high = 0, b = std::clamp(o_.first_batch, 1, o_.max_batch), trials = 0;
    for (;;) {
      ProbeResult p = probe(b);
      if (p.outcome == Outcome::kRan) {
        if (++trials > o_.binsearch_max_trials) break;
        low = b;
        if (high) {
          if (high - low <= 1) break;
          b = (high + low) / 2;
        } else {
          const int next = std::min(b * 2, o_.max_batch);
          if (next == b) break;
          b = next;
        }
      } else {
        high = b;
        b = (high + low) / 2;
        if (high - low <= 1) break;
      }
    }
    const auto* at_low = result_.probe_at(low);
    if (!at_low || at_low->outcome != Outcome::kRan)
      result_.warnings.push_back(fmt::format("binsearch answered batch {} without a trial that ran at it", low));
    result_.batch = std::max(1, static_cast<int>(std::floor(low * (1.0 - o_.binsearch_margin))));
  }

  // The true maximum for benchmarks: doubling, then bisection to a gap of 1 on "did not run out of
  // memory" alone (no headroom, no margin).
  void exact_strategy() {
    int lo = 0, hi = 0, b = std::clamp(o_.first_batch, 1, o_.max_batch);
    while (!hi) {
      ProbeResult p = probe(b);
      if (p.outcome != Outcome::kRan) {
        hi = b;
      } else {
        lo = b;
        if (b == o_.max_batch) break;
        b = std::min(b * 2, o_.max_batch);
      }
    }
    while (hi && hi - lo > 1) {
      const int mid = lo + (hi - lo) / 2;
      if (probe(mid).outcome == Outcome::kRan)
        lo = mid;
      else
        hi = mid;
    }
    if (lo == 0) batch_one_does_not_fit(*result_.probe_at(1));
    result_.batch = lo;
  }

  // The multiple of the granularity at or below b when one lies above lo, else b.
  int snap_above(int lo, int b) const { return snap(b) > lo ? snap(b) : b; }

  static constexpr int kFarExtrapolation = 3;
  static constexpr double kAfterMissShare = 0.75;
  static constexpr int kFlatLine = 64;

  const ProbeFn& probe_;
  SearchOptions o_;
  SearchResult result_;
  std::int64_t measured_headroom_ = 0;
};

}  // namespace

SearchResult search_batch(const ProbeFn& probe, const SearchOptions& options) { return Search(probe, options).run(); }

}  // namespace shoplens
