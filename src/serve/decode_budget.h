// The server's budget of decoded pixels in flight. Each HTTP thread decodes its own request, and a
// small file can declare a large image (a 97 KB PNG of 9990 x 9990 decodes to 300 MB): with no
// bound, memory grew with the number of such requests at once (2.55 GB for 8 of them, 12.5x the
// ready server). A request reserves the bytes its decoder is about to allocate (the image header's
// size, DecodeOptions::before_allocating) before anything is allocated, and gives them back once
// its image is preprocessed. An image larger than the whole budget is refused (422); one that does
// not fit beside the images already in flight waits for room, and past the wait gets 503 with
// Retry-After.
//
// Plain C++ (a mutex and a condition variable), unit-tested in tests/unit/test_decode_budget.cpp.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>

#include "shoplens/core/errors.h"

namespace shoplens::serve {

// No room to decode now: the answer is 503 with Retry-After.
class DecodeBudgetBusy : public Error {
 public:
  using Error::Error;
};

class DecodeBudget {
 public:
  static constexpr std::uint64_t kUnlimited = UINT64_MAX;

  explicit DecodeBudget(std::chrono::milliseconds max_wait, std::uint64_t capacity_bytes = kUnlimited)
      : max_wait_(max_wait), capacity_(capacity_bytes) {}
  // The automatic budget is known once the server is ready (half its peak resident memory).
  void set_capacity(std::uint64_t bytes);
  std::uint64_t capacity() const;
  std::uint64_t in_use() const;

  // One request's share, given back when it goes out of scope.
  class Reservation {
   public:
    explicit Reservation(DecodeBudget& budget) : budget_(budget) {}
    ~Reservation() { budget_.release(held_); }
    Reservation(const Reservation&) = delete;
    Reservation& operator=(const Reservation&) = delete;
    // Takes `bytes` more, waiting until they fit beside every other share. DataError when they
    // are more than the whole budget (they never fit), DecodeBudgetBusy when the wait ran out.
    void add(std::uint64_t bytes);

   private:
    DecodeBudget& budget_;
    std::uint64_t held_ = 0;
  };

 private:
  void acquire(std::uint64_t bytes, std::uint64_t already_held);
  void release(std::uint64_t bytes);

  const std::chrono::milliseconds max_wait_;
  mutable std::mutex mutex_;
  std::condition_variable freed_;
  std::uint64_t capacity_;
  std::uint64_t in_use_ = 0;
};

}  // namespace shoplens::serve
