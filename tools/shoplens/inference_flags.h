// Flags shared by the verbs that run a model on images (predict, evaluate): where the model
// comes from, how it computes, and how the input is read and batched.
#pragma once

#include <filesystem>
#include <string>

#include <CLI/CLI.hpp>

#include "shoplens/infer/inference_session.h"

namespace shoplens::cli {

class InferenceFlags {
 public:
  void add_to(CLI::App& app);
  // Applies --log-level and --threads to the process (call first in run()).
  void apply_runtime() const;
  // The source with --classes / --classes-file applied. UsageError when both are given.
  ModelSource model_source() const;
  InferenceOptions inference() const {
    InferenceOptions o = inference_;
    o.exact_decode = !fast_decode_;
    return o;
  }

 private:
  ModelSource source_;
  InferenceOptions inference_;
  std::string classes_;
  std::string classes_file_;
  bool fast_decode_ = false;
  int threads_ = 0;
  std::string log_level_ = "info";

 public:
  // The input and batching flags, read by the verb into its own options.
  std::filesystem::path root;
  std::string split = "all";
  int batch_size = 32;
  int workers = 0;
};

}  // namespace shoplens::cli
