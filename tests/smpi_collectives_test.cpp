// The fast engine's ring collectives against SimGrid's SMPI on the same platform files and
// network model: MPI_Allgather (ring) and MPI_Reduce_scatter (Open MPI's ring) against the
// gather FSDP's units and ZeRO-2's buckets are timed with, MPI_Allreduce (logical ring:
// reduce-scatter then all-gather) against DDP's ring allreduce. SMPI runs each ring step by
// step, message by message, with its own MPI point-to-point protocol: an independent
// implementation of the same collectives (tests/smpi/collectives.c). And a sharded step's
// collectives on a user's XML platform, which SimGrid loads once per process.
#include <doctest/doctest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <sys/wait.h>
#include <unistd.h>

#include "engine/step_sim.hpp"

using namespace ddpsim;

namespace {

struct SmpiTimes {
  double allgather_ms = 0, reduce_scatter_ms = 0, allreduce_ms = 0;
};

// Runs the MPI program over `ranks` ranks on hosts gpu0.. of `platform`, one line per size.
std::map<double, SmpiTimes> run_smpi(const std::string& platform, int ranks, const std::vector<double>& sizes) {
  const auto hostfile = std::filesystem::temp_directory_path() / ("ddpsim-smpi-hosts-" + std::to_string(ranks));
  {
    std::ofstream hosts(hostfile);
    for (int g = 0; g < ranks; ++g) hosts << "gpu" << g << "\n";
  }
  // ddpsim's network configuration (engine/simgrid_engine.cpp), and SMPI's own corrections to
  // it (bandwidth and latency factors for real MPI stacks) off.
  std::string command = std::string(SMPIRUN) + " -np " + std::to_string(ranks) + " -platform " + platform +
                        " -hostfile " + hostfile.string() +
                        " --cfg=network/model:CM02 --cfg=network/TCP-gamma:0 --cfg=network/crosstraffic:0"
                        " --cfg=smpi/bw-factor:1 --cfg=smpi/lat-factor:1 --cfg=smpi/simulate-computation:no"
                        " --cfg=smpi/allgather:ring --cfg=smpi/reduce_scatter:ompi_ring --cfg=smpi/allreduce:lr"
                        " --log=root.thresh:critical " SMPI_PROGRAM;
  for (const double s : sizes) command += " " + std::to_string(static_cast<long>(s));
  std::map<double, SmpiTimes> out;
  FILE* pipe = ::popen((command + " 2>&1").c_str(), "r");
  REQUIRE(pipe != nullptr);
  std::string text;
  char buffer[512];
  while (std::fgets(buffer, sizeof buffer, pipe)) text += buffer;
  REQUIRE_MESSAGE(::pclose(pipe) == 0, "smpirun failed: " << text);
  std::istringstream lines(text);
  double bytes = 0;
  SmpiTimes t;
  while (lines >> bytes >> t.allgather_ms >> t.reduce_scatter_ms >> t.allreduce_ms) out[bytes] = t;
  REQUIRE_MESSAGE(out.size() == sizes.size(), "unexpected smpirun output: " << text);
  return out;
}

EngineSetup xml_setup(const std::string& file, int ranks) {
  EngineSetup s;
  s.G = ranks;
  s.platform.topology = "xml";
  s.platform.file = file;
  for (int g = 0; g < ranks; ++g) s.platform.hosts.push_back("gpu" + std::to_string(g));
  return s;
}

// SMPI's slowest rank counts from its own exit of the barrier before, which the ranks leave up
// to a message latency apart: agreement within 1% and that skew (25 µs bounds a route's latency
// on these platforms).
void check_close(double ddpsim_ms, double smpi_ms, const std::string& what) {
  INFO(what << ": ddpsim " << ddpsim_ms << " ms, SMPI " << smpi_ms << " ms");
  CHECK(std::abs(ddpsim_ms - smpi_ms) <= 0.01 * smpi_ms + 0.025);
}

// What `work` returns, run in a child process: SimGrid loads one XML platform per process, and
// only as the process's first platform.
std::string in_child(const std::function<std::string()>& work) {
  int fds[2];
  REQUIRE(::pipe(fds) == 0);
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    ::close(fds[0]);
    const std::string text = work();
    [[maybe_unused]] const auto written = ::write(fds[1], text.data(), text.size());
    ::_exit(0);
  }
  ::close(fds[1]);
  std::string text;
  char buffer[512];
  for (ssize_t n; (n = ::read(fds[0], buffer, sizeof buffer)) > 0;) text.append(buffer, static_cast<std::size_t>(n));
  ::close(fds[0]);
  int status = 0;
  ::waitpid(child, &status, 0);
  REQUIRE(WIFEXITED(status));
  REQUIRE(WEXITSTATUS(status) == 0);
  return text;
}

// ddpsim's times of each size on one platform: the all-gather's and the ring allreduce's.
std::map<double, std::pair<double, double>> ddpsim_times(const std::string& file, int ranks,
                                                         const std::vector<double>& sizes) {
  const std::string text = in_child([&] {
    const auto ms = measure_collectives_ms(xml_setup(file, ranks), {{"allgather", sizes}, {"ring", sizes}});
    std::string out;
    char line[128];
    for (const double s : sizes) {
      std::snprintf(line, sizeof line, "%.17g %.17g %.17g\n", s, ms[0].at(s), ms[1].at(s));
      out += line;
    }
    return out;
  });
  std::map<double, std::pair<double, double>> out;
  std::istringstream lines(text);
  double bytes = 0, gathered = 0, reduced = 0;
  while (lines >> bytes >> gathered >> reduced) out[bytes] = {gathered, reduced};
  REQUIRE(out.size() == sizes.size());
  return out;
}

void compare(const std::string& name, int ranks) {
  const std::string file = std::string(DDPSIM_SOURCE_DIR) + "/models/" + name;
  const std::vector<double> sizes = {4e6, 32e6, 128e6};
  const auto smpi = run_smpi(file, ranks, sizes);
  const auto ours = ddpsim_times(file, ranks, sizes);
  for (const double s : sizes) {
    const std::string at = name + ", " + std::to_string(static_cast<long>(s)) + " B";
    const auto [gathered, reduced] = ours.at(s);
    check_close(gathered, smpi.at(s).allgather_ms, "all-gather, " + at);
    check_close(gathered, smpi.at(s).reduce_scatter_ms, "reduce-scatter, " + at);
    check_close(reduced, smpi.at(s).allreduce_ms, "allreduce, " + at);
  }
}

}  // namespace

TEST_CASE("ring collectives agree with SMPI's on 8 GPUs over an NVSwitch") {
  compare("nvlink-8x-h100.xml", 8);
}

TEST_CASE("ring collectives agree with SMPI's on 4 GPUs behind one PCIe root complex") {
  compare("pcie-4x-rtx3090.xml", 4);
}

TEST_CASE("ring collectives agree with SMPI's on 4 nodes of 4 GPUs") {
  compare("cluster-4x4-h100.xml", 16);
}

TEST_CASE("a sharded step's collectives are timed on one load of a user's XML platform") {
  const std::string file = std::string(DDPSIM_SOURCE_DIR) + "/models/cluster-4x4-h100.xml";
  const std::string text = in_child([&] {
    EngineSetup s = xml_setup(file, 16);
    s.sharding = "hybrid";
    s.shard_group = 4;
    s.units = {{100e6, 0.1, true}, {50e6, 0.9, false}};
    const FastEngine engine(s);
    return std::to_string(engine.gather_ms().size()) + " " + std::to_string(engine.replica_ms().size());
  });
  CHECK(text == "2 2");  // the root's size and the block's, in a group and across groups
}
