// One portable random generator for the whole project (splitmix64 seeding + xoshiro256**) with
// its own distributions, so generated data, augmentation and sample order never depend on a
// standard library's std::*_distribution implementation or on thread scheduling.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <utility>
#include <vector>

namespace shoplens {

class Rng {
 public:
  explicit Rng(std::uint64_t seed);
  std::uint64_t next();
  double uniform();                      // [0, 1), from the top 53 bits
  double uniform(double lo, double hi);  // [lo, hi)
  int uniform_int(int n);                // [0, n), n > 0
  int uniform_int(int lo, int hi);       // [lo, hi]
  bool bernoulli(double p);              // p <= 0 never, p >= 1 always
  double normal();                       // N(0, 1), Box-Muller
  double gamma(double shape);            // Gamma(shape, 1), Marsaglia-Tsang
  double beta(double alpha);             // Beta(alpha, alpha)
  // An index drawn with probability proportional to its weight.
  std::size_t pick(const double* weights, std::size_t count);
  std::size_t pick(const std::vector<double>& weights) { return pick(weights.data(), weights.size()); }
  std::size_t pick(std::initializer_list<double> weights) { return pick(weights.begin(), weights.size()); }
  template <std::size_t N>
  std::size_t pick(const std::array<double, N>& weights) {
    return pick(weights.data(), N);
  }
  template <class T>
  void shuffle(std::vector<T>& items) {
    for (std::size_t i = items.size(); i > 1; --i) std::swap(items[i - 1], items[uniform_int(static_cast<int>(i))]);
  }

 private:
  std::uint64_t s_[4];
};

// Combines seeds (run seed, epoch, index, stream, ...) into one well-mixed 64-bit seed. For a
// fixed first argument, distinct second arguments give distinct results (and vice versa).
std::uint64_t mix_seed(std::uint64_t a, std::uint64_t b);
std::uint64_t mix_seed(std::uint64_t a, std::uint64_t b, std::uint64_t c);

}  // namespace shoplens
