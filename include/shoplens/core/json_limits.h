// Limits on JSON read from outside the process (config files, --set values, weight headers, model
// cards, checkpoints, price tables, benchmark baselines).
#pragma once

#include <string_view>

namespace shoplens {

// Deeper than any document ShopLens writes or reads (its configs nest 3 levels).
constexpr int kMaxJsonNesting = 64;

// Whether arrays and objects in `text` nest deeper than `limit` (brackets inside strings do not
// count). nlohmann's parser is iterative, but printing or walking a value recurses, so a document
// nested 100,000 deep overflowed the stack in an error message; checked before parsing.
bool json_nesting_exceeds(std::string_view text, int limit = kMaxJsonNesting);

}  // namespace shoplens
