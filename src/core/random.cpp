#include "shoplens/core/random.h"

#include <cmath>

#include "shoplens/core/errors.h"

namespace shoplens {
namespace {

constexpr std::uint64_t kGolden = 0x9E3779B97F4A7C15ULL;
constexpr double kPi = 3.14159265358979323846;

std::uint64_t splitmix_finalize(std::uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

std::uint64_t rotl(std::uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

}  // namespace

Rng::Rng(std::uint64_t seed) {
  // Never all zero: consecutive splitmix64 outputs are distinct.
  for (auto& s : s_) s = splitmix_finalize(seed += kGolden);
}

std::uint64_t Rng::next() {
  const std::uint64_t result = rotl(s_[1] * 5, 7) * 9;
  const std::uint64_t t = s_[1] << 17;
  s_[2] ^= s_[0];
  s_[3] ^= s_[1];
  s_[1] ^= s_[2];
  s_[0] ^= s_[3];
  s_[2] ^= t;
  s_[3] = rotl(s_[3], 45);
  return result;
}

double Rng::uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }

double Rng::uniform(double lo, double hi) { return lo + (hi - lo) * uniform(); }

int Rng::uniform_int(int n) {
  // Multiply-high instead of modulo: no division, negligible bias for int ranges.
  return static_cast<int>((static_cast<unsigned __int128>(next()) * static_cast<std::uint64_t>(n)) >> 64);
}

int Rng::uniform_int(int lo, int hi) { return lo + uniform_int(hi - lo + 1); }

bool Rng::bernoulli(double p) { return uniform() < p; }

double Rng::normal() {
  const double u1 = 1.0 - uniform();  // (0, 1], so the log is finite
  const double u2 = uniform();
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * kPi * u2);
}

double Rng::gamma(double shape) {
  if (!(shape > 0)) throw Error("Rng::gamma: shape must be positive");
  if (shape < 1.0) {
    // Marsaglia-Tsang's boost: Gamma(a) = Gamma(a + 1) * U^(1/a).
    const double u = 1.0 - uniform();
    return gamma(shape + 1.0) * std::pow(u, 1.0 / shape);
  }
  const double d = shape - 1.0 / 3.0;
  const double c = 1.0 / std::sqrt(9.0 * d);
  for (;;) {
    double x, v;
    do {
      x = normal();
      v = 1.0 + c * x;
    } while (v <= 0.0);
    v = v * v * v;
    const double u = uniform();
    const double x2 = x * x;
    if (u < 1.0 - 0.0331 * x2 * x2) return d * v;
    if (std::log(u) < 0.5 * x2 + d * (1.0 - v + std::log(v))) return d * v;
  }
}

double Rng::beta(double alpha) {
  const double g1 = gamma(alpha), g2 = gamma(alpha);
  const double sum = g1 + g2;
  // Both can underflow for tiny alpha, where Beta(a, a) puts its mass at the two ends.
  if (sum <= 0.0) return bernoulli(0.5) ? 1.0 : 0.0;
  return g1 / sum;
}

std::size_t Rng::pick(const double* weights, std::size_t count) {
  double total = 0;
  for (std::size_t i = 0; i < count; ++i) total += weights[i];
  double r = uniform() * total;
  for (std::size_t i = 0; i < count; ++i) {
    if (r < weights[i]) return i;
    r -= weights[i];
  }
  return count - 1;
}

std::uint64_t mix_seed(std::uint64_t a, std::uint64_t b) {
  // Each argument goes through a bijection before the XOR, and the result through another.
  return splitmix_finalize(splitmix_finalize(a + kGolden) ^ (b * 0xD6E8FEB86659FD93ULL + kGolden));
}

std::uint64_t mix_seed(std::uint64_t a, std::uint64_t b, std::uint64_t c) { return mix_seed(mix_seed(a, b), c); }

}  // namespace shoplens
