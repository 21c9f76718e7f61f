// ddptrain: real data-parallel DistilBERT fine-tuning with ddpsim's batch policies, writing
// traces the simulator reads. One process per rank (torchrun, srun, or --nproc-per-node), or
// one process playing N ranks (--emulate-ranks).
#include <cstdlib>
#include <filesystem>
#include <iostream>

#include <c10/macros/Macros.h>
#include <boost/program_options/errors.hpp>
#ifdef C10_USE_GLOG
#include <glog/logging.h>
#endif

#include "common/atomic_file.hpp"
#include "common/error.hpp"
#include "common/interrupt.hpp"
#include "ddpsim_version.hpp"
#include "model/layout.hpp"
#include "train/command_line.hpp"
#include "train/launcher.hpp"
#include "train/machine.hpp"
#include "train/optimizer_control.hpp"
#include "train/trainer.hpp"

namespace {

// The policies of a --policy list trained in turn, one step each, and the --profile-alongside
// grid timed after each turn.
void run_interleaved(const ddptrain::CommandLine& c, const std::shared_ptr<ddptrain::Communicator>& comm,
                     std::ostream& log) {
  const ddptrain::TrainOptions& o = c.train;
  const auto& policies = c.policies;
  const bool alongside = c.alongside;
  std::vector<std::unique_ptr<ddptrain::Trainer>> runs;
  std::vector<std::string> resolved;
  for (const auto& policy : policies) {
    ddptrain::TrainOptions one = o;
    one.profiled_alongside = alongside;
    if (policies.size() > 1) {
      one.policy = policy;
      one.interleaved = policies;
      if (policy.find("cost=model") == std::string::npos) one.perf_model.clear();
      if (!o.out.empty()) one.out = ddptrain::policy_folder(o.out, policy);
    }
    runs.push_back(std::make_unique<ddptrain::Trainer>(one, comm, log));
    resolved.push_back(runs.back()->resolved_policy());
    for (std::size_t j = 0; j + 1 < resolved.size(); ++j)
      if (resolved[j] == resolved.back())
        throw ddpsim::UsageError("--policy: " + policy + " is " + policies[j] + " with its options written out (" +
                                 resolved.back() + "): the same policy twice");
  }
  // The profile's own model and optimizer, on one real rank of this process (emulated ranks
  // take turns on one device) or on every rank at once.
  std::unique_ptr<ddptrain::Trainer> profiler;
  if (alongside) {
    ddptrain::TrainOptions p = o;
    p.policy = "static";
    p.perf_model.clear();
    p.profiling = true;
    p.emulate_ranks = 0;
    p.data_parallel = "ddp";  // a profile times the whole optimizer, as calibrate reads it
    p.out = (std::filesystem::path(o.out) / "profile").string();
    profiler = std::make_unique<ddptrain::Trainer>(p, comm, log);
    profiler->start_profile_alongside(c.profile, o.steps, o.policy);
  }
  for (bool more = true; more;) {
    more = false;
    for (auto& run : runs) more = run->advance() || more;
    if (profiler) profiler->profile_turn();
  }
  for (auto& run : runs) run->finish();
  if (profiler) profiler->finish_profile_alongside();
  std::vector<std::pair<std::string, const std::vector<ddpsim::RankStep>*>> timed;
  for (std::size_t k = 0; k < runs.size(); ++k) timed.emplace_back(policies[k], &runs[k]->rows());
  log << ddptrain::optimizer_control_text(timed);
}

// Argument positions kept for the ranks --nproc-per-node starts: every argument but that option.
std::vector<std::string> arguments_for_ranks(int argc, char** argv) {
  std::vector<std::string> rest;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--nproc-per-node") {
      ++i;
      continue;
    }
    if (a.rfind("--nproc-per-node=", 0) == 0) continue;
    rest.push_back(a);
  }
  return rest;
}

int run(int argc, char** argv) {
  ddptrain::CommandLine c = ddptrain::parse_command_line(argc, argv);
  ddptrain::TrainOptions& o = c.train;
  if (c.help) {
    std::cout << c.help_text;
    return 0;
  }
  if (c.version) {
    std::cout << "ddptrain " << DDPSIM_VERSION_STRING << "\n";
    return 0;
  }
  if (!c.write_layout.empty()) {
    ddptrain::DistilBertForSequenceClassification model(ddptrain::DistilBertConfig::named(o.model_size), o.seed);
    ddpsim::AtomicFile file(c.write_layout);
    file.stream() << ddptrain::layout_model(model, o.model_size).dump(2) << "\n";
    file.commit();
    std::cout << "wrote the layout of the " << o.model_size << " model to " << c.write_layout << "\n";
    return 0;
  }
  if (c.nproc > 0) return ddptrain::launch_local_ranks(c.nproc, arguments_for_ranks(argc, argv), c.threads);
  ddptrain::apply_cpu_placement(c.threads);
  const auto launch = ddptrain::Launch::from_environment();
  ddptrain::apply_ranks(c, o.emulate_ranks > 0 ? o.emulate_ranks : launch.world_size);
  o.precision = ddptrain::parse_precision(c.precision);
  o.local_rank = launch.local_rank;
  std::shared_ptr<ddptrain::Communicator> comm;
  if (launch.world_size > 1 || c.backend != "auto") {
    std::string backend = c.backend;
    if (backend == "auto") backend = torch::cuda::is_available() && o.device != "cpu" ? "nccl" : "gloo";
    if (backend != "gloo" && backend != "nccl") throw ddpsim::UsageError("--backend is auto, nccl or gloo");
    comm = ddptrain::connect(launch, backend, std::chrono::seconds(c.timeout_s));
  }
  std::ostream null_stream(nullptr);
  if (c.profiling && o.data.empty() && o.synthetic_lengths.empty()) o.synthetic_lengths = "sst2";  // data unused
  std::ostream& log = launch.rank == 0 ? std::cout : null_stream;
  if (c.policies.size() > 1 || c.alongside) {
    run_interleaved(c, comm, log);
    return 0;
  }
  ddptrain::Trainer trainer(o, comm, log);
  if (c.profiling) {
    trainer.profile(c.profile);
    return 0;
  }
  trainer.run();
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
#ifdef C10_USE_GLOG
  FLAGS_minloglevel = 3;  // c10d also logs the errors ddptrain reports in one line itself
#endif
  ddptrain::keep_freed_memory();
  ddpsim::install_interrupt_handler("ddptrain");
  try {
    return run(argc, argv);
  } catch (const ddpsim::UsageError& e) {
    std::cerr << "ddptrain: " << e.what() << " (see ddptrain --help)\n";
    return 2;
  } catch (const boost::program_options::error& e) {
    std::cerr << "ddptrain: " << e.what() << " (see ddptrain --help)\n";
    return 2;
  } catch (const c10::Error& e) {
    std::cerr << "ddptrain: " << e.what_without_backtrace() << "\n";
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "ddptrain: " << e.what() << "\n";
    return 1;
  }
}
