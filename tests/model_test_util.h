// A ModelSpec with the small defaults the model and weight tests use.
#pragma once

#include <string>

#include "shoplens/models/classifier.h"

namespace shoplens::testing {

inline ModelSpec spec(const std::string& name, int classes = 5, int image_size = 64) {
  ModelSpec s;
  s.name = name;
  s.num_classes = classes;
  s.image_size = image_size;
  return s;
}

}  // namespace shoplens::testing
