#include "eval/bench.hpp"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <stdexcept>

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/stats.hpp"
#include "data/lengths.hpp"
#include "eval/config.hpp"
#include "eval/pipeline_eval.hpp"
#include "eval/simulate.hpp"
#include "report/policy_run.hpp"

namespace ddpsim {

namespace {

struct Shape {
  int G, B, K, decisions;
};

// Enumeration tries ~B^(G-1)/(G-1)! allocations: only the study's own shape finishes.
bool enumeration_feasible(const Shape& s) {
  return s.G <= 4 && s.B <= 64;
}

// The mean decision latency a policy should stay within at a shape, in µs (0: none).
double decision_target_us(const std::string& policy, const std::string& solver, const Shape& s) {
  if (policy == "minmax" && solver == "exact" && s.G == 4 && s.B == 48) return 5;
  if ((policy == "minmax" && solver == "exact") || policy == "kk") return s.G == 1024 && s.B == 16384 ? 200 : 0;
  return 0;
}

}  // namespace

std::vector<SchedBenchResult> run_sched_bench(double scale, const std::function<void(const std::string&)>& progress) {
  static const Shape shapes[] = {{4, 48, 64, 4000}, {8, 256, 64, 2000}, {64, 2048, 64, 400}, {1024, 16384, 64, 300}};
  const std::vector<int> dataset = histogram_source(sst2_train_histogram(), 256)->dataset(/*seed=*/1);
  std::vector<SchedBenchResult> results;
  for (const Shape& shape : shapes) {
    const std::string k = std::to_string(shape.K);
    std::vector<std::string> specs = {"static", "minmax:cost=tokens:buffer=" + k + ":solver=exact"};
    if (enumeration_feasible(shape)) specs.push_back("minmax:cost=tokens:buffer=" + k + ":solver=enumerate");
    specs.insert(specs.end(), {"kk", "sorted", "token_budget:max_tokens=512:buffer=" + k});
    for (const auto& text : specs) {
      const PolicySpec spec = parse_policy_spec(text);
      const int decisions = std::max(5, static_cast<int>(std::lround(shape.decisions * scale)));
      const int warmup = std::max(2, decisions / 10);
      progress(spec.label() + " at G=" + std::to_string(shape.G) + ", B=" + std::to_string(shape.B) + ", K=" + k +
               " (" + std::to_string(decisions) + " decisions)");
      StepShape step_shape;
      step_shape.G = shape.G;
      step_shape.B = shape.B;
      step_shape.seed = 1;
      const PolicyRun run = run_policy(spec, step_shape, warmup + decisions, dataset);
      const std::span<const double> timed(run.decision_us.data() + warmup, static_cast<std::size_t>(decisions));
      results.push_back({spec.name, run.solver, shape.G, shape.B, shape.K, decisions, mean(timed),
                         percentile(timed, 95), scale == 1.0 ? decision_target_us(spec.name, run.solver, shape) : 0});
    }
  }
  return results;
}

}  // namespace ddpsim

namespace ddpsim {

namespace {

struct SimCase {
  const char* name;
  int G, B, steps;
  const char* topology;
  const char* mode;
  const char* algorithm;
  double target_s;
  const char* data;  // the data section as JSON (nullptr: the default config's)
  bool frontier;     // minutes long: left out of --quick
  const char* data_parallel = "ddp";
  bool decoder = false;            // Llama-3.2-1B (spec-derived, bf16 on H100 SXM) instead of DistilBERT
  const char* parallel = nullptr;  // a pipeline job's parallel section as JSON, with one policy
};

// The pipeline cases' job: 1F1B, ZeRO-2, 16 micro-batches over 4 stages (4 at 65,536 GPUs,
// where GPUs × micro-batches is bounded).
constexpr const char* PIPELINE_4x16 = R"({"stages": 4, "micro_batches": 16, "schedule": "1f1b",
  "data_parallel": "zero2", "activation_bytes_per_token": 4096})";
constexpr const char* PIPELINE_4x4 = R"({"stages": 4, "micro_batches": 4, "schedule": "1f1b",
  "data_parallel": "zero2", "activation_bytes_per_token": 4096})";

