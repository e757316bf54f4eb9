// A file descriptor closed when it goes out of scope (the readers that open files with O_NOFOLLOW
// and O_NONBLOCK: prepare's dataset files, serve's image root).
#pragma once

#include <unistd.h>

namespace shoplens {

class UniqueFd {
 public:
  explicit UniqueFd(int fd) : fd_(fd) {}
  ~UniqueFd() {
    if (fd_ >= 0) ::close(fd_);
  }
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

}  // namespace shoplens
