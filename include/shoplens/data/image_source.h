// The narrow interface the loader reads samples through. Shards implement it; tests and
// synthetic benchmarks use the in-memory one, so most loader tests need no files.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "shoplens/data/sample_source.h"
#include "shoplens/data/shard_format.h"

namespace shoplens {

struct SampleRef {
  const std::uint8_t* data = nullptr;  // valid as long as the source lives
  std::size_t size = 0;
  int height = 0;
  int width = 0;
  PayloadEncoding encoding = PayloadEncoding::kJpeg;
  int label = 0;
  std::uint64_t sample_id = 0;
};

class ImageSource : public SampleSource {
 public:
  virtual SampleRef sample(std::size_t index) const = 0;
  int label(std::size_t index) const override { return sample(index).label; }
  std::uint64_t sample_id(std::size_t index) const override { return sample(index).sample_id; }
};

// The samples rank, rank + world_size, rank + 2 world_size, ... of `base`: each rank's share of an
// evaluation split, every sample in exactly one share and none padded in twice.
class StridedImageSource : public ImageSource {
 public:
  StridedImageSource(std::shared_ptr<const ImageSource> base, int rank, int world_size)
      : base_(std::move(base)), rank_(rank), world_(world_size) {}
  std::size_t size() const override {
    const std::size_t n = base_->size();
    return n > static_cast<std::size_t>(rank_) ? (n - rank_ + world_ - 1) / world_ : 0;
  }
  SampleRef sample(std::size_t index) const override { return base_->sample(rank_ + index * world_); }
  int num_classes() const override { return base_->num_classes(); }

 private:
  std::shared_ptr<const ImageSource> base_;
  int rank_, world_;
};

// Holds payloads in memory; `add_raw` stores RGB pixels as they are.
class InMemoryImageSource : public ImageSource {
 public:
  explicit InMemoryImageSource(int num_classes) : num_classes_(num_classes) {}
  void add(std::vector<std::uint8_t> payload, int height, int width, PayloadEncoding encoding, int label);
  std::size_t size() const override { return samples_.size(); }
  SampleRef sample(std::size_t index) const override;
  int num_classes() const override { return num_classes_; }

 private:
  struct Stored {
    std::vector<std::uint8_t> payload;
    int height, width;
    PayloadEncoding encoding;
    int label;
  };
  int num_classes_;
  std::vector<Stored> samples_;
};

}  // namespace shoplens
