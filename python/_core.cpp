// ddpsim._core: the scheduler library as ddptrain and the simulator use it (sampler, policies,
// trace writer), so that a Python training loop makes the decisions they make, step for step.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "common/json_util.hpp"
#include "data/lengths.hpp"
#include "data/sampler.hpp"
#include "ddpsim_version.hpp"
#include "model/hf_model.hpp"
#include "model/perf_model.hpp"
#include "report/outputs.hpp"
#include "report/policy_run.hpp"
#include "sched/scheduler.hpp"

namespace py = pybind11;
using namespace ddpsim;

namespace {

// One planned step; every rank's part of it converts to Python only when asked for.
struct Plan {
  StepPlan plan;
  int step = 0;
  bool packed = false;  // the samples packed end to end: no padding, and Σ s² in the row

  std::size_t rank(int g) const {
    const int G = static_cast<int>(plan.batches.size());
    if (g < 0 || g >= G)
      throw InputError("rank " + std::to_string(g) + " is out of range: world size G=" + std::to_string(G) +
                       " (ranks 0 to " + std::to_string(G - 1) + ")");
    return static_cast<std::size_t>(g);
  }
  py::list indices(int g) const {
    const auto& batch = plan.batches[rank(g)];
    py::list out(batch.size());
    for (std::size_t i = 0; i < batch.size(); ++i) out[i] = py::int_(batch[i].index);
    return out;
  }
  std::vector<int> lengths(int g) const {
    std::vector<int> out;
    for (const Sample& s : plan.batches[rank(g)]) out.push_back(s.len);
    return out;
  }
  // The data pass (the sampler's epoch) each rank's samples came from: the newest of the step.
  int newest_epoch() const {
    int newest = 0;
    for (const auto& batch : plan.batches)
      for (const Sample& s : batch) newest = std::max(newest, static_cast<int>(s.epoch));
    return newest;
  }
  std::vector<int> micro_sizes(int g) const {
    const auto gi = rank(g);
    if (plan.micro_sizes.empty()) return {static_cast<int>(plan.batches[gi].size())};
    return plan.micro_sizes[gi];
  }
  py::dict row(int g) const {
    const RankStep r = plan_row(plan, step, static_cast<int>(rank(g)), packed);
    py::dict d;
    d["step"] = r.step;
    d["rank"] = r.rank;
    d["batch_size"] = r.batch_size;
    d["max_len"] = r.max_len;
    d["real_tokens"] = r.real_tokens;
    d["padded_tokens"] = r.padded_tokens;
    d["global_batch"] = r.global_batch;
    d["loss_weight"] = r.loss_weight;
    py::list micro;
    for (const auto& m : r.micro)
      micro.append(packed ? py::make_tuple(m.batch_size, m.max_len, m.real_tokens, m.sq_tokens)
                          : py::make_tuple(m.batch_size, m.max_len, m.real_tokens));
    d["micro"] = micro;
    if (packed) d["sq_tokens"] = r.sq_tokens;
    return d;
  }
};

// ddptrain's stream: the seeded DistributedSampler, the prefetch buffers and the policy, planned
// one step at a time (Trainer::plan_next), from lengths the caller holds.
class Stream {
 public:
  Stream(std::vector<int> lengths, int world_size, int global_batch, const std::string& policy,
         std::optional<std::vector<int>> b_max, std::uint64_t seed, std::optional<int> max_length, int micro_batches,
         const std::string& micro_batching, const std::string& perf_model, const std::string& attention)
      : lengths_(std::move(lengths)) {
    if (attention != "padded" && attention != "packed")
      throw InputError("attention \"" + attention + "\": expected padded or packed");
    shape_.packed = attention == "packed";
    if (lengths_.empty()) throw InputError("lengths: empty dataset (no samples)");
    int longest = 0;
    for (std::size_t i = 0; i < lengths_.size(); ++i) {
      if (lengths_[i] < 1)
        throw InputError("lengths[" + std::to_string(i) + "]: expected one positive integer length, got \"" +
                         std::to_string(lengths_[i]) + "\"");
      longest = std::max(longest, lengths_[i]);
    }
    shape_.max_length = max_length.value_or(longest);
    if (shape_.max_length < longest)
      throw InputError("max_length " + std::to_string(shape_.max_length) + " is shorter than the longest sample (" +
                       std::to_string(longest) + " tokens): give the lengths after truncation");
    shape_.G = world_size;
    shape_.B = global_batch;
    shape_.b_max = b_max.value_or(std::vector<int>{});
    shape_.micro_batches = micro_batches;
    shape_.micro_batching = micro_batching;
    shape_.seed = seed;
    if (!perf_model.empty())
      shape_.time_cost =
          std::make_shared<ModelTimeCost>(std::make_shared<const PerfModel>(load_perf_model(perf_model)));
    const PolicySpec spec = parse_policy_spec(policy);
    check_micro_batches(spec, micro_batches);
    label_ = spec.label();
    policy_ = make_scheduler(spec, shape_);
    resolved_ = resolved_policy(spec, shape_).label();
    // ddptrain refuses a step larger than the data (it would train on samples twice).
    if (spec.name != "token_budget" && lengths_.size() < static_cast<std::size_t>(global_batch))
      throw InputError("lengths: " + std::to_string(lengths_.size()) + " samples, fewer than global batch B=" +
                       std::to_string(global_batch) + ": a step would train on samples twice");
    sampler_ = std::make_unique<DistributedSampler>(lengths_, world_size, seed);
    buffers_ = std::make_unique<RankBuffers>(*sampler_);
  }

