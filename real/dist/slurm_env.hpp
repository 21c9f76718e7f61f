// Exists so that ddptrain can be started by srun/sbatch alone, without torchrun: Slurm's own
// variables say where each task sits, and its compressed node list says where rank 0 listens.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace ddptrain {

// Slurm's compressed host list ("node[01-04,07],gpu5", "r[1-2]-n[1-2]") in Slurm's order, zero
// padding kept; a malformed list is a std::runtime_error quoting it.
std::vector<std::string> expand_hostlist(const std::string& list);

// The first host of SLURM_JOB_NODELIST-style `list`: `scontrol show hostnames` where it runs
// (it knows every syntax Slurm does), else expand_hostlist.
std::string first_slurm_host(const std::string& list);

struct SlurmPlace {
  int rank = 0, world_size = 1, local_rank = 0;
  std::string host;  // empty where SLURM_JOB_NODELIST is unset
  std::optional<long> job_id;
};
// From SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID and SLURM_JOB_NODELIST; nullopt outside a Slurm
// task (no SLURM_PROCID). Throws std::runtime_error naming a malformed variable.
std::optional<SlurmPlace> slurm_place_from_environment();

}  // namespace ddptrain
