// What the loader, the samplers and the trainer need of a split whatever its kind (images, text):
// how many samples, their labels and their stable ids. Reading a sample's content is the
// kind-specific part (ImageSource, TextSource) and belongs to that kind's batch builder.
#pragma once

#include <cstddef>
#include <cstdint>

namespace shoplens {

class SampleSource {
 public:
  virtual ~SampleSource() = default;
  virtual std::size_t size() const = 0;
  virtual int label(std::size_t index) const = 0;
  virtual std::uint64_t sample_id(std::size_t index) const = 0;
  virtual int num_classes() const = 0;
};

}  // namespace shoplens