  // The refusals compare and ddptrain make of a count (a sampler is one policy: verl alone).
  void check_micro_batches(const PolicySpec& spec, int count) const {
    if (count < 1 || count > 10000)
      throw InputError("micro_batches " + std::to_string(count) + ": expected an integer from 1 to 10000");
    if (shape_.B >= shape_.G && count > shape_.B / shape_.G)
      throw InputError("micro_batches (" + std::to_string(count) +
                       ") is more than a rank's share of the global batch (" + std::to_string(shape_.B) + " over " +
                       std::to_string(shape_.G) + " ranks: " + std::to_string(shape_.B / shape_.G) +
                       "): every micro-batch needs a sample");
    if (forms_own_micro_batches(spec.name) && count > 1)
      throw InputError(own_micro_batches_refusal("micro_batches " + std::to_string(count)));
  }

  std::shared_ptr<Plan> next() {
    auto out = std::make_shared<Plan>();
    out->step = step_++;
    out->packed = shape_.packed;
    buffers_->fill_all(policy_->buffer_size());
    policy_->plan(*buffers_, out->plan);
    return out;
  }
  void skip(int steps) {
    StepPlan plan;
    for (int s = 0; s < steps; ++s) {
      buffers_->fill_all(policy_->buffer_size());
      policy_->plan(*buffers_, plan);
      ++step_;
    }
  }

  int steps_done() const { return step_; }
  std::size_t buffer_size() const { return policy_->buffer_size(); }
  const std::string& label() const { return label_; }
  const std::string& resolved() const { return resolved_; }
  std::string solver() const { return policy_->solver(); }
  int world_size() const { return shape_.G; }
  int global_batch() const { return shape_.B; }
  int max_length() const { return shape_.max_length; }

