// The data-parallel process group: PyTorch's own c10d (a TCPStore rendezvous, ProcessGroupGloo on
// CPU, ProcessGroupNCCL on CUDA) behind the few collectives the trainer needs. c10d's headers stay
// in the implementation; this header only needs tensors.
#pragma once

#include <ATen/core/Tensor.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "shoplens/dist/dist_env.h"

namespace shoplens {

struct GroupOptions {
  std::string backend = "gloo";  // gloo | nccl
  std::chrono::milliseconds timeout{300000};
  std::string fingerprint;  // must be equal on every rank (the job's config), else an error
};

// A collective started without waiting for it (gradient buckets overlap with backward).
class PendingCollective {
 public:
  virtual ~PendingCollective() = default;
  virtual void wait() = 0;  // throws Error on failure or timeout
};

class ProcessGroup {
 public:
  virtual ~ProcessGroup() = default;
  virtual int rank() const = 0;
  virtual int world_size() const = 0;
  virtual std::string backend() const = 0;

  virtual void allreduce_sum(std::vector<at::Tensor>& tensors) = 0;
  virtual std::unique_ptr<PendingCollective> allreduce_sum_async(at::Tensor& tensor) = 0;
  virtual void broadcast(std::vector<at::Tensor>& tensors, int root) = 0;
  virtual void barrier() = 0;
  // Every rank's `value`, in rank order, exchanged through the store (small metadata only).
  virtual std::vector<std::string> all_gather_string(const std::string& key, const std::string& value) = 0;
};

// Joins the job described by `env`: rendezvous on the TCPStore at MASTER_ADDR:MASTER_PORT (rank 0
// hosts it unless the launcher's agent does), checks that every rank agrees on the world size and
// the fingerprint, then creates the backend. Errors name what is missing or inconsistent and come
// within options.timeout, never as a silent hang.
std::shared_ptr<ProcessGroup> join_process_group(const DistEnv& env, const GroupOptions& options);

// `world_size` ranks in one process (threads), on a shared in-memory store with the real Gloo
// backend over loopback: the unit tests' group, needing no launcher or ports.
class InProcessRendezvous;
std::shared_ptr<InProcessRendezvous> make_in_process_rendezvous();
std::shared_ptr<ProcessGroup> join_in_process(const std::shared_ptr<InProcessRendezvous>& rendezvous, int rank,
                                              int world_size, const GroupOptions& options);

}  // namespace shoplens
