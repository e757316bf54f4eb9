#include "serve/decode_budget.h"

#include <cmath>
#include <string>

namespace shoplens::serve {
namespace {

std::string megabytes(std::uint64_t bytes) {
  return std::to_string(static_cast<std::uint64_t>(std::ceil(static_cast<double>(bytes) / (1 << 20)))) + " MB";
}

}  // namespace

void DecodeBudget::set_capacity(std::uint64_t bytes) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    capacity_ = bytes;
  }
  freed_.notify_all();
}

std::uint64_t DecodeBudget::capacity() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return capacity_;
}

std::uint64_t DecodeBudget::in_use() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return in_use_;
}

void DecodeBudget::acquire(std::uint64_t bytes, std::uint64_t already_held) {
  std::unique_lock<std::mutex> lock(mutex_);
  if (bytes > capacity_ || already_held > capacity_ - bytes)
    throw DataError("the image needs " + megabytes(already_held + bytes) +
                    " of pixel memory to decode, more than the server's decode budget of " + megabytes(capacity_) +
                    " (--decode-budget-mb)");
  const bool fits =
      freed_.wait_for(lock, max_wait_, [&] { return bytes <= capacity_ && in_use_ <= capacity_ - bytes; });
  if (!fits)
    throw DecodeBudgetBusy("no room to decode the image now: " + megabytes(in_use_) +
                           " of pixels are being decoded, the decode budget is " + megabytes(capacity_) +
                           " (--decode-budget-mb)");
  in_use_ += bytes;
}

void DecodeBudget::release(std::uint64_t bytes) {
  if (bytes == 0) return;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    in_use_ -= bytes;
  }
  freed_.notify_all();
}

void DecodeBudget::Reservation::add(std::uint64_t bytes) {
  budget_.acquire(bytes, held_);
  held_ += bytes;
}

}  // namespace shoplens::serve