// Llama-3.2-1B's Hugging Face config.json (as models/hf/llama-3.2-1b.json), written beside the
// spec the decoder cases derive their model from: the binary carries no model files.
constexpr const char* LLAMA_1B_HF = R"({"architectures": ["LlamaForCausalLM"], "model_type": "llama",
  "hidden_size": 2048, "intermediate_size": 8192, "num_hidden_layers": 16, "num_attention_heads": 32,
  "num_key_value_heads": 8, "head_dim": 64, "hidden_act": "silu", "vocab_size": 128256,
  "max_position_embeddings": 131072, "rms_norm_eps": 1e-05, "tie_word_embeddings": true,
  "attention_bias": false, "mlp_bias": false, "torch_dtype": "bfloat16"})";

// A temporary folder holding the decoder's spec and config, removed with it.
struct DecoderFiles {
  std::filesystem::path dir = std::filesystem::temp_directory_path() / ("ddpsim-bench-" + std::to_string(::getpid()));
  DecoderFiles() {
    std::filesystem::create_directories(dir);
    std::ofstream(dir / "llama-3.2-1b.json") << LLAMA_1B_HF << "\n";
    std::ofstream(dir / "spec.json") << R"({"hf_config": "llama-3.2-1b.json", "gpu": "h100-sxm", "dtype": "bf16",
      "efficiency": 0.4, "name": "llama-3.2-1b-h100"})"
                                     << "\n";
  }
  ~DecoderFiles() {
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
  }
  std::string spec() const { return (dir / "spec.json").string(); }
};

// Runs the case in a child process and returns its wall time, CPU time and peak RSS: wait4()
// gives the child's own, where getrusage() in this process would mix in the earlier cases'.
SimBenchResult time_in_child(const Config& config) {
  int fds[2];
  if (::pipe(fds) != 0) throw std::runtime_error(std::string("pipe: ") + std::strerror(errno));
  const pid_t child = ::fork();
  if (child < 0) throw std::runtime_error(std::string("fork: ") + std::strerror(errno));
  if (child == 0) {
    ::close(fds[0]);
    int code = 1;
    try {
      const auto start = std::chrono::steady_clock::now();
      const auto source = make_length_source(config.data, config.training.max_length);
      const std::vector<int> dataset = config_dataset(config, *source);
      if (config.parallel)
        simulate_parallel(config);
      else
        simulate_streamed(config, dataset, {0, 0}, {}, {});  // as `compare` runs it, summaries included
      const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      if (::write(fds[1], &wall, sizeof wall) == static_cast<ssize_t>(sizeof wall)) code = 0;
    } catch (const std::exception& e) {
      std::fprintf(stderr, "bench: %s\n", e.what());
    }
    ::_exit(code);
  }
  ::close(fds[1]);
  SimBenchResult r;
  ssize_t got;
  while ((got = ::read(fds[0], &r.wall_s, sizeof r.wall_s)) < 0 && errno == EINTR) {
  }
  ::close(fds[0]);
  int status = 0;
  struct rusage usage {};
  while (::wait4(child, &status, 0, &usage) < 0 && errno == EINTR) {
  }
  if (got != static_cast<ssize_t>(sizeof r.wall_s) || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
    throw std::runtime_error("bench: the simulation case " + config.origin + " failed");
  const auto seconds = [](const timeval& t) { return double(t.tv_sec) + double(t.tv_usec) * 1e-6; };
  r.cpu_s = seconds(usage.ru_utime) + seconds(usage.ru_stime);
  r.peak_rss_mib = double(usage.ru_maxrss) / 1024.0;  // Linux: KiB
  return r;
}

}  // namespace

