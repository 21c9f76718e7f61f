#include "dist/comm.hpp"

#include "dist/slurm_env.hpp"

#include <cstdlib>
#include <cstring>
#include <iostream>
#include <stdexcept>

#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#if __has_include(<gloo/algorithm.h>)
#define DDPTRAIN_GLOO 1
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#endif
#ifdef USE_C10D_NCCL
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#endif

namespace ddptrain {

namespace {

template <class PG>
class GroupComm final : public Communicator {
 public:
  GroupComm(c10::intrusive_ptr<PG> pg, std::string backend, int rank, int size)
      : pg_(std::move(pg)), backend_(std::move(backend)), rank_(rank), size_(size) {}
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string backend() const override { return backend_; }
  WorkPtr allreduce_sum(torch::Tensor& tensor) override {
    std::vector<torch::Tensor> one{tensor};
    return pg_->allreduce(one);
  }
  torch::Tensor allgather(const torch::Tensor& mine) override {
    std::vector<torch::Tensor> input{mine.contiguous()};
    std::vector<std::vector<torch::Tensor>> output(1);
    for (int r = 0; r < size_; ++r) output[0].push_back(torch::empty_like(input[0]));
    pg_->allgather(output, input)->wait();
    return torch::stack(output[0]);
  }
  void broadcast(torch::Tensor& tensor, int root) override {
    std::vector<torch::Tensor> one{tensor};
    c10d::BroadcastOptions options;
    options.rootRank = root;
    pg_->broadcast(one, options)->wait();
  }
  void barrier() override { pg_->barrier()->wait(); }