 private:
  std::vector<int> lengths_;  // the sampler reads them in place
  StepShape shape_;
  std::string label_, resolved_;
  std::unique_ptr<Scheduler> policy_;
  std::unique_ptr<DistributedSampler> sampler_;
  std::unique_ptr<RankBuffers> buffers_;
  int step_ = 0;
};

double number(const py::dict& d, const char* key) {
  if (!d.contains(key) || d[key].is_none()) return NOT_MEASURED;
  return d[key].cast<double>();
}
template <typename T>
T integer(const py::dict& d, const char* key) {
  if (!d.contains(key) || d[key].is_none()) return 0;
  return d[key].cast<T>();
}

// Micro-batch k of a row's "micro": (size, longest, tokens), and Σ s² when packed.
MicroBatchShape micro_batch(const py::handle& m, std::size_t k, bool packed) {
  const std::size_t want = packed ? 4 : 3;
  const std::string what = "micro[" + std::to_string(k) + "] " + py::repr(m).cast<std::string>() +
                           ": expected (batch_size, max_len, real_tokens" + (packed ? ", sq_tokens" : "") + ")";
  if (!py::isinstance<py::sequence>(m) || py::isinstance<py::str>(m) || py::len(m) != want)
    throw InputError(what + (packed ? ", as packed sequences give it" : ""));
  std::vector<std::int64_t> v;
  for (const auto& x : m.cast<py::sequence>()) {
    if (py::isinstance<py::bool_>(x) || py::isinstance<py::float_>(x)) throw InputError(what + " of integers");
    try {
      v.push_back(x.cast<std::int64_t>());  // Python's and NumPy's integers
    } catch (const py::cast_error&) {
      throw InputError(what + " of 64-bit integers");
    }
  }
  if (v[0] > std::numeric_limits<int>::max() || v[1] > std::numeric_limits<int>::max())
    throw InputError(what + ", each size within an int");
  return {static_cast<int>(v[0]), static_cast<int>(v[1]), v[2], packed ? v[3] : 0};
}

RankStep to_row(const py::dict& d, bool packed) {
  RankStep r;
  r.step = integer<int>(d, "step");
  r.rank = integer<int>(d, "rank");
  r.batch_size = integer<int>(d, "batch_size");
  r.max_len = integer<int>(d, "max_len");
  r.real_tokens = integer<std::int64_t>(d, "real_tokens");
  r.padded_tokens =
      d.contains("padded_tokens") ? integer<std::int64_t>(d, "padded_tokens") : std::int64_t{r.batch_size} * r.max_len;
  r.global_batch = integer<int>(d, "global_batch");
  r.loss_weight = d.contains("loss_weight") ? d["loss_weight"].cast<double>() : 1.0;
  r.fwd_ms = number(d, "fwd_ms");
  r.bwd_ms = number(d, "bwd_ms");
  r.comm_wait_ms = number(d, "comm_wait_ms");
  r.opt_ms = number(d, "opt_ms");
  r.step_ms = number(d, "step_ms");
  r.peak_mem_mib = number(d, "peak_mem_mib");
  r.loss = number(d, "loss");
  r.allreduce_bytes = number(d, "allreduce_bytes");
  r.allreduce_ms = number(d, "allreduce_ms");
  r.concurrent_allreduce_bytes = number(d, "concurrent_allreduce_bytes");
  r.sq_tokens = integer<std::int64_t>(d, "sq_tokens");
  if (d.contains("micro") && !d["micro"].is_none() && py::len(d["micro"]) > 1)
    for (const auto& m : d["micro"]) r.micro.push_back(micro_batch(m, r.micro.size(), packed));
  return r;
}

// The trace CSV of design.md §3.1 with its metadata lines, written to a temporary beside `path`
// and renamed into place, so that an interrupted run leaves no half-written trace. A metadata
// line attention=packed gives the rows their Σ s² columns.
void write_trace(const std::string& path, const Metadata& metadata, const std::vector<py::tuple>& runs) {
  const bool packed = std::any_of(metadata.begin(), metadata.end(),
                                  [](const auto& line) { return line == Metadata::value_type{"attention", "packed"}; });
  std::vector<PolicyRun> out;
  for (const auto& run : runs) {
    PolicyRun r;
    r.packed = packed;
    r.label = run[0].cast<std::string>();
    r.G = run[1].cast<int>();
    for (const auto& row : run[2]) r.rows.push_back(to_row(row.cast<py::dict>(), packed));
    out.push_back(std::move(r));
  }
  publish({{path, trace_csv(out, metadata)}});
}

std::vector<int> synthetic(const std::string& histogram, std::int64_t samples, int max_length, std::uint64_t seed) {
  const auto hist =
      histogram == "sst2" ? sst2_train_histogram() : histogram_from_json(read_json_file(histogram), histogram);
  return synthetic_lengths(hist, samples, max_length, seed);
}

}  // namespace

namespace {

// A policy string as the command line checks it: a known name, known options, values in range.
// Built once on a shape every policy accepts (one rank of one sample of one token; the built-in
// RTX 3090 model for cost=model), so what depends on a run's own shape is left to the run.
PolicySpec checked_policy(const std::string& text) {
  PolicySpec spec = parse_policy_spec(text);
  StepShape any;
  any.G = 1;
  any.B = 1;
  any.max_length = 1;
  any.time_cost =
      std::make_shared<ModelTimeCost>(std::make_shared<const PerfModel>(load_perf_model("rtx3090-distilbert")));
  (void)make_scheduler(spec, any);
  return spec;
}

}  // namespace

#ifdef DDPSIM_WITH_SIMULATOR
void bind_simulator(py::module_& m);  // simulator.cpp
#endif

