// What a benchmark trains: the model, its input shape and the step's settings. One schema for the
// three places that describe it (`bench` scenarios, `bench-train` options and the synthetic job
// both run on), so a field and its default are declared once; each of them is this struct plus
// its own settings.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "shoplens/core/config.h"

namespace shoplens {

struct SyntheticWorkload {
  std::string model = "small_cnn";
  int num_classes = 12;
  int image_size = 64;
  bool channels_last = false;
  OptimizerKind optimizer = OptimConfig{}.name;  // train's defaults: one default for every verb
  OptimizerImpl optimizer_impl = OptimConfig{}.implementation;
  Precision precision = Precision::kFp32;  // fp16: CUDA only
  // Text models (text_*): synthetic sequences of seq_len tokens, every one real (the worst case),
  // ids in [2, vocab_size); on shards, seq_len is text.max_length (longer examples are truncated)
  // and the vocabulary is the dataset's.
  int vocab_size = 8192;
  int seq_len = 256;
};

// Every name of an enum's table, in its order: the choices a bench flag or scenario key offers.
template <class E, std::size_t N>
std::vector<std::string> names_of(const EnumName<E> (&table)[N]) {
  std::vector<std::string> names;
  for (const auto& row : table) names.emplace_back(row.name);
  return names;
}

}  // namespace shoplens
