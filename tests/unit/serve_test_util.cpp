#include "serve_test_util.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <csignal>
#include <cstdlib>

namespace shoplens::testing {
namespace {

using Clock = std::chrono::steady_clock;

Clock::time_point after(double seconds) {
  return Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
}

int ms_until(Clock::time_point deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return left < 0 ? 0 : static_cast<int>(left);
}

// Two classes; every image gets the same probabilities.
serve::BatchTiming fake_model(const std::vector<const std::vector<float>*>& inputs,
                              std::vector<std::vector<float>>& outputs) {
  for (std::size_t i = 0; i < inputs.size(); ++i) outputs[i] = {0.25f, 0.75f};
  return {};
}

// What a fake_png_decoding body asks the fake preprocessor to do.
struct FakeDecode {
  unsigned long long bytes = 0;
  int hold_ms = 0;
};
FakeDecode fake_decode_of(const std::uint8_t* data, std::size_t size) {
  FakeDecode d;
  const std::string body(reinterpret_cast<const char*>(data), size);
  const auto at = body.find(" reserve=");
  if (at != std::string::npos) std::sscanf(body.c_str() + at, " reserve=%llu hold_ms=%d", &d.bytes, &d.hold_ms);
  return d;
}

}  // namespace

std::string fake_png() { return std::string("\x89PNG\r\n\x1a\n", 8) + "pixels"; }

serve::FrontendOptions small_limits() {
  serve::FrontendOptions o;
  o.http_threads = 4;
  o.max_body_bytes = 4096;
  return o;
}

std::string fake_png_decoding(std::uint64_t bytes, int hold_ms) {
  return fake_png() + " reserve=" + std::to_string(bytes) + " hold_ms=" + std::to_string(hold_ms);
}

InProcessServer::InProcessServer(serve::FrontendOptions options) {
  // The frontend writes to sockets whose clients may be gone; run_server ignores SIGPIPE too.
  std::signal(SIGPIPE, SIG_IGN);
  serve::BatcherOptions bo;
  bo.max_batch = 4;
  bo.max_queue_delay_ms = 0;
  batcher_ = std::make_unique<serve::MicroBatcher>(bo, fake_model, serve::steady_now, &metrics_);
  batcher_->start();
  options.port = 0;
  frontend_ = std::make_unique<serve::HttpFrontend>(
      options, *batcher_, metrics_,
      [](const std::uint8_t* data, std::size_t size, const serve::PixelReservation& reserve) {
        const FakeDecode decode = fake_decode_of(data, size);
        if (decode.bytes > 0) reserve(decode.bytes);
        std::this_thread::sleep_for(std::chrono::milliseconds(decode.hold_ms));
        return std::vector<float>{1.0f};
      },
      std::vector<std::string>{"ok", "blurry"});
  port_ = frontend_->start();
  frontend_->set_ready(true);
}

InProcessServer::~InProcessServer() { drain_and_stop(); }

void InProcessServer::drain_and_stop() {
  if (stopped_) return;
  stopped_ = true;
  frontend_->begin_drain();
  batcher_->drain_and_stop();
  frontend_->wait_idle(30.0);
  frontend_->stop();
}

RawConnection::RawConnection(int port) {
  fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<std::uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (fd_ >= 0 && ::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    ::close(fd_);
    fd_ = -1;
  }
}

RawConnection::~RawConnection() {
  if (fd_ >= 0) ::close(fd_);
}

bool RawConnection::send(const std::string& bytes) {
  std::size_t sent = 0;
  while (fd_ >= 0 && sent < bytes.size()) {
    const ssize_t n = ::send(fd_, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    sent += static_cast<std::size_t>(n);
  }
  return fd_ >= 0;
}

RawReply RawConnection::read_reply(double timeout_s) {
  const auto deadline = after(timeout_s);
  RawReply reply;
  std::string& in = pending_;
  std::size_t body_size = std::string::npos;
  for (;;) {
    const auto head_end = in.find("\r\n\r\n");
    if (head_end != std::string::npos && body_size == std::string::npos) {
      reply.head = in.substr(0, head_end + 2);
      if (reply.head.rfind("HTTP/1.", 0) == 0 && reply.head.size() > 12)
        reply.status = std::atoi(reply.head.c_str() + 9);
      const auto at = reply.head.find("Content-Length: ");
      body_size = at == std::string::npos ? 0 : std::strtoul(reply.head.c_str() + at + 16, nullptr, 10);
      in.erase(0, head_end + 4);
    }
    if (body_size != std::string::npos && in.size() >= body_size) {
      reply.body = in.substr(0, body_size);
      in.erase(0, body_size);
      return reply;
    }
    pollfd p{fd_, POLLIN, 0};
    if (fd_ < 0 || ::poll(&p, 1, ms_until(deadline)) <= 0) break;
    char buf[4096];
    const ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
    if (n <= 0) break;
    in.append(buf, static_cast<std::size_t>(n));
  }
  if (body_size != std::string::npos) reply.body = in;  // cut short
  in.clear();
  return reply;
}

bool RawConnection::wait_closed_by_peer(double timeout_s) {
  const auto deadline = after(timeout_s);
  while (fd_ >= 0) {
    pollfd p{fd_, POLLIN, 0};
    const int ready = ::poll(&p, 1, ms_until(deadline));
    if (ready <= 0) return false;
    char buf[4096];
    const ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
    if (n == 0 || (n < 0 && errno != EINTR && errno != EAGAIN)) return true;
  }
  return false;
}

Dribbler::Dribbler(int port, std::string at_once, std::string bytes, std::chrono::milliseconds interval,
                   std::chrono::seconds give_up)
    : connection_(port) {
  thread_ = std::thread([this, at_once = std::move(at_once), bytes = std::move(bytes), interval, give_up] {
    run(at_once, bytes, interval, give_up);
  });
}

Dribbler::~Dribbler() {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
}

void Dribbler::run(const std::string& at_once, const std::string& bytes, std::chrono::milliseconds interval,
                   std::chrono::seconds give_up) {
  const auto until = Clock::now() + give_up;
  if (!connection_.connected()) {
    done_ = true;  // never connected: not a server's doing
    return;
  }
  if (!connection_.send(at_once)) {
    closed_by_server_ = true;
    done_ = true;
    return;
  }
  for (std::size_t i = 0; i < bytes.size() && !stop_ && Clock::now() < until; ++i) {
    if (!connection_.send(bytes.substr(i, 1))) {
      closed_by_server_ = true;
      break;
    }
    // Between bytes, notice the server hanging up (an answer it sends first is read and dropped).
    if (connection_.wait_closed_by_peer(std::chrono::duration<double>(interval).count())) {
      closed_by_server_ = true;
      break;
    }
  }
  done_ = true;
}

bool Dribbler::wait_closed_by_server(double timeout_s) {
  const auto deadline = after(timeout_s);
  while (!done_ && Clock::now() < deadline) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  return closed_by_server_;
}

std::string endless_headers(const std::string& request_line, std::size_t bytes) {
  std::string out = request_line + "\r\nHost: 127.0.0.1\r\n";
  for (int i = 0; out.size() < bytes; ++i) out += "X-Slow-" + std::to_string(i) + ": still sending\r\n";
  return out;
}

}  // namespace shoplens::testing
