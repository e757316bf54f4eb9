#define SHOPLENS_COMPAT_C10D
#include "shoplens/dist/process_group.h"

#include <torch/torch.h>
#include <torch/csrc/distributed/c10d/HashStore.hpp>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#ifdef SHOPLENS_WITH_NCCL
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#endif

#include <unistd.h>

#include <cstdlib>
#include <mutex>
#include <optional>
#include <thread>

#include <fmt/format.h>

#include "shoplens/core/errors.h"
#include "shoplens/core/logging.h"
#include "shoplens/core/runtime.h"
#include "shoplens/core/strings.h"
#include "torch_compat.h"

namespace shoplens {

class InProcessRendezvous {
 public:
  c10::intrusive_ptr<c10d::Store> store = c10::make_intrusive<c10d::HashStore>();
};

namespace {

using Clock = std::chrono::steady_clock;

std::string to_string(const std::vector<std::uint8_t>& bytes) { return std::string(bytes.begin(), bytes.end()); }
std::vector<std::uint8_t> to_bytes(const std::string& s) { return std::vector<std::uint8_t>(s.begin(), s.end()); }

// What each rank announces at the rendezvous; every field must agree but the host and pid.
struct Announcement {
  int world_size = 0;
  std::string fingerprint, host;
  long pid = 0;
  std::string encode() const { return fmt::format("{}\n{}\n{}\n{}", world_size, fingerprint, host, pid); }
  static Announcement decode(const std::string& text) {
    Announcement a;
    const auto parts = split(text, '\n');
    if (parts.size() >= 4) {
      a.world_size = std::atoi(parts[0].c_str());
      a.fingerprint = parts[1];
      a.host = parts[2];
      a.pid = std::atol(parts[3].c_str());
    }
    return a;
  }
};

std::string hostname() {
  char buf[256] = {0};
  if (gethostname(buf, sizeof buf - 1) != 0) return "unknown-host";
  return buf;
}

// What makes rank `r`'s announcement incompatible with ours; empty when it fits.
std::string disagreement(const Announcement& other, int r, int rank, int world_size, const GroupOptions& options) {
  if (other.world_size != world_size)
    return fmt::format("rank {} (pid {} on {}) was started with WORLD_SIZE {}, rank {} with {}", r, other.pid,
                       other.host, other.world_size, rank, world_size);
  if (other.fingerprint != options.fingerprint)
    return fmt::format(
        "rank {} (pid {} on {}) runs a different config (fingerprint {} vs {} on rank {}): every rank must train "
        "the same job",
        r, other.pid, other.host, other.fingerprint, options.fingerprint, rank);
  return {};
}

std::string read_key(int rank) { return "abort-read/" + std::to_string(rank); }

// Says this rank has read why the rendezvous was aborted (best effort: the store may be gone).
void acknowledge_abort(c10d::Store& store, int rank) {
  try {
    store.set(read_key(rank), to_bytes("1"));
  } catch (const std::exception&) {}
}

// Publishes why the rendezvous failed and throws. The store lives in rank 0's process: leaving at
// once would take it away before a slower rank has read the reason, and that rank would fail
// without naming it. So the publisher waits, a bounded moment, until every rank that announced
// itself has read it.
[[noreturn]] void abort_rendezvous(c10d::Store& store, int rank, int world_size, const std::string& problem) {
  try {
    store.set("abort", to_bytes(problem));
    acknowledge_abort(store, rank);
    const auto give_up = Clock::now() + std::chrono::seconds(5);
    for (int r = 0; r <= world_size && Clock::now() < give_up;) {
      const bool settled = r == rank || !store.check({"rank/" + std::to_string(r)}) || store.check({read_key(r)});
      if (settled)
        ++r;
      else
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  } catch (const std::exception&) {
    // The store went away (rank 0 left first): the problem is still ours to report.
  }
  throw ConfigError("inconsistent distributed job: " + problem);
}

// Every rank announces itself, then waits for the others, checking what has arrived as it
// waits: a disagreement is reported at once (and published, so the others stop too), a missing
// rank when the timeout runs out, with the list of who is missing.
// Returns every rank's announcement, in rank order.
std::vector<Announcement> rendezvous(c10d::Store& store, int rank, int world_size, const GroupOptions& options) {
  Announcement self{world_size, options.fingerprint, hostname(), static_cast<long>(getpid())};
  store.set("rank/" + std::to_string(rank), to_bytes(self.encode()));
  const auto deadline = Clock::now() + options.timeout;
  std::vector<std::optional<Announcement>> seen(world_size);
  for (;;) {
    if (store.check({"abort"})) {
      const std::string why = to_string(store.get("abort"));
      acknowledge_abort(store, rank);
      throw ConfigError("distributed rendezvous aborted by another rank: " + why);
    }
    int present = 0;
    for (int r = 0; r < world_size; ++r) {
      if (!seen[r]) {
        if (!store.check({"rank/" + std::to_string(r)})) continue;
        const auto other = Announcement::decode(to_string(store.get("rank/" + std::to_string(r))));
        const std::string problem = disagreement(other, r, rank, world_size, options);
        if (!problem.empty()) abort_rendezvous(store, rank, world_size, problem);
        seen[r] = other;
      }
      present++;
    }
    // A rank beyond our world size joined: its WORLD_SIZE is larger than ours.
    if (store.check({"rank/" + std::to_string(world_size)})) {
      const auto other = Announcement::decode(to_string(store.get("rank/" + std::to_string(world_size))));
      abort_rendezvous(store, rank, world_size,
                       fmt::format("rank {} joined a job of WORLD_SIZE {} (it was started with WORLD_SIZE {})",
                                   world_size, world_size, other.world_size));
    }
    if (present == world_size) {
      std::vector<Announcement> members;
      members.reserve(seen.size());
      for (const auto& m : seen) members.push_back(*m);
      return members;
    }
    if (Clock::now() >= deadline) {
      std::vector<std::string> missing;
      for (int r = 0; r < world_size; ++r)
        if (!seen[r]) missing.push_back(std::to_string(r));
      throw Error(
          fmt::format("distributed rendezvous timed out after {:.0f} s on rank {}: rank(s) {} of {} never joined "
                      "(did they fail at start-up? see their logs); raise dist.timeout_seconds if they are slow to "
                      "start",
                      std::chrono::duration<double>(options.timeout).count(), rank, join(missing, ", "), world_size));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

std::shared_ptr<::gloo::transport::Device> gloo_device(const std::string& master_addr) {
  if (const char* ifname = std::getenv("GLOO_SOCKET_IFNAME"); ifname && *ifname)
    return c10d::ProcessGroupGloo::createDeviceForInterface(ifname);
  if (master_addr == "localhost" || master_addr.rfind("127.", 0) == 0)
    return c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1");
  return c10d::ProcessGroupGloo::createDefaultDevice();
}

// Who takes part in this rank's collectives, for the errors: "rank 0 (pid 7 on node0)" and the
// peers it waits on, so a message from one node names the other.
struct GroupMembers {
  std::string self, peers;
  std::chrono::milliseconds timeout{0};
};

GroupMembers describe_members(const std::vector<Announcement>& members, int rank, std::chrono::milliseconds timeout) {
  GroupMembers described;
  std::vector<std::string> peers;
  for (std::size_t r = 0; r < members.size(); ++r) {
    const std::string who = fmt::format("rank {} (pid {} on {})", r, members[r].pid, members[r].host);
    if (static_cast<int>(r) == rank)
      described.self = who;
    else
      peers.push_back(who);
  }
  described.peers = join(peers, ", ");
  described.timeout = timeout;
  return described;
}

std::string describe_failure(const std::string& what, const std::exception& e, const GroupMembers& members) {
  const std::string message = error_message(e);
  // Gloo says "Timed out waiting ...", the TCPStore "Socket Timeout" or "Wait timeout".
  bool peer_trouble = false;
  for (const char* sign : {"imed out", "imeout", "onnection", "closed", "reset", "Broken pipe"})
    peer_trouble = peer_trouble || message.find(sign) != std::string::npos;
  if (!peer_trouble) return fmt::format("{} failed on {}: {}", what, members.self, message);
  return fmt::format(
      "{} failed on {}: {} (a peer died, was killed or did not answer within dist.timeout_seconds = {:.0f} s; "
      "waiting on {})",
      what, members.self, message, std::chrono::duration<double>(members.timeout).count(), members.peers);
}

// Gloo takes several tensors in one call only as per-device copies of one tensor; different
// tensors travel as one flat buffer per dtype (also one message instead of many).
template <typename Op>
void coalesced(std::vector<at::Tensor>& tensors, Op&& op) {
  if (tensors.size() == 1) {
    op(tensors);
    return;
  }
  std::vector<at::ScalarType> dtypes;
  for (const auto& t : tensors)
    if (std::find(dtypes.begin(), dtypes.end(), t.scalar_type()) == dtypes.end()) dtypes.push_back(t.scalar_type());
  for (auto dtype : dtypes) {
    std::vector<at::Tensor> members, flat_parts;
    for (auto& t : tensors)
      if (t.scalar_type() == dtype) {
        members.push_back(t);
        flat_parts.push_back(t.reshape({-1}));
      }
    std::vector<at::Tensor> flat{torch::cat(flat_parts)};
    op(flat);
    std::int64_t offset = 0;
    for (auto& t : members) {
      t.copy_(flat[0].narrow(0, offset, t.numel()).view(t.sizes()));
      offset += t.numel();
    }
  }
}

// torch 2.x's flight recorder (c10d/FlightRecorderDetail.hpp, on by default) adds a group to a
// process-wide map outside its own lock the first time that group records a collective. Groups in
// one process (join_in_process's ranks) that start collectives at the same moment corrupted the map:
// a SIGSEGV in std::_Rb_tree_insert_and_rebalance under ProcessGroupGloo::enqueue (twice in 360 runs
// of the GradientReducer tests beside a build). Starting a collective only enqueues it, so starts
// take turns and the waits still overlap. One group per process (a real job) never contends.
template <typename F>
auto start_collective(F&& start) {
  static std::mutex start_mutex;
  std::lock_guard<std::mutex> lock(start_mutex);
  return start();
}

class PendingWork : public PendingCollective {
 public:
  PendingWork(c10::intrusive_ptr<c10d::Work> work, const GroupMembers& members)
      : work_(std::move(work)), members_(members) {}
  void wait() override {
    try {
      work_->wait();
    } catch (const std::exception& e) {
      throw Error(describe_failure("all-reduce", e, members_));
    }
  }

 private:
  c10::intrusive_ptr<c10d::Work> work_;
  GroupMembers members_;
};

class C10dGroup : public ProcessGroup {
 public:
  C10dGroup(c10::intrusive_ptr<c10d::Store> store, c10::intrusive_ptr<compat::DistBackend> backend, int rank, int world,
            std::string backend_name, GroupMembers members)
      : store_(std::move(store)),
        backend_(std::move(backend)),
        rank_(rank),
        world_(world),
        backend_name_(std::move(backend_name)),
        members_(std::move(members)) {}

  int rank() const override { return rank_; }
  int world_size() const override { return world_; }
  std::string backend() const override { return backend_name_; }

  void allreduce_sum(std::vector<at::Tensor>& tensors) override {
    coalesced(tensors, [&](std::vector<at::Tensor>& t) { run("all-reduce", [&] { return backend_->allreduce(t); }); });
  }
  std::unique_ptr<PendingCollective> allreduce_sum_async(at::Tensor& tensor) override {
    std::vector<at::Tensor> one{tensor};
    try {
      return std::make_unique<PendingWork>(start_collective([&] { return backend_->allreduce(one); }), members_);
    } catch (const std::exception& e) {
      throw Error(describe_failure("all-reduce", e, members_));
    }
  }
  void broadcast(std::vector<at::Tensor>& tensors, int root) override {
    c10d::BroadcastOptions opts;
    opts.rootRank = root;
    coalesced(tensors,
              [&](std::vector<at::Tensor>& t) { run("broadcast", [&] { return backend_->broadcast(t, opts); }); });
  }
  void barrier() override {
    run("barrier", [&] { return backend_->barrier(); });
  }
  std::vector<std::string> all_gather_string(const std::string& key, const std::string& value) override {
    const std::string base = fmt::format("gather/{}/{}", sequence_++, key);
    std::vector<std::string> out;
    try {
      store_->set(base + "/" + std::to_string(rank_), to_bytes(value));
      std::vector<std::string> keys;
      keys.reserve(world_);
      for (int r = 0; r < world_; ++r) keys.push_back(base + "/" + std::to_string(r));
      store_->wait(keys, members_.timeout);
      for (const auto& k : keys) out.push_back(to_string(store_->get(k)));
    } catch (const std::exception& e) {
      throw Error(describe_failure("exchange of '" + key + "'", e, members_));
    }
    return out;
  }

 private:
  template <typename F>
  void run(const char* what, F&& start) {
    try {
      start_collective(start)->wait();
    } catch (const std::exception& e) {
      throw Error(describe_failure(what, e, members_));
    }
  }

  c10::intrusive_ptr<c10d::Store> store_;
  c10::intrusive_ptr<compat::DistBackend> backend_;
  int rank_, world_;
  std::string backend_name_;
  GroupMembers members_;
  std::uint64_t sequence_ = 0;
};

std::shared_ptr<ProcessGroup> create_group(const c10::intrusive_ptr<c10d::Store>& base, const std::string& prefix,
                                           int rank, int world_size, const std::string& master_addr,
                                           const GroupOptions& options) {
  auto store = c10::make_intrusive<c10d::PrefixStore>(prefix, base);
  const auto members = describe_members(rendezvous(*store, rank, world_size, options), rank, options.timeout);
  c10::intrusive_ptr<compat::DistBackend> backend;
  try {
    if (options.backend == "nccl") {
#ifdef SHOPLENS_WITH_NCCL
      auto nccl_options = c10d::ProcessGroupNCCL::Options::create();
      nccl_options->timeout = options.timeout;
      backend = c10::make_intrusive<c10d::ProcessGroupNCCL>(c10::make_intrusive<c10d::PrefixStore>("nccl", store), rank,
                                                            world_size, nccl_options);
#else
      throw ConfigError("dist.backend=nccl but this LibTorch was built without NCCL (" + torch_version() +
                        "); use gloo");
#endif
    } else {
      auto gloo_options = c10d::ProcessGroupGloo::Options::create(options.timeout);
      gloo_options->devices.push_back(gloo_device(master_addr));
      gloo_options->threads = 2;
      backend = c10::make_intrusive<c10d::ProcessGroupGloo>(c10::make_intrusive<c10d::PrefixStore>("gloo", store), rank,
                                                            world_size, gloo_options);
    }
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    throw Error(
        fmt::format("creating the {} process group on rank {} failed: {}", options.backend, rank, error_message(e)));
  }
  return std::make_shared<C10dGroup>(store, backend, rank, world_size, options.backend, members);
}

// Rank 0's store is new with every start of rank 0, so its keys need no attempt number, and ranks
// whose launchers count restarts differently still meet (a replaced node's launcher starts at 0
// while the survivors' are at 1). An agent's store outlives the attempts: there the restart count
// keeps them apart.
std::string store_prefix(const DistEnv& env) {
  return env.agent_hosts_store ? fmt::format("shoplens/{}", env.restart_count) : std::string("shoplens");
}

}  // namespace

std::shared_ptr<ProcessGroup> join_process_group(const DistEnv& env, const GroupOptions& options) {
  const bool host_store = env.rank == 0 && !env.agent_hosts_store;
  c10d::TCPStoreOptions store_options;
  store_options.port = static_cast<std::uint16_t>(env.master_port);
  store_options.isServer = host_store;
  store_options.numWorkers = c10::nullopt;  // our own rendezvous says who is missing
  store_options.waitWorkers = false;
  store_options.timeout = options.timeout;
  c10::intrusive_ptr<c10d::Store> store;
  try {
    store = compat::make_tcp_store(env.master_addr, store_options);
  } catch (const std::exception& e) {
    if (host_store)
      throw Error(
          fmt::format("rank 0 cannot host the rendezvous store on {}:{}: {} (is the port in use by another job? "
                      "choose another MASTER_PORT / --master-port)",
                      env.master_addr, env.master_port, error_message(e)));
    throw Error(
        fmt::format("rank {} cannot reach the rendezvous store at {}:{} within {:.0f} s: {} (is rank 0 running? is "
                    "MASTER_ADDR right?)",
                    env.rank, env.master_addr, env.master_port, std::chrono::duration<double>(options.timeout).count(),
                    error_message(e)));
  }
  auto group = create_group(store, store_prefix(env), env.rank, env.world_size, env.master_addr, options);
  log_info(fmt::format("dist: joined {} ({} backend)", env.describe(), options.backend));
  return group;
}

std::shared_ptr<InProcessRendezvous> make_in_process_rendezvous() { return std::make_shared<InProcessRendezvous>(); }

std::shared_ptr<ProcessGroup> join_in_process(const std::shared_ptr<InProcessRendezvous>& rendezvous, int rank,
                                              int world_size, const GroupOptions& options) {
  GroupOptions gloo = options;
  gloo.backend = "gloo";
  return create_group(rendezvous->store, "in-process", rank, world_size, "127.0.0.1", gloo);
}

}  // namespace shoplens
