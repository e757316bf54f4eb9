// The inference core with a fake model (no files, no GPU): eval mode, softmax of the logits,
// autocast for reduced precision, and batches of rows in order with unreadable rows as errors.
#include <gtest/gtest.h>

#include <torch/torch.h>

#include <opencv2/core.hpp>

#include "infer/batch_inference.h"
#include "model_test_util.h"
#include "shoplens/core/errors.h"
#include "shoplens/infer/inference_session.h"
#include "shoplens/models/classifier.h"

namespace shoplens {
namespace {

// Logit c is the mean of input channel c (through a matmul, so autocast has something to cast).
class ChannelMeanModel : public Classifier {
 public:
  explicit ChannelMeanModel(int size) : Classifier(testing::spec("channel_mean", 3, size)) {}
  at::Tensor forward(const at::Tensor& x) override {
    saw_training = is_training();
    const auto per_channel = x.flatten(2).mean(2);  // [n, 3]
    const auto out = per_channel.matmul(torch::eye(3, per_channel.options()));
    matmul_dtype = out.scalar_type();
    return out;
  }
  std::string head_prefix() const override { return "head."; }
  std::vector<std::string> stage_prefixes() const override { return {}; }
  void reset_head(int) override {}
  int num_classes() const override { return 3; }
  bool saw_training = true;
  c10::ScalarType matmul_dtype = c10::ScalarType::Undefined;
};

LoadedModel fake_model(std::shared_ptr<ChannelMeanModel> model) {
  LoadedModel m;
  m.model = std::move(model);
  m.class_names = {"red", "green", "blue"};
  m.preprocessing.image_size = 16;
  return m;
}

// Rows held in memory: a solid colour each, or an error.
class ColourRows : public ScoreRows {
 public:
  explicit ColourRows(std::vector<int> channel_or_error) : rows_(std::move(channel_or_error)) {}
  std::size_t size() const override { return rows_.size(); }
  std::string id(std::size_t row) const override { return "r" + std::to_string(row); }
  cv::Mat image(std::size_t row) const override {
    if (rows_.at(row) < 0) throw DataError("row " + std::to_string(row) + " is unreadable");
    cv::Scalar colour(0, 0, 0);
    colour[rows_[row]] = 255;
    return cv::Mat(20, 30, CV_8UC3, colour);
  }
  std::string describe() const override { return "colours"; }

 private:
  std::vector<int> rows_;
};

TEST(InferenceSession, RunsTheModelInEvalModeAndReturnsTheSoftmaxOfItsLogits) {
  auto model = std::make_shared<ChannelMeanModel>(16);
  model->train();
  InferenceSession session(fake_model(model), {});
  const auto images = torch::randn({4, 3, 16, 16});
  const InferenceOutput out = session.run(images);
  EXPECT_FALSE(model->saw_training);
  EXPECT_EQ(model->matmul_dtype, c10::ScalarType::Float);
  const auto expected_logits = images.flatten(2).mean(2);
  EXPECT_TRUE(torch::allclose(out.logits, expected_logits, 1e-5, 1e-6));
  EXPECT_TRUE(torch::allclose(out.probabilities, torch::softmax(expected_logits, 1), 1e-5, 1e-6));
}

TEST(InferenceSession, ReducedPrecisionRunsTheModelUnderAutocast) {
  auto model = std::make_shared<ChannelMeanModel>(16);
  InferenceOptions bf16;
  bf16.precision = Precision::kBf16;
  InferenceSession session(fake_model(model), bf16);
  const InferenceOutput out = session.run(torch::randn({2, 3, 16, 16}));
  EXPECT_EQ(model->matmul_dtype, c10::ScalarType::BFloat16);
  EXPECT_EQ(out.probabilities.scalar_type(), c10::ScalarType::Float);  // handed back as float32
}

TEST(InferenceSession, Fp16IsRefusedWithoutCuda) {
  InferenceOptions fp16;
  fp16.precision = Precision::kFp16;
  fp16.device = DeviceChoice::kCpu;
  EXPECT_THROW(InferenceSession(fake_model(std::make_shared<ChannelMeanModel>(16)), fp16), UsageError);
}

TEST(InferenceSession, ExactDecodingAsksForTheAccurateDctAtFullScale) {
  InferenceSession exact(fake_model(std::make_shared<ChannelMeanModel>(16)), {});
  EXPECT_TRUE(exact.decode_options().accurate_dct);
  EXPECT_EQ(exact.decode_options().min_short_side, 0);
  InferenceOptions fast;
  fast.exact_decode = false;
  InferenceSession quick(fake_model(std::make_shared<ChannelMeanModel>(16)), fast);
  EXPECT_FALSE(quick.decode_options().accurate_dct);
  EXPECT_EQ(quick.decode_options().min_short_side, 18);  // floor(16 / 0.875)
}

TEST(BatchInference, EveryRowOnceInOrderWithUnreadableRowsAsErrors) {
  InferenceSession session(fake_model(std::make_shared<ChannelMeanModel>(16)), {});
  const ColourRows rows({0, 2, -1, 1, 0, -1, 2});
  BatchInference runner(session, rows, /*workers=*/2, /*keep_logits=*/true);
  BatchTimings timing;
  const auto results = runner.run_range(0, rows.size(), /*batch=*/3, timing);
  ASSERT_EQ(results.size(), rows.size());
  const std::vector<int> expected{0, 2, -1, 1, 0, -1, 2};
  for (std::size_t r = 0; r < results.size(); ++r) {
    EXPECT_EQ(results[r].row, r);
    EXPECT_EQ(results[r].ok, expected[r] >= 0) << r;
    if (expected[r] < 0) {
      EXPECT_NE(results[r].error.find("unreadable"), std::string::npos) << results[r].error;
      continue;
    }
    EXPECT_EQ(results[r].label, expected[r]) << r;
    EXPECT_EQ(results[r].logits.size(), 3u);
  }
  EXPECT_EQ(timing.images, 5);
}

}  // namespace
}  // namespace shoplens
