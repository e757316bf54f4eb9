#include <torch/torch.h>

#include "shoplens/models/classifier.h"

#include "shoplens/core/errors.h"

namespace shoplens {

at::Tensor Classifier::forward_batch(const Batch& batch, const c10::Device& device) {
  return forward(batch.images.to(device, /*non_blocking=*/true));
}

void Classifier::emit_onnx(onnx::Graph&) {
  throw UsageError("model " + spec_.name + " has no ONNX emitter (Classifier::emit_onnx)");
}

Batch Classifier::example_batch(int batch_size) const {
  Batch b;
  b.images = torch::randn({batch_size, 3, spec_.image_size, spec_.image_size});
  b.labels = torch::randint(0, spec_.num_classes, {batch_size}, torch::kLong);
  return b;
}

}  // namespace shoplens
