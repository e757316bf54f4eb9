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
#include <string_view>

#include "serve/request_framing.h"

namespace shoplens::serve {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

// How often a blocked read looks at the drain cutoff.
constexpr milliseconds kPollSlice{50};
// Writes: the answer is small JSON; a client that does not read it for this long is dropped.
constexpr milliseconds kWriteTimeout{5000};
// What all waiting connections may hold of their requests together (at least two of the largest
// bodies): past it, a body is read on a worker's thread, as before the parking.
constexpr std::size_t kParkedBytesAtLeast = 64u << 20;

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
// deadline. It starts with the bytes the connection's parking read, and what it has read past the
// end of a request goes back there with the connection, so pipelined requests are not lost.
class DeadlineStream : public httplib::Stream {
 public:
  DeadlineStream(int fd, const std::atomic<Clock::rep>& cutoff, std::string received)
      : fd_(fd), cutoff_(cutoff), buffer_(std::move(received)) {}
  void set_deadline(Clock::time_point t) {
    deadline_ = t;
    deadline_passed_ = false;
  }
  bool deadline_passed() const { return deadline_passed_; }
  bool has_buffered() const { return off_ < buffer_.size(); }
  std::size_t buffered() const { return buffer_.size() - off_; }
  bool holds_next_headers() const { return holds_complete_headers(buffer_, off_); }
  // The next request's head (request line to blank line) once buffered, else empty.
  std::string_view next_head() const {
    const std::size_t end = end_of_headers(buffer_, off_);
    return end == std::string::npos ? std::string_view() : std::string_view(buffer_).substr(off_, end - off_);
  }
  // Reads until the next request's head is buffered: false when `limit` bytes came without its end,
  // the deadline passed or the connection ended first.
  bool buffer_head(std::size_t limit) {
    while (!holds_next_headers()) {
      if (buffered() >= limit || !wait_for(fd_, POLLIN, deadline_, cutoff_)) return false;
      std::array<char, kReadChunk> chunk{};
      const ssize_t got = ::recv(fd_, chunk.data(), chunk.size(), 0);
      if (got <= 0) return false;
      buffer_.erase(0, off_);
      off_ = 0;
      buffer_.append(chunk.data(), static_cast<std::size_t>(got));
    }
    return true;
  }
  // The request about to be read has a head of `head_bytes` and this framing: a chunked body is
  // checked as httplib reads it (a read that would break the grammar fails instead).
  void begin_request(const RequestFraming& framing, std::size_t head_bytes) {
    consumed_ = 0;
    head_bytes_ = head_bytes;
    chunked_ = framing.body == BodyFraming::kChunked;
    chunks_ = ChunkedBodyChecker();
  }
  // Why the chunked body was refused; empty when it was not.
  const std::string& body_fault() const { return chunks_.fault(); }
  std::string take_buffered() {
    std::string rest = buffer_.substr(off_);
    buffer_.clear();
    off_ = 0;
    return rest;
  }
  bool wait_readable(Clock::time_point until) const { return has_buffered() || wait_for(fd_, POLLIN, until, cutoff_); }

  bool is_readable() const override { return wait_readable(deadline_); }
  bool is_writable() const override { return wait_for(fd_, POLLOUT, Clock::now() + kWriteTimeout, no_cutoff_); }

