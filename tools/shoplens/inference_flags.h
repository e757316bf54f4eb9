// Flags shared by the verbs that run a model on images (predict, evaluate): where the model
// comes from and how it computes.
#pragma once

#include <string>

#include <CLI/CLI.hpp>

#include "shoplens/infer/inference_session.h"

namespace shoplens::cli {

class InferenceFlags {
 public:
  void add_to(CLI::App& app);
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
};

}  // namespace shoplens::cli
