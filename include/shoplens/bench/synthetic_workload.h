// What a benchmark trains: the model, its input shape and the step's settings. One schema for the
// three places that describe it (`bench` scenarios, `bench-train` options and the synthetic job
// both run on), so a field and its default are declared once; each of them is this struct plus
// its own settings.
#pragma once

#include <string>
#include <vector>

#include "shoplens/core/config.h"

namespace shoplens {

struct SyntheticWorkload {
  std::string model = "small_cnn";
  int num_classes = 12;
  int image_size = 64;
  bool channels_last = false;
  std::string optimizer =
      name_in(kOptimizerKindNames, OptimConfig{}.name);  // train's default: one default for every verb
  std::string optimizer_impl =
      name_in(kOptimizerImplNames, OptimConfig{}.implementation);  // auto | fused | foreach | reference
  std::string precision = "fp32";                                  // fp32 | bf16 | fp16 (CUDA)
  // Text models (text_*): synthetic sequences of seq_len tokens, every one real (the worst case),
  // ids in [2, vocab_size); on shards, seq_len is text.max_length (longer examples are truncated)
  // and the vocabulary is the dataset's.
  int vocab_size = 8192;
  int seq_len = 256;
};

// The values optimizer_impl takes: train's optim.implementation choices.
inline std::vector<std::string> optimizer_impl_names() {
  std::vector<std::string> names;
  for (const auto& row : kOptimizerImplNames) names.emplace_back(row.name);
  return names;
}

}  // namespace shoplens