  ssize_t read(char* ptr, std::size_t n) override {
    if (!has_buffered()) {
      if (!is_readable()) {
        deadline_passed_ = true;
        return -1;
      }
      buffer_.resize(kReadChunk);
      const ssize_t got = ::recv(fd_, buffer_.data(), buffer_.size(), 0);
      buffer_.resize(got > 0 ? static_cast<std::size_t>(got) : 0);
      off_ = 0;
      if (got <= 0) return got;
    }
    const std::size_t take = checked(std::min(n, buffer_.size() - off_));
    if (take == 0) return -1;  // the chunked body broke its grammar
    std::memcpy(ptr, buffer_.data() + off_, take);
    off_ += take;
    consumed_ += take;
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
  // How many of the `n` buffered bytes at off_ httplib may take: the chunked body's bytes only as
  // far as they keep its grammar (0 once broken), and none past its end.
  std::size_t checked(std::size_t n) {
    if (!chunked_ || chunks_.done()) return n;
    if (chunks_.failed()) return 0;
    const std::size_t head_part = consumed_ < head_bytes_ ? std::min(n, head_bytes_ - consumed_) : 0;
    const std::size_t body_part = chunks_.feed(buffer_.data() + off_ + head_part, n - head_part);
    return chunks_.failed() ? 0 : head_part + body_part;
  }

  int fd_;
  const std::atomic<Clock::rep>& cutoff_;
  const std::atomic<Clock::rep> no_cutoff_{Clock::time_point::max().time_since_epoch().count()};
  Clock::time_point deadline_ = Clock::time_point::max();
  bool deadline_passed_ = false;
  static constexpr std::size_t kReadChunk = 4096;
  std::string buffer_;
  std::size_t off_ = 0;
  // The request being read: bytes taken so far, its head's size, its chunked body's check.
  std::size_t consumed_ = 0;
  std::size_t head_bytes_ = 0;
  bool chunked_ = false;
  ChunkedBodyChecker chunks_;
};

const char* reason_phrase(int status) {
  switch (status) {
    case 400:
      return "Bad Request";
    case 431:
      return "Request Header Fields Too Large";
    case 501:
      return "Not Implemented";
    default:
      return "Error";
  }
}

// Answers a request refused before httplib reads it, with Connection: close; false, for admit.
bool refuse(DeadlineStream& stream, const DeadlineServer::EarlyAnswer& early_answer, int status,
            const std::string& why) {
  const std::string body = early_answer ? early_answer(status, why) : why;
  std::string out = "HTTP/1.1 " + std::to_string(status) + " " + reason_phrase(status) +
                    "\r\nContent-Type: " + (early_answer ? "application/json" : "text/plain") +
                    "\r\nContent-Length: " + std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n" + body;
  for (std::size_t sent = 0; sent < out.size();) {
    const ssize_t n = stream.write(out.data() + sent, out.size() - sent);
    if (n <= 0) break;
    sent += static_cast<std::size_t>(n);
  }
  return false;
}

// The next request's head against the framing rules (request_framing.h), before httplib reads it.
// False when it is refused: the answer is written and the connection must close.
bool admit(DeadlineStream& stream, const DeadlineServer::EarlyAnswer& early_answer) {
  if (!stream.buffer_head(kMaxRequestHeadBytes)) {
    stream.begin_request(RequestFraming(), 0);
    // Late, or the client left: httplib reads what came, its next read fails, and it answers 408
    // (or nothing). No request is read from such a head.
    if (stream.buffered() < kMaxRequestHeadBytes) return true;
    return refuse(stream, early_answer, 431,
                  "the request head is larger than " + std::to_string(kMaxRequestHeadBytes) + " bytes");
  }
  const std::string_view head = stream.next_head();
  const RequestFraming framing = read_request_framing(head);
  if (!framing.ok()) return refuse(stream, early_answer, framing.status, framing.fault);
  stream.begin_request(framing, head.size());
  return true;
}

// What handlers may change about the connection whose request they handle.
struct ConnectionState {
  DeadlineStream* stream = nullptr;
  milliseconds body_timeout{0};
  // The body of a request whose headers were read in the parking is due by then at the latest.
  Clock::time_point body_deadline_cap = Clock::time_point::max();
  bool close_after_response = false;
};
thread_local ConnectionState* current = nullptr;

}  // namespace

// httplib's pool, and the parking beside it: the parking stops (closing every waiting connection)
// before the pool's threads are joined, so nothing is handed to a pool that is gone.
class DeadlineServer::Pool : public httplib::TaskQueue {
 public:
  Pool(std::size_t threads, ConnectionParking& parking) : threads_(threads), parking_(parking) {}
  void enqueue(std::function<void()> fn) override { threads_.enqueue(std::move(fn)); }
  void shutdown() override {
    parking_.stop();
    threads_.shutdown();
  }

