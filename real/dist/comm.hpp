// The collectives ddptrain needs, over torch c10d: ProcessGroupNCCL on CUDA, ProcessGroupGloo
// on CPU, behind one small interface so the trainer reads the same on LibTorch 1.13 (where
// process groups are ProcessGroup subclasses) and 2.x (where they are Backends). PyTorch's
// wheels ship no Gloo headers: a LibTorch taken from one has NCCL only.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include <torch/torch.h>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>

namespace ddptrain {

// c10d's handle on an asynchronous collective (ProcessGroup::Work on 1.13, c10d::Work on 2.x).
using WorkPtr = decltype(std::declval<c10d::ProcessGroup&>().barrier());

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual std::string backend() const = 0;
  // Sum in place, asynchronously.
  virtual WorkPtr allreduce_sum(torch::Tensor& tensor) = 0;
  // Every rank's `mine` (same shape everywhere), stacked along a new first dimension.
  virtual torch::Tensor allgather(const torch::Tensor& mine) = 0;
  virtual void broadcast(torch::Tensor& tensor, int root) = 0;
  virtual void barrier() = 0;
};

// Where this process sits, from torchrun-style environment variables (RANK, WORLD_SIZE,
// LOCAL_RANK, MASTER_ADDR, MASTER_PORT); without them, a single process.
struct Launch {
  int rank = 0, world_size = 1, local_rank = 0;
  std::string master_addr = "127.0.0.1";
  int master_port = 29500;
  bool from_env = false;

  static Launch from_environment();  // throws std::runtime_error naming the bad variable
};

// Rendezvous through a TCPStore (rank 0 serves) and a process group of `backend` (gloo | nccl);
// every rank checks that all agree on the world size. A peer that does not show up within
// `timeout` is a std::runtime_error saying which address was tried, never a hang.
std::unique_ptr<Communicator> connect(const Launch& launch, const std::string& backend, std::chrono::seconds timeout);
// Whether this LibTorch was built with Gloo and its headers were found.
bool gloo_available();
// Ranks inside one process sharing `store` (threads; tests and --emulate-ranks checks).
std::unique_ptr<Communicator> connect_gloo(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size);

}  // namespace ddptrain
