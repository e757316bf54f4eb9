// The inference core shared by score, serve, predict and evaluate (inference_session.h).
#include "shoplens/infer/inference_session.h"

#include <torch/torch.h>

#include <spdlog/spdlog.h>

#include "shoplens/core/errors.h"
#include "shoplens/core/runtime.h"
#include "shoplens/data/augment.h"
#include "shoplens/models/classifier.h"
#include "shoplens/train/amp.h"

namespace shoplens {

struct InferenceSession::Impl {
  Impl(LoadedModel m, const InferenceOptions& o)
      : loaded(std::move(m)), options(o), augmenter(loaded.preprocessing, /*train=*/false) {
    precision = o.precision;
    cuda = wants_cuda(o.device);
    if (precision == Precision::kFp16 && !cuda)
      throw UsageError("--precision fp16 needs CUDA (CPU autocast supports bf16 only)");
    if (loaded.model->is_text())
      throw UsageError("inference sessions take image models; " + loaded.model->spec().name + " reads text");
    device = cuda ? torch::Device(torch::kCUDA) : torch::Device(torch::kCPU);
    loaded.model->to(device);
    loaded.model->eval();  // BatchNorm uses its running statistics, dropout is off
  }

  LoadedModel loaded;
  InferenceOptions options;
  Augmenter augmenter;
  Precision precision = Precision::kFp32;
  bool cuda = false;
  torch::Device device{torch::kCPU};
};

InferenceSession::InferenceSession(LoadedModel model, const InferenceOptions& options)
    : impl_(std::make_unique<Impl>(std::move(model), options)) {}
InferenceSession::~InferenceSession() = default;

const LoadedModel& InferenceSession::model() const { return impl_->loaded; }
const std::vector<std::string>& InferenceSession::class_names() const { return impl_->loaded.class_names; }
int InferenceSession::image_size() const { return impl_->augmenter.output_size(); }
std::size_t InferenceSession::floats_per_sample() const { return impl_->augmenter.floats_per_sample(); }
bool InferenceSession::on_cuda() const { return impl_->cuda; }
const InferenceOptions& InferenceSession::options() const { return impl_->options; }

DecodeOptions InferenceSession::decode_options() const {
  DecodeOptions d;
  d.accurate_dct = impl_->options.exact_decode;
  // A reduced-scale JPEG decode still covers the resize target, but its pixels are not Pillow's.
  if (!impl_->options.exact_decode) d.min_short_side = impl_->augmenter.eval_resize_short_side();
  return d;
}

void InferenceSession::preprocess(const cv::Mat& rgb, float* dst) const { impl_->augmenter.apply(rgb, 0, dst); }

at::Tensor InferenceSession::host_batch(std::int64_t n) const {
  const int s = image_size();
  return torch::empty({n, 3, s, s}, torch::TensorOptions().dtype(torch::kFloat).pinned_memory(impl_->cuda));
}

at::Tensor InferenceSession::to_device(const at::Tensor& images, bool non_blocking) const {
  return images.to(impl_->device, non_blocking);
}

InferenceOutput InferenceSession::run(const at::Tensor& images) {
  c10::InferenceMode inference;  // no autograd bookkeeping at all (lighter than NoGradGuard)
  at::Tensor logits;
  {
    AutocastScope autocast(impl_->cuda, impl_->precision);
    logits = impl_->loaded.model->forward(images.device() == impl_->device ? images : to_device(images));
  }
  logits = logits.to(torch::kFloat);
  InferenceOutput out;
  out.probabilities = torch::softmax(logits, 1).to(torch::kCPU).contiguous();
  out.logits = logits.to(torch::kCPU).contiguous();
  return out;
}

}  // namespace shoplens