 private:
  c10::intrusive_ptr<PG> pg_;
  std::string backend_;
  int rank_, size_;
};

int env_int(const char* name, int fallback) {
  const char* text = std::getenv(name);
  if (!text || !*text) return fallback;
  char* end = nullptr;
  const long value = std::strtol(text, &end, 10);
  if (*end || value < 0 || value > 1 << 20)
    throw std::runtime_error(std::string("environment variable ") + name + "=\"" + text +
                             "\" is not a non-negative integer");
  return static_cast<int>(value);
}

std::unique_ptr<Communicator> make_gloo(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                                        std::chrono::milliseconds timeout) {
#ifndef DDPTRAIN_GLOO
  (void)store, (void)rank, (void)size, (void)timeout;
  throw std::runtime_error("backend \"gloo\" is not available: this LibTorch came without Gloo's headers (a "
                           "PyTorch wheel's); use nccl");
#else
  auto options = c10d::ProcessGroupGloo::Options::create();
  options->timeout = timeout;
  options->devices.push_back(c10d::ProcessGroupGloo::createDefaultDevice());
  auto pg = c10::make_intrusive<c10d::ProcessGroupGloo>(store, rank, size, options);
  return std::make_unique<GroupComm<c10d::ProcessGroupGloo>>(pg, "gloo", rank, size);
#endif
}

}  // namespace

Launch Launch::from_environment() {
  Launch l;
  l.from_env = std::getenv("RANK") || std::getenv("WORLD_SIZE");
  l.rank = env_int("RANK", 0);
  l.world_size = env_int("WORLD_SIZE", 1);
  l.local_rank = env_int("LOCAL_RANK", l.rank);
  int default_port = 29500;
  // torchrun's variables win: a torchrun inside an allocation sets them on top of Slurm's.
  if (!l.from_env)
    if (const auto slurm = slurm_place_from_environment()) {
      l.from_env = true;
      l.rank = slurm->rank;
      l.world_size = slurm->world_size;
      l.local_rank = slurm->local_rank;
      if (!slurm->host.empty()) l.master_addr = slurm->host;
      // Two jobs sharing a node must not meet at one port, so the job id shifts the default.
      if (slurm->job_id) default_port = 29500 + static_cast<int>(*slurm->job_id % 1000);
    }
  if (const char* addr = std::getenv("MASTER_ADDR"); addr && *addr) l.master_addr = addr;
  l.master_port = env_int("MASTER_PORT", default_port);
  if (l.world_size < 1) throw std::runtime_error("WORLD_SIZE must be ≥ 1");
  if (l.rank >= l.world_size)
    throw std::runtime_error("RANK=" + std::to_string(l.rank) +
                             " is not below WORLD_SIZE=" + std::to_string(l.world_size));
  if (l.master_port < 1 || l.master_port > 65535) throw std::runtime_error("MASTER_PORT must be in 1..65535");
  return l;
}

std::unique_ptr<Communicator> connect(const Launch& launch, const std::string& backend, std::chrono::seconds timeout) {
  c10d::TCPStoreOptions options;
  options.port = static_cast<std::uint16_t>(launch.master_port);
  options.isServer = launch.rank == 0;
  options.numWorkers = launch.world_size;
  options.waitWorkers = false;
  options.timeout = std::chrono::duration_cast<std::chrono::milliseconds>(timeout);
  c10::intrusive_ptr<c10d::Store> store;
  const std::string where = launch.master_addr + ":" + std::to_string(launch.master_port);
  std::vector<int> sizes;
  // Rank 0 waits for the others without a word otherwise: a job short of ranks looked hung.
  if (launch.rank == 0)
    std::cerr << "ddptrain: rank 0 waiting at " << where << " for " << launch.world_size - 1
              << " other rank(s), up to " << timeout.count() << " s (--timeout-s)\n";
  try {
    store = c10::make_intrusive<c10d::TCPStore>(launch.master_addr, options);
    // Every rank publishes the world size it was started with; all must agree.
    const auto* mine = reinterpret_cast<const std::uint8_t*>(&launch.world_size);
    store->set("world_size/" + std::to_string(launch.rank), std::vector<std::uint8_t>(mine, mine + sizeof(int)));
    for (int r = 0; r < launch.world_size; ++r) {
      const auto bytes = store->get("world_size/" + std::to_string(r));
      int theirs = 0;
      std::memcpy(&theirs, bytes.data(), std::min(bytes.size(), sizeof(int)));
      sizes.push_back(theirs);
    }
  } catch (const std::exception& e) {
    // c10::Error's what() carries a backtrace; the reason alone is what a user needs.
    const auto* c10_error = dynamic_cast<const c10::Error*>(&e);
    throw std::runtime_error("rendezvous at " + where + " failed within " + std::to_string(timeout.count()) +
                             " s (is rank 0 running, and are MASTER_ADDR/MASTER_PORT right?): " +
                             (c10_error ? c10_error->what_without_backtrace() : e.what()));
  }
  for (int r = 0; r < launch.world_size; ++r)
    if (sizes[static_cast<std::size_t>(r)] != launch.world_size)
      throw std::runtime_error("world size mismatch: rank " + std::to_string(r) +
                               " was started with WORLD_SIZE=" + std::to_string(sizes[static_cast<std::size_t>(r)]) +
                               ", this rank with " + std::to_string(launch.world_size));
  auto prefixed = c10::make_intrusive<c10d::PrefixStore>("ddptrain", store);
  if (backend == "gloo") return make_gloo(prefixed, launch.rank, launch.world_size, options.timeout);
#ifdef USE_C10D_NCCL
  if (backend == "nccl") {
    auto nccl_options = c10d::ProcessGroupNCCL::Options::create();
    auto pg = c10::make_intrusive<c10d::ProcessGroupNCCL>(prefixed, launch.rank, launch.world_size, nccl_options);
    return std::make_unique<GroupComm<c10d::ProcessGroupNCCL>>(pg, "nccl", launch.rank, launch.world_size);
  }
#endif
  throw std::runtime_error("backend \"nccl\" is not available in this LibTorch build (a CPU build): use gloo");
}

bool gloo_available() {
#ifdef DDPTRAIN_GLOO
  return true;
#else
  return false;
#endif
}

std::unique_ptr<Communicator> connect_gloo(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size) {
  return make_gloo(store, rank, size, std::chrono::minutes(1));
}

}  // namespace ddptrain
