#include "serve/connection_parking.h"

#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdint>

#include "shoplens/core/errors.h"

namespace shoplens::serve {
namespace {

using std::chrono::milliseconds;

// The longest the thread sleeps without looking at the drain cutoff (which no event announces).
constexpr milliseconds kPollSlice{50};
constexpr int kEventsPerWait = 64;

}  // namespace

void close_socket(int fd) {
  ::shutdown(fd, SHUT_RDWR);
  ::close(fd);
}

std::size_t end_of_headers(const std::string& bytes, std::size_t from) {
  if (from >= bytes.size()) return std::string::npos;
  const std::size_t crlf = bytes.find("\r\n\r\n", from);
  const std::size_t lf = bytes.find("\n\n", from);
  if (crlf == std::string::npos && lf == std::string::npos) return std::string::npos;
  if (lf == std::string::npos || (crlf != std::string::npos && crlf < lf)) return crlf + 4;
  return lf + 2;
}

std::size_t declared_body_length(std::string_view header_section) {
  const RequestFraming framing = read_request_framing(header_section);
  if (!framing.ok() || framing.expects_continue || framing.body == BodyFraming::kChunked) return std::string::npos;
  if (framing.body == BodyFraming::kNone) return 0;
  return framing.length <= kLongestParkedLength ? static_cast<std::size_t>(framing.length) : std::string::npos;
}

ConnectionParking::ConnectionParking(ParkingLimits limits, std::function<void(WaitingConnection)> ready,
                                     const std::atomic<ParkingClock::rep>& drain_cutoff)
    : limits_(limits), ready_(std::move(ready)), drain_cutoff_(drain_cutoff) {}

ConnectionParking::~ConnectionParking() { stop(); }

void ConnectionParking::start() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (started_ || stopped_) return;
  epoll_fd_ = ::epoll_create1(EPOLL_CLOEXEC);
  wake_fd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (epoll_fd_ < 0 || wake_fd_ < 0) throw IoError("serve: cannot create the connection poller (epoll, eventfd)");
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.fd = wake_fd_;
  ::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, wake_fd_, &ev);
  started_ = true;
  thread_ = std::thread([this] { run(); });
}

void ConnectionParking::stop() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (stopped_) return;
    stopped_ = true;
  }
  if (wake_fd_ >= 0) {
    const std::uint64_t one = 1;
    [[maybe_unused]] const auto n = ::write(wake_fd_, &one, sizeof one);
  }
  if (thread_.joinable()) thread_.join();
  for (auto& [fd, entry] : entries_) close_socket(fd);
  for (auto& entry : arrivals_) close_socket(entry.connection.fd);
  entries_.clear();
  arrivals_.clear();
  waiting_ = 0;
  if (epoll_fd_ >= 0) ::close(epoll_fd_);
  if (wake_fd_ >= 0) ::close(wake_fd_);
  epoll_fd_ = wake_fd_ = -1;
}

void ConnectionParking::park(WaitingConnection connection) {
  if (!connection.received.empty() && connection.first_byte == ParkingClock::time_point{})
    connection.first_byte = ParkingClock::now();
  const int fd = connection.fd;
  if (!hand_to_thread(Entry{std::move(connection), ParkingClock::now(), false})) close_socket(fd);
}

void ConnectionParking::close_gracefully(int fd) {
  ::shutdown(fd, SHUT_WR);
  WaitingConnection connection;
  connection.fd = fd;
  if (!hand_to_thread(Entry{std::move(connection), ParkingClock::now(), true})) ::close(fd);
}

bool ConnectionParking::hand_to_thread(Entry entry) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (stopped_ || !started_) return false;
  arrivals_.push_back(std::move(entry));
  const std::uint64_t one = 1;
  [[maybe_unused]] const auto n = ::write(wake_fd_, &one, sizeof one);
  return true;
}

void ConnectionParking::run() {
  std::array<epoll_event, kEventsPerWait> events{};
  for (;;) {
    const int n = ::epoll_wait(epoll_fd_, events.data(), kEventsPerWait, wait_ms(ParkingClock::now()));
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (stopped_) return;
    }
    for (int i = 0; i < n; ++i) {
      if (events[i].data.fd == wake_fd_)
        take_arrivals();
      else
        on_readable(events[i].data.fd);
    }
    expire(ParkingClock::now());
  }
}

void ConnectionParking::take_arrivals() {
  std::uint64_t count = 0;
  [[maybe_unused]] const auto n = ::read(wake_fd_, &count, sizeof count);
  std::vector<Entry> arrived;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    arrived.swap(arrivals_);
  }
  for (auto& entry : arrived) {
    const int fd = entry.connection.fd;
    const bool lingering = entry.lingering;
    if (!add(std::move(entry)) || lingering) continue;
    // Pipelined requests: the next one may be here already (epoll reports only new bytes).
    keep_waiting(fd, entries_.at(fd), 0);
  }
}

