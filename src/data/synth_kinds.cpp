#include <iterator>

#include "synth_internal.h"

namespace shoplens::synth {
namespace {

using K = ProductKind;

// Row order follows ProductKind's values. Texture: none, stripes, dots, checks, weave.
// Category: apparel, electronics, home, beauty, toys, sports.
constexpr ProductKindFacts kProductKindFacts[] = {
    {K::kBottle, 2.1, 3.0, false, true, {0.75, 0.25, 0, 0, 0}, {0, 0, 0.2, 0.6, 0, 0.2}},
    {K::kBox, 0.8, 1.3, true, true, {0.55, 0.15, 0.15, 0.15, 0}, {0, 0.3, 0.3, 0, 0.4, 0}},
    {K::kShoe, 0.45, 0.6, false, false, {0.6, 0.15, 0, 0, 0.25}, {0.5, 0, 0, 0, 0, 0.5}},
    {K::kShirt, 0.95, 1.15, true, false, {0.35, 0.25, 0.15, 0.1, 0.15}, {0.8, 0, 0, 0, 0, 0.2}},
    {K::kMug, 0.85, 1.05, false, true, {0.6, 0.2, 0.2, 0, 0}, {0, 0, 0.8, 0, 0.2, 0}},
    {K::kPhone, 1.9, 2.2, false, false, {0, 0, 0, 0, 0}, {0, 0.9, 0, 0, 0.1, 0}},
    {K::kLamp, 1.4, 1.9, false, false, {0.6, 0.2, 0, 0, 0.2}, {0, 0.3, 0.7, 0, 0, 0}},
    {K::kBag, 0.9, 1.2, true, true, {0.35, 0.25, 0.15, 0.1, 0.15}, {0.6, 0, 0, 0.2, 0, 0.2}},
};
static_assert(std::size(kProductKindFacts) == kNumProductKinds, "one row per product kind");

constexpr bool rows_follow_kind_order() {
  for (int i = 0; i < kNumProductKinds; ++i)
    if (static_cast<int>(kProductKindFacts[i].kind) != i) return false;
  return true;
}
static_assert(rows_follow_kind_order(), "row i describes ProductKind i (product_kind_facts indexes by value)");

}  // namespace

const ProductKindFacts& product_kind_facts(ProductKind kind) { return kProductKindFacts[static_cast<int>(kind)]; }

}  // namespace shoplens::synth
