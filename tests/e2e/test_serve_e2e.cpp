// End-to-end: the real `shoplens serve` on an ephemeral loopback port. Concurrent requests (image
// bytes and JSON paths) get the same predictions as `shoplens score` on the same files; bad input
// gets a 4xx and the server keeps serving; /metrics; 503 + Retry-After when the queue is full;
// 504 at the request timeout; SIGTERM drains: queued requests are answered and the process exits 0.
//
// No wall-clock assertions: the overload and drain cases hold requests in the queue with a long
// --max-queue-delay-ms and wait for /metrics to show them queued, so they cannot race.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <fstream>
#include <future>
#include <map>
#include <thread>

#include <nlohmann/json.hpp>

#include "image_test_util.h"
#include "sanitizer.h"
#include "scratch_suite.h"
#include "serve_test_util.h"
#include "shoplens/data/csv.h"
#include "shoplens/serve/http_client.h"
#include "test_util.h"

namespace shoplens {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using serve::http_request;
using serve::HttpReply;
using testing::run_shoplens;

// A `shoplens serve` child process; its output goes to a log file shown on failure.
class ServerProcess {
 public:
  ServerProcess(const std::string& args, const fs::path& dir, const std::string& name)
      : port_file_(dir / (name + ".port")), log_(dir / (name + ".log")) {
    fs::remove(port_file_);
    const std::string cmd = testing::shoplens_bin() + " serve --port 0 --port-file " + port_file_.string() + " " + args;
    pid_ = ::fork();
    if (pid_ == 0) {
      const int fd = ::open(log_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      ::dup2(fd, 1);
      ::dup2(fd, 2);
      ::execl("/bin/sh", "sh", "-c", ("exec " + cmd).c_str(), static_cast<char*>(nullptr));
      ::_exit(127);
    }
  }
  ~ServerProcess() {
    if (pid_ > 0 && !exited_) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
  }
  // Waits (generously: the machine may be busy) for the port file, then for /readyz.
  bool wait_ready(double timeout_s = 300) {
    const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
    while (std::chrono::steady_clock::now() < until) {
      if (port_ == 0 && fs::exists(port_file_)) {
        const std::string text = testing::read_text(port_file_);
        if (!text.empty() && text.back() == '\n') port_ = std::stoi(text);
      }
      if (port_ > 0 && get("/readyz").status == 200) return true;
      int status = 0;
      if (::waitpid(pid_, &status, WNOHANG) == pid_) {
        exited_ = true;
        return false;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return false;
  }
  HttpReply get(const std::string& path) const { return http_request("127.0.0.1", port_, "GET", path); }
  HttpReply post(const std::string& body, const std::string& type) const {
    return http_request("127.0.0.1", port_, "POST", "/v1/classify", body, type);
  }
  // Sends `sig` and waits for the exit code (-1: killed by a signal).
  int stop(int sig) {
    ::kill(pid_, sig);
    int status = 0;
    ::waitpid(pid_, &status, 0);
    exited_ = true;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }
  double metric(const std::string& name) const {
    const std::string text = get("/metrics").body;
    const auto at = text.find("\n" + name + " ");
    return at == std::string::npos ? -1 : std::stod(text.substr(at + name.size() + 2));
  }
  std::string log() const { return fs::exists(log_) ? testing::read_text(log_) : ""; }
  int port() const { return port_; }
  // The server's peak resident memory so far (VmHWM), in kB; 0 when unreadable.
  long peak_kb() const {
    std::ifstream status("/proc/" + std::to_string(pid_) + "/status");
    for (std::string line; std::getline(status, line);)
      if (line.rfind("VmHWM:", 0) == 0) return std::stol(line.substr(6));
    return 0;
  }

 private:
  fs::path port_file_, log_;
  pid_t pid_ = -1;
  int port_ = 0;
  bool exited_ = false;
};

std::string file_bytes(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

class E2eServe : public testing::ScratchSuite<E2eServe> {
 protected:
  static void SetUpTestSuite() {
    // The model and `shoplens score`'s answers on the catalog's files (the reference for the
    // server's), made once for every test process.
    fixture_ = testing::shared_fixture("serve", [](const fs::path& dir) {
      const std::string failed = testing::make_exported_model(dir, 60, 7);
      if (!failed.empty()) return failed;
      std::ofstream manifest(dir / "score.csv");
      manifest << "id,path\n";
      for (const auto& p : testing::catalog_image_paths(dir / "catalog"))
        manifest << p << "," << (dir / "catalog" / p).string() << "\n";
      manifest.close();
      auto scored =
          run_shoplens("score --weights " + (dir / "model").string() + " --input " + (dir / "score.csv").string() +
                       " --out " + (dir / "scores").string() + " -b 4 --workers 1 --threads 1");
      return scored.exit_code == 0 ? std::string() : scored.output;
    });
    const auto preds = parse_csv(testing::read_text(fixture_ / "scores" / "predictions.csv"));
    for (std::size_t c = 0; c < preds[0].fields.size(); ++c)
      if (preds[0].fields[c].rfind("p_", 0) == 0) classes_.push_back(preds[0].fields[c].substr(2));
    for (std::size_t r = 1; r < preds.size(); ++r) {
      const auto& f = preds[r].fields;
      if (f[2] != "ok") continue;
      Expected e;
      e.label = f[3];
      for (std::size_t k = 0; k < classes_.size(); ++k) e.probs.push_back(std::stod(f[5 + k]));
      expected_[f[1]] = e;
    }
    ASSERT_GE(expected_.size(), 20u);

    server_ = new ServerProcess(
        "--weights " + model().string() + " --image-root " + catalog().string() +
            " --max-batch 8 --max-queue-delay-ms 20 --max-body-bytes 200000 --threads 1 --warmup-reps 2",
        scratch().path(), "main");
    ASSERT_TRUE(server_->wait_ready()) << server_->log();
  }
  static void TearDownTestSuite() {
    if (server_ != nullptr) {
      // SIGTERM: a clean drain, exit 0.
      EXPECT_EQ(server_->stop(SIGTERM), 0) << server_->log();
      delete server_;
    }
    server_ = nullptr;
    ScratchSuite::TearDownTestSuite();
  }
  static fs::path model() { return fixture_ / "model"; }
  static fs::path catalog() { return fixture_ / "catalog"; }

  struct Expected {
    std::string label;
    std::vector<double> probs;
  };
  static fs::path fixture_;
  static ServerProcess* server_;
  static std::map<std::string, Expected> expected_;
  static std::vector<std::string> classes_;
};
fs::path E2eServe::fixture_;
ServerProcess* E2eServe::server_ = nullptr;
std::map<std::string, E2eServe::Expected> E2eServe::expected_;
std::vector<std::string> E2eServe::classes_;

TEST_F(E2eServe, ConcurrentRequestsGetTheSamePredictionsAsScore) {
  std::vector<std::string> files;
  for (const auto& [rel, e] : expected_) files.push_back(rel);
  // 8 clients at once, alternating image bytes and JSON paths under --image-root.
  std::vector<std::future<std::vector<std::pair<std::string, HttpReply>>>> clients;
  for (int c = 0; c < 8; ++c)
    clients.push_back(std::async(std::launch::async, [&, c] {
      std::vector<std::pair<std::string, HttpReply>> out;
      for (std::size_t i = c; i < files.size(); i += 8) {
        const bool as_path = (i / 8) % 2 == 0;
        out.emplace_back(files[i], as_path ? server_->post(json{{"path", files[i]}}.dump(), "application/json")
                                           : server_->post(file_bytes(catalog() / files[i]), "image/jpeg"));
      }
      return out;
    }));
  std::size_t answered = 0;
  for (auto& client : clients)
    for (const auto& [rel, reply] : client.get()) {
      ASSERT_EQ(reply.status, 200) << rel << ": " << reply.body << reply.error;
      const json body = json::parse(reply.body);
      const Expected& e = expected_.at(rel);
      EXPECT_EQ(body["label"], e.label) << rel;
      for (std::size_t k = 0; k < classes_.size(); ++k)
        EXPECT_NEAR(body["probabilities"][classes_[k]].get<double>(), e.probs[k], 1e-4) << rel << " " << classes_[k];
      EXPECT_GE(body["batch_size"].get<int>(), 1);
      EXPECT_LE(body["batch_size"].get<int>(), 8);
      ++answered;
    }
  EXPECT_EQ(answered, files.size());
}

TEST_F(E2eServe, ABf16ServerComputesInBf16) {
  // The server runs in the inference session's precision: its probabilities move off the fp32
  // ones by far more than fp32's own rounding (autocast took the convolutions and matmuls to
  // bf16) but stay close.
  ServerProcess bf16("--weights " + model().string() + " --precision bf16 --max-batch 4 --threads 1 --warmup-reps 1",
                     scratch().path(), "bf16");
  ASSERT_TRUE(bf16.wait_ready()) << bf16.log();
  double bf16_off = 0, fp32_off = 0;  // largest probability difference from score's fp32 rows
  int compared = 0;
  for (const auto& [rel, e] : expected_) {
    if (compared == 8) break;
    const std::string bytes = file_bytes(catalog() / rel);
    const HttpReply reduced = bf16.post(bytes, "image/jpeg"), full = server_->post(bytes, "image/jpeg");
    ASSERT_EQ(reduced.status, 200) << rel << ": " << reduced.body << reduced.error;
    ASSERT_EQ(full.status, 200) << rel << ": " << full.body << full.error;
    const json a = json::parse(reduced.body), b = json::parse(full.body);
    for (std::size_t k = 0; k < classes_.size(); ++k) {
      bf16_off = std::max(bf16_off, std::abs(a["probabilities"][classes_[k]].get<double>() - e.probs[k]));
      fp32_off = std::max(fp32_off, std::abs(b["probabilities"][classes_[k]].get<double>() - e.probs[k]));
    }
    ++compared;
  }
  // fp32 differs from score by rounding alone; bf16 keeps about 3 significant digits.
  EXPECT_GT(bf16_off, 10 * fp32_off + 1e-6)
      << "bf16 " << bf16_off << " vs fp32 " << fp32_off << ": the precision was not applied";
  EXPECT_LT(bf16_off, 0.1);
  EXPECT_EQ(bf16.stop(SIGTERM), 0) << bf16.log();
}

TEST_F(E2eServe, BadInputGetsAClear4xxAndTheServerKeepsServing) {
  auto expect_error = [](const HttpReply& r, int status, const std::string& fragment) {
    EXPECT_EQ(r.status, status) << r.body << r.error;
    const json body = json::parse(r.body, nullptr, /*allow_exceptions=*/false);
    ASSERT_TRUE(body.is_object()) << r.body;
    EXPECT_NE(body.value("error", "").find(fragment), std::string::npos) << r.body;
  };
  expect_error(server_->post("hello, this is not an image", "application/octet-stream"), 415, "not an image");
  expect_error(server_->post("{\"path\": ", "application/json"), 400, "malformed JSON");
  expect_error(server_->post("{\"file\": \"x.jpg\"}", "application/json"), 400, "\"path\"");
  // Outside the root or missing: one answer (tests/unit/test_serve_http.cpp tries every kind of miss).
  expect_error(server_->post(json{{"path", "../../etc/passwd"}}.dump(), "application/json"), 404, "no readable image");
  expect_error(server_->post(json{{"path", "/etc/passwd"}}.dump(), "application/json"), 404, "no readable image");
  expect_error(server_->post(json{{"path", "no/such/file.jpg"}}.dump(), "application/json"), 404, "no readable image");
  expect_error(server_->post(std::string(300000, 'x'), "image/jpeg"), 413, "larger than the limit");
  std::string truncated = file_bytes(catalog() / expected_.begin()->first).substr(0, 40);
  expect_error(server_->post(truncated, "image/jpeg"), 422, "cannot decode");
  expect_error(server_->get("/v2/nothing"), 404, "no route");
  // Still serving.
  EXPECT_EQ(server_->get("/healthz").status, 200);
  EXPECT_EQ(server_->post(json{{"path", expected_.begin()->first}}.dump(), "application/json").status, 200);
}

TEST_F(E2eServe, MetricsShowStageLatenciesBatchSizesAndCounts) {
  for (int i = 0; i < 4; ++i)
    ASSERT_EQ(server_->post(json{{"path", expected_.begin()->first}}.dump(), "application/json").status, 200);
  const HttpReply r = server_->get("/metrics");
  ASSERT_EQ(r.status, 200);
  EXPECT_NE(r.header("Content-Type").find("text/plain"), std::string::npos);
  for (const char* stage : {"queue_wait", "preprocess", "host_to_device", "compute", "total"})
    for (const char* q : {"0.5", "0.95", "0.99"})
      EXPECT_NE(
          r.body.find(std::string("shoplens_serve_latency_seconds{stage=\"") + stage + "\",quantile=\"" + q + "\"}"),
          std::string::npos)
          << stage << " " << q;
  EXPECT_GE(server_->metric("shoplens_serve_batch_size_count"), 1);
  EXPECT_GE(server_->metric("shoplens_serve_images_total"), 4);
  EXPECT_GE(server_->metric("shoplens_serve_latency_seconds_count{stage=\"total\"}"), 4);
  EXPECT_EQ(server_->metric("shoplens_serve_ready"), 1);
  EXPECT_NE(r.body.find("shoplens_serve_requests_total{code=\"200\"}"), std::string::npos);
  EXPECT_NE(r.body.find("shoplens_serve_model_p95_seconds{batch=\"8\"}"), std::string::npos);
}

// A server whose queue holds two requests and whose batches wait long for company: the third
// request finds the queue full; SIGTERM then flushes the queue, answers both, exits 0.
TEST_F(E2eServe, FullQueueAnswers503WithRetryAfterAndSigtermDrainsTheQueue) {
  ServerProcess slow("--weights " + model().string() + " --image-root " + catalog().string() +
                         " --max-batch 64 --max-queue 2 --max-queue-delay-ms 600000 --request-timeout-ms 600000 "
                         "--threads 1 --warmup-reps 1",
                     scratch().path(), "slow");
  ASSERT_TRUE(slow.wait_ready()) << slow.log();
  const std::string body = json{{"path", expected_.begin()->first}}.dump();
  auto first = std::async(std::launch::async, [&] { return slow.post(body, "application/json"); });
  auto second = std::async(std::launch::async, [&] { return slow.post(body, "application/json"); });
  for (int i = 0; i < 3000 && slow.metric("shoplens_serve_queue_length") < 2; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  ASSERT_EQ(slow.metric("shoplens_serve_queue_length"), 2) << slow.log();

  const HttpReply rejected = slow.post(body, "application/json");
  EXPECT_EQ(rejected.status, 503) << rejected.body;
  EXPECT_NE(rejected.body.find("queue full"), std::string::npos) << rejected.body;
  EXPECT_GE(std::stoi(rejected.header("Retry-After").empty() ? "0" : rejected.header("Retry-After")), 1);
  EXPECT_EQ(slow.metric("shoplens_serve_rejected_total"), 1);

  // The two queued requests are still waiting (the delay is 10 minutes): SIGTERM must answer them.
  EXPECT_EQ(slow.stop(SIGTERM), 0) << slow.log();
  for (auto* f : {&first, &second}) {
    const HttpReply r = f->get();
    EXPECT_EQ(r.status, 200) << r.body << r.error;
    EXPECT_EQ(json::parse(r.body)["batch_size"], 2);
  }
  EXPECT_NE(slow.log().find("drained"), std::string::npos) << slow.log();
}

// A lone request waiting for company that never comes (a 10-minute delay) is dropped at its
// timeout with a 504, before it costs compute; the server goes on.
TEST_F(E2eServe, ARequestStillQueuedAtItsTimeoutGets504) {
  ServerProcess lonely(
      "--weights " + model().string() + " --image-root " + catalog().string() +
          " --max-batch 64 --max-queue-delay-ms 600000 --request-timeout-ms 300 --threads 1 --warmup-reps 1",
      scratch().path(), "lonely");
  ASSERT_TRUE(lonely.wait_ready()) << lonely.log();
  const HttpReply r = lonely.post(json{{"path", expected_.begin()->first}}.dump(), "application/json");
  EXPECT_EQ(r.status, 504) << r.body << r.error;
  EXPECT_NE(r.body.find("timed out"), std::string::npos) << r.body;
  EXPECT_EQ(lonely.metric("shoplens_serve_timed_out_total"), 1);
  EXPECT_EQ(lonely.metric("shoplens_serve_images_total"), 0);
  EXPECT_EQ(lonely.get("/healthz").status, 200);
  EXPECT_EQ(lonely.stop(SIGINT), 0) << lonely.log();
}

// Request smuggling (issue 45): a request framed both by Content-Length and by chunked encoding
// hides a second request in what one parser reads as its body and the other as the next request.
// The server answers 400 and closes the connection: the hidden request is never answered. Two
// different Content-Lengths get 400 at once (they waited 5 s for a 415).
TEST_F(E2eServe, SmuggledRequestsGet400AndTheConnectionCloses) {
  const std::string post = "POST /v1/classify HTTP/1.1\r\nHost: x\r\nContent-Type: image/png\r\n";
  const std::string png(8, 'p');
  for (const std::string& request :
       {post +
            "Content-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\nGET /healthz HTTP/1.1\r\nHost: x\r\n\r\n",
        post +
            "Transfer-Encoding: chunked\r\nContent-Length: 4\r\n\r\n0\r\n\r\nGET /metrics HTTP/1.1\r\nHost: x\r\n\r\n",
        post + "Content-Length: 8\r\nContent-Length: 43\r\n\r\n" + png + "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"}) {
    testing::RawConnection c(server_->port());
    ASSERT_TRUE(c.connected());
    c.send(request);
    const testing::RawReply first = c.read_reply(60);
    EXPECT_EQ(first.status, 400) << request << "\n" << first.head << first.body;
    EXPECT_TRUE(json::parse(first.body, nullptr, false).contains("error")) << first.body;
    const testing::RawReply hidden = c.read_reply(5);
    EXPECT_EQ(hidden.status, 0) << "the hidden request was answered: " << hidden.head << hidden.body;
    EXPECT_TRUE(c.wait_closed_by_peer(30)) << request;
  }
  EXPECT_EQ(server_->get("/healthz").status, 200);
}

// Decoded pixels in flight (issue 45): a 13 KB PNG declaring 9990 x 9990 decodes to 300 MB, and
// eight at once took the server from 204 MB ready to 2.55 GB. With the decode budget (half the
// ready server's peak by default) an image larger than the budget is refused before it is
// decoded and smaller ones take turns, so the peak stays within twice the ready server's.
TEST_F(E2eServe, EightHugeImagesAtOnceKeepTheServerWithinTwiceItsReadyMemory) {
  SKIP_WHERE_PROCESS_MEMORY_IS_NOT_THE_PRODUCTS();
  ServerProcess big("--weights " + model().string() + " --max-batch 8 --threads 1 --warmup-reps 1", scratch().path(),
                    "memory");
  ASSERT_TRUE(big.wait_ready()) << big.log();
  const long ready_kb = big.peak_kb();
  ASSERT_GT(ready_kb, 0);
  const double budget = big.metric("shoplens_serve_decode_budget_bytes");
  EXPECT_GT(budget, 0) << big.log();
  EXPECT_LE(budget, ready_kb * 1024.0 / 2 + 1) << big.log();
  auto eight_at_once = [&](const testing::Bytes& png) {
    const std::string body(png.begin(), png.end());
    std::vector<std::future<HttpReply>> replies;
    for (int i = 0; i < 8; ++i)
      replies.push_back(std::async(std::launch::async, [&] { return big.post(body, "image/png"); }));
    std::map<int, int> statuses;
    for (auto& r : replies) ++statuses[r.get().status];
    return statuses;
  };
  for (const auto& [status, count] : eight_at_once(testing::blank_png(9990, 9990)))
    EXPECT_TRUE(status == 200 || status == 422 || status == 503) << status << " x" << count;
  // Images of 60% of the budget: one fits at a time; the others wait for room or get 503.
  const auto side = static_cast<std::uint32_t>(std::sqrt(0.6 * budget / 3));
  const auto fitting = eight_at_once(testing::blank_png(side, side));
  EXPECT_GE(fitting.count(200) ? fitting.at(200) : 0, 1);
  for (const auto& [status, count] : fitting) EXPECT_TRUE(status == 200 || status == 503) << status << " x" << count;
  const long peak_kb = big.peak_kb();
  EXPECT_LE(peak_kb, 2 * ready_kb) << "ready " << ready_kb << " kB, peak " << peak_kb << " kB\n" << big.log();
  EXPECT_EQ(big.metric("shoplens_serve_decode_bytes_in_use"), 0);
  EXPECT_EQ(big.stop(SIGTERM), 0) << big.log();
}

TEST_F(E2eServe, HelpShowsEveryDefault) {
  auto r = run_shoplens("serve --help");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  for (const char* flag :
       {"--port", "--max-batch", "--max-queue-delay-ms", "--max-queue", "--p95-target-ms", "--request-timeout-ms",
        "--max-body-bytes", "--host", "--header-timeout-ms", "--body-timeout-ms", "--idle-timeout-ms"})
    EXPECT_NE(r.output.find(flag), std::string::npos) << flag;
  EXPECT_NE(r.output.find("127.0.0.1"), std::string::npos);
  EXPECT_NE(r.output.find("16777216"), std::string::npos);
}

}  // namespace
}  // namespace shoplens