PYBIND11_MODULE(_core, m) {
  m.doc() = "ddpsim's batch scheduler library (the policies of ddpsim and ddptrain)";
  m.attr("version") = DDPSIM_VERSION_STRING;  // in trainer-only builds too: StepTracer's traces name it
  // The library's two kinds of refusal, with its messages; both are ValueErrors.
  py::register_exception<InputError>(m, "InputError", PyExc_ValueError);
  py::register_exception<UsageError>(m, "UsageError", PyExc_ValueError);

  py::class_<PolicySpec>(m, "PolicySpec")
      .def_readonly("name", &PolicySpec::name)
      .def_readonly("options", &PolicySpec::options)
      .def_property_readonly("label", &PolicySpec::label)
      .def("__repr__", [](const PolicySpec& s) { return "PolicySpec('" + s.label() + "')"; });
  m.def("parse_policy", &checked_policy, py::arg("text"));
  // A trace's policy label in the canonical form, for names the scheduler library does not have
  // (a profile, a user's own sampler): the syntax checked, not the name.
  m.def(
      "policy_label", [](const std::string& text) { return parse_policy_spec(text).label(); }, py::arg("text"));
  m.def("policy_names", &policy_names);
  m.def("possible_sq_tokens", &possible_sq_tokens, py::arg("pairs"), py::arg("tokens"), py::arg("samples"),
        py::arg("longest"));
  // Policies' optimizer medians judged and worded as ddptrain does, for the Python trainer.
  m.def("optimizer_levels_text", &optimizer_levels_text, py::arg("medians"), py::arg("interleaved"));

  py::class_<Plan, std::shared_ptr<Plan>>(m, "Plan")
      .def_readonly("step", &Plan::step)
      .def_property_readonly("global_batch", [](const Plan& p) { return p.plan.global_batch; })
      .def_property_readonly("loss_weights", [](const Plan& p) { return p.plan.loss_weights; })
      .def_property_readonly("world_size", [](const Plan& p) { return p.plan.batches.size(); })
      .def_property_readonly("newest_epoch", &Plan::newest_epoch)
      .def("indices", &Plan::indices, py::arg("rank"))
      .def("lengths", &Plan::lengths, py::arg("rank"))
      .def("micro_sizes", &Plan::micro_sizes, py::arg("rank"))
      .def(
          "loss_weight", [](const Plan& p, int g) { return p.plan.loss_weights[p.rank(g)]; }, py::arg("rank"))
      .def("row", &Plan::row, py::arg("rank"));

  py::class_<Stream>(m, "Scheduler")
      .def(py::init<std::vector<int>, int, int, const std::string&, std::optional<std::vector<int>>, std::uint64_t,
                    std::optional<int>, int, const std::string&, const std::string&, const std::string&>(),
           py::arg("lengths"), py::kw_only(), py::arg("world_size"), py::arg("global_batch"),
           py::arg("policy") = "static", py::arg("b_max") = py::none(), py::arg("seed") = 0,
           py::arg("max_length") = py::none(), py::arg("micro_batches") = 1, py::arg("micro_batching") = "even",
           py::arg("perf_model") = "", py::arg("attention") = "padded")
      .def("next", &Stream::next, "Plans the next step")
      .def("skip", &Stream::skip, py::arg("steps"), "Plans `steps` steps and drops them (resuming)")
      .def_property_readonly("steps_done", &Stream::steps_done)
      .def_property_readonly("buffer_size", &Stream::buffer_size)
      .def_property_readonly("policy", &Stream::label)
      .def_property_readonly("resolved_policy", &Stream::resolved)
      .def_property_readonly("solver", &Stream::solver)
      .def_property_readonly("world_size", &Stream::world_size)
      .def_property_readonly("global_batch", &Stream::global_batch)
      .def_property_readonly("max_length", &Stream::max_length);

  m.def("synthetic_lengths", &synthetic, py::arg("histogram") = "sst2", py::arg("samples") = 20000,
        py::arg("max_length") = 128, py::arg("seed") = 0,
        "The lengths of ddptrain --synthetic-lengths HISTOGRAM --synthetic-samples N --max-length L --seed S");
  m.def("write_trace", &write_trace, py::arg("path"), py::arg("metadata"), py::arg("runs"));
  // The parameter tensors ddpsim's spec derivation reads from a Hugging Face config, in DDP's
  // registration order: what a PyTorch model built from the same config must hold.
  m.def(
      "hf_layout",
      [](const std::string& path) {
        std::vector<std::pair<std::string, long long>> layout;
        for (const TensorSpec& t : transformer_from_hf_config(read_json_file(path), path).tensors)
          layout.emplace_back(t.name, t.numel());
        return layout;
      },
      py::arg("path"));
  // A performance model's forward and backward times at each (b, L) — a built-in name, a model
  // file or a spec a model is derived from — with its source and its parameter tensors'
  // count: what a per-shape prediction registers before its run.
  m.def(
      "model_times",
      [](const std::string& model, const std::vector<std::pair<int, int>>& shapes) {
        const PerfModel m = load_perf_model(model);
        py::list times;
        for (const auto& [b, L] : shapes) {
          if (b < 1 || L < 1)
            throw InputError("shape (" + std::to_string(b) + ", " + std::to_string(L) +
                             "): a batch and a length of at least 1");
          times.append(py::make_tuple(m.fwd_ms(b, L), m.bwd_ms(b, L)));
        }
        py::dict out;
        out["source"] = m.source;
        out["tensors"] = m.layers.size();
        out["times"] = times;
        return out;
      },
      py::arg("model"), py::arg("shapes"));
  m.def("trace_columns", &trace_columns);
#ifdef DDPSIM_WITH_SIMULATOR
  bind_simulator(m);
#endif
}
