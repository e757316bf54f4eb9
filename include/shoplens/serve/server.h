// `shoplens serve`: online scoring of an exported model over HTTP (docs/SERVING.md). The model is
// loaded and verified as `shoplens score` does, requests are preprocessed with the model card's
// evaluation transform (the same pixels as score), coalesced by the MicroBatcher and answered
// with label and probabilities.
#pragma once

#include <cstddef>
#include <filesystem>
#include <string>

namespace shoplens::serve {

struct ServeOptions {
  std::filesystem::path model_dir;
  std::string variant = "fp32";      // weights file of the model folder
  std::string device = "auto";       // auto | cpu | cuda
  std::string precision = "fp32";    // compute: fp32 | bf16 | fp16 (CUDA), autocast as in score
  bool fast_decode = false;          // JPEG: fast DCT at reduced scale (not Pillow's pixels)
  std::string host = "127.0.0.1";    // loopback unless asked
  int port = 8080;                   // 0: any free port (see port_file)
  std::filesystem::path port_file;   // written (atomically) with the bound port once listening
  std::filesystem::path image_root;  // JSON {"path"} requests are served from under here only
  int max_batch = 16;
  double max_queue_delay_ms = 5;
  int max_queue = 128;
  double p95_target_ms = 0;  // > 0: deadline-aware batching against this p95
  double request_timeout_ms = 2000;
  std::size_t max_body_bytes = 16u << 20;
  double header_timeout_ms = 10000;  // read deadlines per request phase (FrontendOptions)
  double body_timeout_ms = 60000;
  double idle_timeout_ms = 5000;
  int http_threads = 0;                // 0: max_queue + 2 * max_batch + 8 (see server_torch.cpp)
  int max_waiting_connections = 1024;  // FrontendOptions
  int warmup_reps = 7;                 // timed passes per batch size for the latency curve
};

// Serves until SIGINT/SIGTERM, then stops accepting, answers every queued request and returns 0.
// UsageError / DataError / IoError for a bad model folder, options or port.
int run_server(const ServeOptions& options);

}  // namespace shoplens::serve