bool ConnectionParking::add(Entry entry) {
  while (!entries_.empty() && entries_.size() >= limits_.max_connections) evict_one();
  const int fd = entry.connection.fd;
  epoll_event ev{};
  ev.events = EPOLLIN | EPOLLRDHUP;
  ev.data.fd = fd;
  if (::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev) != 0) {
    close_socket(fd);
    return false;
  }
  buffered_bytes_ += entry.connection.received.size();
  entries_.emplace(fd, std::move(entry));
  waiting_ = entries_.size();
  return true;
}

// Room for a newcomer: a closing connection if there is one, else the one parked longest ago
// (whatever it is waiting for, it has had the most time).
void ConnectionParking::evict_one() {
  auto victim = entries_.begin();
  for (auto it = entries_.begin(); it != entries_.end(); ++it) {
    if (it->second.lingering != victim->second.lingering) {
      if (it->second.lingering) victim = it;
      continue;
    }
    if (it->second.parked_at < victim->second.parked_at) victim = it;
  }
  if (!victim->second.lingering) ++evicted_;
  drop(victim->first);
}

void ConnectionParking::on_readable(int fd) {
  const auto it = entries_.find(fd);
  if (it == entries_.end()) return;
  Entry& entry = it->second;
  for (;;) {
    const ssize_t got = ::recv(fd, chunk_.data(), chunk_.size(), MSG_DONTWAIT);
    if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return;
    if (got <= 0) return drop(fd);  // the client closed (or the connection broke) between requests
    if (entry.lingering) continue;
    std::string& received = entry.connection.received;
    const std::size_t scan_from = received.size() >= 3 ? received.size() - 3 : 0;
    if (received.empty()) entry.connection.first_byte = ParkingClock::now();
    received.append(chunk_.data(), static_cast<std::size_t>(got));
    buffered_bytes_ += static_cast<std::size_t>(got);
    if (!keep_waiting(fd, entry, scan_from)) return;
  }
}

bool ConnectionParking::keep_waiting(int fd, Entry& entry, std::size_t scan_from) {
  const std::string& received = entry.connection.received;
  if (entry.request_bytes == 0) {
    const std::size_t headers_end = end_of_headers(received, scan_from);
    if (headers_end == std::string::npos) {
      if (received.size() < limits_.max_header_bytes) return true;
      hand_over(fd, false);  // the worker refuses what cpp-httplib would
      return false;
    }
    const std::size_t body = declared_body_length(std::string_view(received).substr(0, headers_end));
    if (body == std::string::npos || body == 0 || body > limits_.max_body_bytes) {
      hand_over(fd, false);
      return false;
    }
    entry.request_bytes = headers_end + body;
    entry.connection.body_deadline = ParkingClock::now() + limits_.body;
  }
  if (received.size() < entry.request_bytes && buffered_bytes_ <= limits_.max_buffered_bytes) return true;
  hand_over(fd, false);  // the whole request, or no room left to hold its body: a worker reads on
  return false;
}

ParkingClock::time_point ConnectionParking::deadline_of(const Entry& e) const {
  ParkingClock::time_point own;
  if (e.lingering)
    own = e.parked_at + limits_.linger;
  else if (e.request_bytes > 0)
    own = e.connection.body_deadline;
  else if (e.connection.received.empty())
    own = e.parked_at + limits_.idle;
  else
    own = e.connection.first_byte + limits_.header;
  return std::min(own, from_ticks(drain_cutoff_.load()));
}

void ConnectionParking::expire(ParkingClock::time_point now) {
  std::vector<int> late;
  for (const auto& [fd, entry] : entries_)
    if (deadline_of(entry) <= now) late.push_back(fd);
  const bool draining = from_ticks(drain_cutoff_.load()) <= now;
  for (const int fd : late) {
    const Entry& entry = entries_.at(fd);
    // A late request gets its 408 from a worker; idle, closing or drained connections just close.
    if (!draining && !entry.lingering && !entry.connection.received.empty())
      hand_over(fd, /*late headers=*/entry.request_bytes == 0);
    else
      drop(fd);
  }
}

int ConnectionParking::wait_ms(ParkingClock::time_point now) const {
  auto until = now + kPollSlice;
  for (const auto& [fd, entry] : entries_) until = std::min(until, deadline_of(entry));
  if (until <= now) return 0;
  return static_cast<int>(std::chrono::ceil<milliseconds>(until - now).count());
}

void ConnectionParking::hand_over(int fd, bool late) {
  const auto it = entries_.find(fd);
  if (it == entries_.end()) return;  // closed when it was added (epoll refused it)
  ::epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, fd, nullptr);
  WaitingConnection connection = std::move(it->second.connection);
  buffered_bytes_ -= connection.received.size();
  entries_.erase(it);
  waiting_ = entries_.size();
  connection.header_deadline_passed = late;
  ready_(std::move(connection));
}

void ConnectionParking::drop(int fd) {
  ::epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, fd, nullptr);
  const auto it = entries_.find(fd);
  if (it != entries_.end()) {
    buffered_bytes_ -= it->second.connection.received.size();
    entries_.erase(it);
  }
  waiting_ = entries_.size();
  close_socket(fd);
}

}  // namespace shoplens::serve