 private:
  httplib::ThreadPool threads_;
  ConnectionParking& parking_;
};

ParkingLimits DeadlineServer::parking_limits(ReadDeadlines deadlines, std::size_t max_waiting_connections,
                                             std::size_t max_body_bytes) {
  ParkingLimits limits;
  limits.idle = deadlines.idle;
  limits.header = deadlines.header;
  limits.body = deadlines.body;
  limits.max_connections = max_waiting_connections;
  limits.max_body_bytes = max_body_bytes;
  limits.max_buffered_bytes = std::max(kParkedBytesAtLeast, 2 * max_body_bytes);
  return limits;
}

DeadlineServer::DeadlineServer(ReadDeadlines deadlines, std::size_t threads, std::size_t max_waiting_connections,
                               std::size_t max_body_bytes)
    : deadlines_(deadlines),
      drain_cutoff_(Clock::time_point::max().time_since_epoch().count()),
      parking_(
          parking_limits(deadlines, max_waiting_connections, max_body_bytes),
          [this](WaitingConnection c) { pool_->enqueue([this, c = std::move(c)]() mutable { serve(std::move(c)); }); },
          drain_cutoff_) {
  new_task_queue = [this, threads] {
    auto* pool = new Pool(std::max<std::size_t>(threads, 1), parking_);
    pool_ = pool;
    parking_.start();
    return pool;
  };
}

DeadlineServer::~DeadlineServer() { parking_.stop(); }

void DeadlineServer::widen_listen_backlog() {
  // Listening again on a listening socket changes its backlog (capped by net.core.somaxconn).
  if (svr_sock_ != INVALID_SOCKET) ::listen(svr_sock_, SOMAXCONN);
}

void DeadlineServer::begin_drain(milliseconds grace) {
  const auto cutoff = (Clock::now() + grace).time_since_epoch().count();
  // Never later than a cutoff already set.
  auto seen = drain_cutoff_.load();
  while (cutoff < seen && !drain_cutoff_.compare_exchange_weak(seen, cutoff)) {}
}

void DeadlineServer::headers_received() {
  if (current == nullptr) return;
  current->stream->set_deadline(std::min(Clock::now() + current->body_timeout, current->body_deadline_cap));
  current->body_deadline_cap = Clock::time_point::max();  // a later request on the connection: its own
}

void DeadlineServer::close_after_response() {
  if (current != nullptr) current->close_after_response = true;
}

bool DeadlineServer::deadline_passed() { return current != nullptr && current->stream->deadline_passed(); }

std::string DeadlineServer::body_fault() { return current != nullptr ? current->stream->body_fault() : std::string(); }

// A new connection waits for its first request off the pool.
bool DeadlineServer::process_and_close_socket(socket_t sock) {
  parking_.park(WaitingConnection{sock, {}, 0, {}, false});
  return true;
}

// httplib's loop (detail::process_server_socket) for requests whose headers are in: a connection
// goes back to the parking as soon as the next request is not. Each request's head is checked
// before httplib reads it; a refused one is answered here and its connection closed.
void DeadlineServer::serve(WaitingConnection connection) {
  const int fd = connection.fd;
  DeadlineStream stream(fd, drain_cutoff_, std::move(connection.received));
  ConnectionState state{&stream, deadlines_.body, connection.body_deadline, false};
  current = &state;
  // Late headers: the bytes that came are read, then the next read fails as past its deadline (408).
  stream.set_deadline(connection.header_deadline_passed ? Clock::now() : connection.first_byte + deadlines_.header);
  for (std::size_t served = connection.served;;) {
    if (!admit(stream, early_answer_)) {
      state.close_after_response = true;
      break;
    }
    bool closed = false;
    const bool ok = process_request(stream, served + 1 >= keep_alive_max_count_, closed, nullptr);
    ++served;
    if (!ok || closed || state.close_after_response || served >= keep_alive_max_count_ || svr_sock_ == INVALID_SOCKET)
      break;
    if (!stream.holds_next_headers()) {
      current = nullptr;
      return parking_.park(WaitingConnection{fd, stream.take_buffered(), served, {}, false});
    }
    stream.set_deadline(Clock::now() + deadlines_.header);
  }
  current = nullptr;
  if (state.close_after_response) return parking_.close_gracefully(fd);
  close_socket(fd);
}

}  // namespace shoplens::serve
