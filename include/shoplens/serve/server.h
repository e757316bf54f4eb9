// `shoplens serve`: online scoring of an exported model over HTTP (docs/SERVING.md). The model is
// loaded and verified as `shoplens score` does, requests are preprocessed with the model card's
// evaluation transform (the same pixels as score), coalesced by the MicroBatcher and answered
// with label and probabilities.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>

#include "shoplens/infer/inference_session.h"
#include "shoplens/serve/http_frontend.h"
#include "shoplens/serve/micro_batcher.h"

namespace shoplens::serve {

// --decode-budget-mb at most (1 TiB), and the automatic budget's floor (a 10-megapixel photo fits)
// and its value where the process's memory cannot be read.
constexpr std::uint64_t kMaxDecodeBudgetMb = std::uint64_t{1} << 20;
constexpr std::uint64_t kDecodeBudgetAtLeast = std::uint64_t{32} << 20;
constexpr std::uint64_t kDecodeBudgetUnknownMemory = std::uint64_t{256} << 20;

// The server's settings: one field per flag of `shoplens serve`, grouped by the part that reads
// them, with the server's own defaults where they differ from the parts' (a bigger batch, a
// shorter queue, HTTP threads sized from the queue).
struct ServeOptions {
  std::filesystem::path model_dir;
  std::string variant = "fp32";                // weights file of the model folder
  InferenceOptions inference;                  // autocast as in score; exact_decode false: --fast-decode
  std::filesystem::path port_file;             // written (atomically) with the bound port once listening
  BatcherOptions batcher = default_batcher();  // timeout_ms is also the frontend's request timeout
  FrontendOptions frontend = default_frontend();
  int warmup_reps = 7;  // timed passes per batch size for the latency curve
  // Bytes of decoded pixels requests may hold at once, in MB; 0: half the peak resident memory of
  // the server once warmed up (see HttpFrontend::set_decode_budget).
  std::uint64_t decode_budget_mb = 0;

  static BatcherOptions default_batcher() {
    BatcherOptions b;
    b.max_batch = 16;
    b.max_queue = 128;
    return b;
  }
  static FrontendOptions default_frontend() {
    FrontendOptions f;
    f.http_threads = 0;  // 0: max_queue + 2 * max_batch + 8 (see server_torch.cpp)
    return f;
  }
};

// Serves until SIGINT/SIGTERM, then stops accepting, answers every queued request and returns 0.
// UsageError / DataError / IoError for a bad model folder, options or port.
int run_server(const ServeOptions& options);

}  // namespace shoplens::serve
