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
