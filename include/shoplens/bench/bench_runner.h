// `shoplens bench`: runs the scenarios of a bench config on this machine (docs/BENCH.md).
#pragma once

#include "shoplens/bench/bench_results.h"
#include "shoplens/bench/nvml_sampler.h"

namespace shoplens {

// Commit, LibTorch version, CPU model, GPU name and driver (NVML), date, host.
BenchEnvironment bench_environment(const Nvml& nvml);

// One scenario: the trainer's real TrainStep on synthetic tensors or on prepared shards through
// the training loader; per trial warm-up steps then measured steps. A scenario that fails (no
// CUDA, out of memory, unreadable shards) comes back with `error` set rather than throwing, so the
// others still run; an interrupt (SIGINT/SIGTERM) is rethrown.
ScenarioResult run_scenario(const BenchScenario& scenario, const Nvml& nvml);

}  // namespace shoplens