std::vector<SimBenchResult> run_sim_bench(double scale, const std::function<void(const std::string&)>& progress) {
  static const char* const FRONTIER_DATA =
      R"({"source": "lognormal", "mean": 13.3, "std": 8, "min": 2, "max": 66, "samples": 3000000})";
  static const SimCase cases[] = {
      {"study (4x RTX 3090, PCIe)", 4, 48, 800, "pcie", "fast", "ring", 1.0, nullptr, false},
      {"study, every collective in SimGrid", 4, 48, 800, "pcie", "full", "ring", 0, nullptr, false},
      {"64 GPUs (8 nodes x 8)", 64, 768, 800, "cluster", "full", "ring", 10.0, nullptr, false},
      {"1024 GPUs (128 nodes x 8)", 1024, 16384, 200, "cluster", "fast", "hierarchical", 60.0, nullptr, false},
      {"1024 GPUs, every collective in SimGrid", 1024, 16384, 200, "cluster", "full", "hierarchical", 60.0, nullptr,
       true},
      {"16384 GPUs (2048 nodes x 8)", 16384, 262144, 200, "cluster", "fast", "hierarchical", 60.0, FRONTIER_DATA, true},
      {"1024 GPUs, FSDP, 1B decoder by layer", 1024, 4096, 200, "cluster", "fast", "ring", 60.0, nullptr, false, "fsdp",
       true},
      {"1024 GPUs, FSDP, every collective in SimGrid", 1024, 4096, 200, "cluster", "full", "ring", 60.0, nullptr, false,
       "fsdp", true},
      {"16384 GPUs, FSDP, 1B decoder by layer", 16384, 262144, 200, "cluster", "fast", "ring", 60.0, FRONTIER_DATA,
       true, "fsdp", true},
      {"1024 GPUs, pipeline 4 x 256, 1B decoder", 1024, 16384, 100, "cluster", "full", "ring", 0, nullptr, false, "ddp",
       true, PIPELINE_4x16},
      {"1024 GPUs, pipeline 4 x 256, 1B decoder", 1024, 16384, 100, "cluster", "fast", "ring", 0, nullptr, false, "ddp",
       true, PIPELINE_4x16},
      {"4096 GPUs, pipeline 4 x 1024, 1B decoder", 4096, 65536, 100, "cluster", "fast", "ring", 60.0, FRONTIER_DATA,
       true, "ddp", true, PIPELINE_4x16},
      {"4096 GPUs, pipeline, every flow in SimGrid", 4096, 65536, 100, "cluster", "full", "ring", 0, FRONTIER_DATA,
       true, "ddp", true, PIPELINE_4x16},
      {"16384 GPUs, pipeline 4 x 4096, 1B decoder", 16384, 262144, 100, "cluster", "fast", "ring", 500.0, FRONTIER_DATA,
       true, "ddp", true, PIPELINE_4x16},
      {"65536 GPUs, pipeline 4 x 16384, 4 micro-batches", 65536, 1048576, 20, "cluster", "fast", "ring", 0,
       FRONTIER_DATA, true, "ddp", true, PIPELINE_4x4},
  };
  const DecoderFiles decoder;
  std::vector<SimBenchResult> results;
  for (const SimCase& c : cases) {
    if (c.frontier && scale < 1.0) continue;
    const int steps = std::max(2, static_cast<int>(std::lround(c.steps * scale)));
    nlohmann::json doc = default_config_json();
    doc["training"]["world_size"] = c.G;
    doc["training"]["global_batch"] = c.B;
    doc["training"]["steps"] = steps;
    doc["platform"] = {{"topology", c.topology}};
    doc["simulation"] = {{"mode", c.mode}, {"algorithm", c.algorithm}};
    if (c.G > 4) doc["model"] = c.decoder ? decoder.spec() : "h100-distilbert";
    doc["training"]["data_parallel"] = c.data_parallel;
    if (c.parallel) {  // its own keys: a pipeline has no DDP buckets
      doc["parallel"] = nlohmann::json::parse(c.parallel);
      doc["training"].erase("data_parallel");
      doc["policies"] = {"static"};
    }
    if (c.data) doc["data"] = nlohmann::json::parse(c.data);
    const Config config = parse_config(doc, std::string("bench case ") + c.name, "");
    progress(std::string(c.name) + ": " + std::to_string(config.policies.size()) +
             (config.policies.size() == 1 ? " policy x " : " policies x ") + std::to_string(steps) + " steps, " +
             c.mode + " mode");
    SimBenchResult r = time_in_child(config);
    const double rank_steps = double(config.policies.size()) * steps * c.G;
    r.name = c.name;
    r.mode = c.mode;
    r.topology = c.topology;
    r.algorithm = c.algorithm;
    r.G = c.G;
    r.steps = steps;
    r.policies = static_cast<int>(config.policies.size());
    r.rank_steps_per_s = rank_steps / r.wall_s;
    r.target_s = scale == 1.0 ? c.target_s : 0.0;
    results.push_back(std::move(r));
  }
  return results;
}

}  // namespace ddpsim
