// cpp-httplib is compiled with Debian's build flags here too (src/CMakeLists.txt).
#include "serve/http_connection.h"

#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>

namespace shoplens::serve {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

// How often a blocked read looks at the drain cutoff.
constexpr milliseconds kPollSlice{50};
// Writes: the answer is small JSON; a client that does not read it for this long is dropped.
constexpr milliseconds kWriteTimeout{5000};
// After an answer to a request whose body was not read, the input is read and dropped for up to
// this long before closing: closing with unread input sends a reset, which can destroy the answer
// (a 413) before the client has read it.
constexpr milliseconds kLingerLimit{1000};

Clock::time_point from_ticks(Clock::rep ticks) { return Clock::time_point(Clock::duration(ticks)); }

void ip_and_port(const sockaddr_storage& addr, socklen_t len, std::string& ip, int& port) {
  if (addr.ss_family == AF_INET)
    port = ntohs(reinterpret_cast<const sockaddr_in*>(&addr)->sin_port);
  else if (addr.ss_family == AF_INET6)
    port = ntohs(reinterpret_cast<const sockaddr_in6*>(&addr)->sin6_port);
  else
    return;
  std::array<char, NI_MAXHOST> host{};
  if (getnameinfo(reinterpret_cast<const sockaddr*>(&addr), len, host.data(), host.size(), nullptr, 0,
                  NI_NUMERICHOST) == 0)
    ip = host.data();
}

// Waits until `fd` has `events`, a deadline passes (false) or the socket fails (false).
bool wait_for(int fd, short events, Clock::time_point until, const std::atomic<Clock::rep>& cutoff) {
  for (;;) {
    const auto limit = std::min(until, from_ticks(cutoff.load()));
    const auto now = Clock::now();
    if (now >= limit) return false;
    const auto slice = std::min<Clock::duration>(limit - now, kPollSlice);
    pollfd p{fd, events, 0};
    const int n = ::poll(&p, 1, static_cast<int>(std::chrono::ceil<milliseconds>(slice).count()));
    if (n > 0) return true;
    if (n < 0 && errno != EINTR) return false;
  }
}

// One connection's socket as httplib reads and writes it: buffered reads that end at the current
// deadline. The buffer lives as long as the connection, so pipelined requests are not lost.
class DeadlineStream : public httplib::Stream {
 public:
  DeadlineStream(int fd, const std::atomic<Clock::rep>& cutoff) : fd_(fd), cutoff_(cutoff) {}
  void set_deadline(Clock::time_point t) {
    deadline_ = t;
    deadline_passed_ = false;
  }
  bool deadline_passed() const { return deadline_passed_; }
  bool has_buffered() const { return off_ < size_; }
  bool wait_readable(Clock::time_point until) const { return has_buffered() || wait_for(fd_, POLLIN, until, cutoff_); }

  bool is_readable() const override { return wait_readable(deadline_); }
  bool is_writable() const override { return wait_for(fd_, POLLOUT, Clock::now() + kWriteTimeout, no_cutoff_); }

  ssize_t read(char* ptr, std::size_t n) override {
    if (!has_buffered()) {
      if (!is_readable()) {
        deadline_passed_ = true;
        return -1;
      }
      const ssize_t got = ::recv(fd_, buffer_.data(), buffer_.size(), 0);
      if (got <= 0) return got;
      off_ = 0;
      size_ = static_cast<std::size_t>(got);
    }
    const std::size_t take = std::min(n, size_ - off_);
    std::memcpy(ptr, buffer_.data() + off_, take);
    off_ += take;
    return static_cast<ssize_t>(take);
  }
  ssize_t write(const char* ptr, std::size_t n) override {
    if (!is_writable()) return -1;
    return ::send(fd_, ptr, n, MSG_NOSIGNAL);
  }
  void get_remote_ip_and_port(std::string& ip, int& port) const override {
    sockaddr_storage addr{};
    socklen_t len = sizeof addr;
    if (::getpeername(fd_, reinterpret_cast<sockaddr*>(&addr), &len) == 0) ip_and_port(addr, len, ip, port);
  }
  void get_local_ip_and_port(std::string& ip, int& port) const override {
    sockaddr_storage addr{};
    socklen_t len = sizeof addr;
    if (::getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len) == 0) ip_and_port(addr, len, ip, port);
  }
  socket_t socket() const override { return fd_; }

 private:
  int fd_;
  const std::atomic<Clock::rep>& cutoff_;
  const std::atomic<Clock::rep> no_cutoff_{Clock::time_point::max().time_since_epoch().count()};
  Clock::time_point deadline_ = Clock::time_point::max();
  bool deadline_passed_ = false;
  std::array<char, 4096> buffer_{};
  std::size_t off_ = 0, size_ = 0;
};

// What handlers may change about the connection whose request they handle.
struct ConnectionState {
  DeadlineStream* stream = nullptr;
  milliseconds body_timeout{0};
  bool close_after_response = false;
};
thread_local ConnectionState* current = nullptr;

// Closes after dropping what the client still sends (bounded), so the answer arrives first.
void linger_and_close(int fd, const std::atomic<Clock::rep>& cutoff) {
  ::shutdown(fd, SHUT_WR);
  const auto until = Clock::now() + kLingerLimit;
  char sink[4096];
  while (wait_for(fd, POLLIN, until, cutoff) && ::recv(fd, sink, sizeof sink, 0) > 0) {}
  ::close(fd);
}

}  // namespace

DeadlineServer::DeadlineServer(ReadDeadlines deadlines)
    : deadlines_(deadlines), drain_cutoff_(Clock::time_point::max().time_since_epoch().count()) {}

void DeadlineServer::begin_drain(milliseconds grace) {
  const auto cutoff = (Clock::now() + grace).time_since_epoch().count();
  // Never later than a cutoff already set.
  auto seen = drain_cutoff_.load();
  while (cutoff < seen && !drain_cutoff_.compare_exchange_weak(seen, cutoff)) {}
}

void DeadlineServer::headers_received() {
  if (current != nullptr) current->stream->set_deadline(Clock::now() + current->body_timeout);
}

void DeadlineServer::close_after_response() {
  if (current != nullptr) current->close_after_response = true;
}

bool DeadlineServer::deadline_passed() { return current != nullptr && current->stream->deadline_passed(); }

// httplib's loop (detail::process_server_socket) with this file's stream and deadlines.
bool DeadlineServer::process_and_close_socket(socket_t sock) {
  DeadlineStream stream(sock, drain_cutoff_);
  ConnectionState state{&stream, deadlines_.body, false};
  current = &state;
  bool ok = false;
  for (std::size_t served = 0; served < keep_alive_max_count_ && svr_sock_ != INVALID_SOCKET; ++served) {
    if (!stream.wait_readable(Clock::now() + deadlines_.idle)) break;
    stream.set_deadline(Clock::now() + deadlines_.header);
    bool closed = false;
    ok = process_request(stream, served + 1 == keep_alive_max_count_, closed, nullptr);
    if (!ok || closed || state.close_after_response) break;
  }
  current = nullptr;
  if (state.close_after_response) {
    linger_and_close(sock, drain_cutoff_);
  } else {
    ::shutdown(sock, SHUT_RDWR);
    ::close(sock);
  }
  return ok;
}

}  // namespace shoplens::serve
