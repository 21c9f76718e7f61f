// Slurm launch without torchrun: the host list parser against Slurm's own syntax, and which of
// torchrun's or Slurm's variables decide a rank's place.
#include <cstdlib>

#include "dist/comm.hpp"
#include "dist/slurm_env.hpp"

// Last: LibTorch brings glog, whose CHECK macros doctest must override.
#include <doctest/doctest.h>

using namespace ddptrain;

namespace {

using Hosts = std::vector<std::string>;

// Each case starts from an environment with neither launcher's variables.
void clear_launch_env() {
  for (const char* name : {"RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT", "SLURM_PROCID",
                           "SLURM_NTASKS", "SLURM_LOCALID", "SLURM_JOB_NODELIST", "SLURM_JOB_ID"})
    ::unsetenv(name);
}

}  // namespace

TEST_CASE("expand_hostlist follows Slurm's compressed syntax") {
  CHECK(expand_hostlist("gpu5") == Hosts{"gpu5"});
  CHECK(expand_hostlist("node[01-04,07],gpu5") ==
        Hosts{"node01", "node02", "node03", "node04", "node07", "gpu5"});
  CHECK(expand_hostlist("n[8-10]") == Hosts{"n8", "n9", "n10"});
  CHECK(expand_hostlist("n[08-10]") == Hosts{"n08", "n09", "n10"});
  CHECK(expand_hostlist("a,b[2,1]") == Hosts{"a", "b2", "b1"});
  CHECK(expand_hostlist("r[1-2]-n[1-2]") == Hosts{"r1-n1", "r1-n2", "r2-n1", "r2-n2"});
  CHECK(expand_hostlist("host-01.example") == Hosts{"host-01.example"});
}

TEST_CASE("expand_hostlist refuses malformed lists, naming the variable") {
  for (const char* bad : {"", "node[01-04", "node01]", "n[4-1]", "n[a-b]", "a,,b", "n[]"}) {
    INFO(bad);
    CHECK_THROWS_WITH_AS(expand_hostlist(bad), doctest::Contains("SLURM_JOB_NODELIST"), std::runtime_error);
  }
}

TEST_CASE("first_slurm_host takes the first host") {
  CHECK(first_slurm_host("node[03-04,07],gpu5") == "node03");
  CHECK(first_slurm_host("gpu5,node[1-2]") == "gpu5");
  // Not safe to hand to a shell: the parser alone answers.
  CHECK(first_slurm_host("x[1-2];") == "x1;");
}

TEST_CASE("Launch from Slurm's variables alone") {
  clear_launch_env();
  ::setenv("SLURM_PROCID", "1", 1);
  ::setenv("SLURM_NTASKS", "4", 1);
  ::setenv("SLURM_LOCALID", "1", 1);
  ::setenv("SLURM_JOB_NODELIST", "node[07-08]", 1);
  ::setenv("SLURM_JOB_ID", "12345", 1);
  auto l = Launch::from_environment();
  CHECK(l.from_env);
  CHECK(l.rank == 1);
  CHECK(l.world_size == 4);
  CHECK(l.local_rank == 1);
  CHECK(l.master_addr == "node07");
  CHECK(l.master_port == 29500 + 345);
  ::setenv("MASTER_PORT", "4000", 1);
  ::setenv("MASTER_ADDR", "10.0.0.1", 1);
  l = Launch::from_environment();
  CHECK(l.master_port == 4000);
  CHECK(l.master_addr == "10.0.0.1");

  SUBCASE("torchrun's variables win over Slurm's") {
    ::setenv("RANK", "0", 1);
    ::setenv("WORLD_SIZE", "2", 1);
    ::setenv("LOCAL_RANK", "0", 1);
    l = Launch::from_environment();
    CHECK(l.rank == 0);
    CHECK(l.world_size == 2);
    CHECK(l.local_rank == 0);
  }
  SUBCASE("a bad Slurm variable is named") {
    ::setenv("SLURM_NTASKS", "1", 1);
    CHECK_THROWS_WITH_AS(Launch::from_environment(), doctest::Contains("SLURM_PROCID=1"), std::runtime_error);
    ::setenv("SLURM_NTASKS", "two", 1);
    CHECK_THROWS_WITH_AS(Launch::from_environment(), doctest::Contains("SLURM_NTASKS"), std::runtime_error);
  }
  clear_launch_env();
}

TEST_CASE("no launcher's variables: one process") {
  clear_launch_env();
  const auto l = Launch::from_environment();
  CHECK_FALSE(l.from_env);
  CHECK(l.world_size == 1);
  CHECK(l.master_port == 29500);
}
