// Flags shared by the verbs that run a model on images (predict, evaluate): where the model
// comes from, how it computes, and how the input is read and batched.
#pragma once

#include <filesystem>
#include <string>

#include <CLI/CLI.hpp>

#include "shoplens/infer/predict.h"

namespace shoplens::cli {

// --precision and --device, the verbs that run a model (predict, evaluate, score, serve) alike:
// strings on the command line, typed once in apply().
class ComputeFlags {
 public:
  void add_to(CLI::App& app);
  void apply(Precision& precision, DeviceChoice& device) const;

 private:
  std::string precision_ = precision_name(Precision::kFp32);
  std::string device_ = device_choice_name(DeviceChoice::kAuto);
};

class InferenceFlags {
 public:
  // Binds the flags to `options`, which must outlive the parse (the verb's own options).
  void add_to(CLI::App& app, ModelInputOptions& options);
  // Applies --log-level and --threads to the process and completes `options`: the source from
  // --weights and --model (or --model's old meaning, a path: weights_path), --classes /
  // --classes-file applied (UsageError when both are given), --fast-decode. Call first in run().
  void apply(ModelInputOptions& options) const;

 private:
  ComputeFlags compute_;
  std::string verb_;
  std::filesystem::path weights_;
  std::string model_;  // an architecture, or (old spelling) the weights' path
  std::string arch_;   // --arch, the old spelling of --model NAME
  std::string classes_;
  std::string classes_file_;
  bool fast_decode_ = false;
  int threads_ = 0;
  std::string log_level_ = "info";
};

}  // namespace shoplens::cli
