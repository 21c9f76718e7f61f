// `ddpsim validate`: a measured trace replayed under a model, prediction against measurement
// step by step, and a prediction registered before the run scored against it.
#include <filesystem>
#include <iostream>
#include <memory>
#include <optional>

#include "calib/registration.hpp"
#include "calib/validate.hpp"
#include "cli/commands.hpp"
#include "cli/trace_args.hpp"
#include "common/error.hpp"
#include "report/outputs.hpp"

namespace ddpsim::cli {

namespace {

constexpr const char* VALIDATE_USAGE =
    R"(usage: ddpsim validate --measured TRACE.csv --model MODEL.json [--baseline STATIC.csv]
                       [CONFIG] [options]
       ddpsim validate --registered PREDICTION.json --measured TRACE.csv --baseline STATIC.csv

Replays a measured trace and compares prediction with measurement: mean and P95 of the
per-step maximum step time, samples/s, the per-step error (MAPE, and the 95th percentile of
the absolute error); with --baseline (a trace of the baseline policy, e.g. static), the
predicted against the measured gain of each policy over it, in percentage points. Where an
error comes from: each phase's mean per rank-step, measured against predicted (forward,
backward, exposed communication wait, optimizer, the rest of the step); a machine slower or
faster than its profile moves them all alike, a wrong term of the model moves one.
Real runs start slow (allocator, caches, thread pools): each run's first steps are left out
of the steady-state figures (--warmup auto: until the measured max step time settles, then
past leading steps far slower than the run's settled second half, found per run and printed;
for a policy and baseline one ddptrain run trained in turn, which share its start, both from
where the later settles), and the figures over every step beside them.
--out DIR writes DIR/validation.json and DIR/validation.csv (per step, with a steady flag).
A trace of emulated ranks (ddptrain --emulate-ranks) is replayed on the allreduce its metadata
records, unless CONFIG or --set gives platform keys or training.overlap.
Where the model draws compute noise, each predicted gain is printed beside the same replay's
gain with that noise off, and with its 95% prediction interval: the steps' interval widened by
what the model does not know (docs/intervals.md). Each predicted mean step is set in its
prediction interval too, the process's level with it, and the measured mean said inside or not.
--registered FILE scores a prediction registered before the run (ddpsim compare --register):
the config, its --set and the model come from FILE (their files must hold the bytes they held
then), a trace of another setting is refused naming the key, and each gain is printed against
the registered one, its seeds' range and its prediction interval, each mean step against its
registered interval where it has one (validation.json: "registered").
A registration of configs against each other (compare --against --register) is scored one
column at a time: --column LABEL names the column --measured ran, --baseline is the base
column's run, and the gain is measured from the two traces over every step, each run resampled
alone (no replay; --out writes validation.json alone).
Accuracy to aim for: mean error <= 3%, P95 <= 5%, gain within 2 pp.

examples:
  ddpsim validate --measured runs/minmax/steps.csv --baseline runs/static/steps.csv \
      --model m.json --out val
  ddpsim validate --registered prereg/prediction.json --measured runs/minmax/steps.csv \
      --baseline runs/static/steps.csv --out val
  ddpsim validate --registered prereg/columns.json --column zero1 \
      --measured zero1/static/steps.csv --baseline base/static/steps.csv --out val-zero1
)";

// The arguments with --registered FILE's config, model and --set in place of the user's own,
// which are refused beside it (one prediction, one set of inputs).
Args with_registration(const Args& given, std::optional<Registration>& registration) {
  Args args;
  std::string file;
  for (std::size_t i = 0; i < given.size(); ++i) {
    if (given[i] == "--registered" && i + 1 < given.size())
      file = given[++i];
    else if (given[i].starts_with("--registered="))
      file = given[i].substr(13);
    else
      args.push_back(given[i]);
  }
  if (file.empty()) return given;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--model" || a.starts_with("--model=") || a == "--set" || a.starts_with("--set="))
      throw UsageError(a.substr(0, a.find('=')) + " beside --registered " + file +
                       ": the registered prediction's model and --set are used; leave it out");
    const bool takes_value =
        a == "--measured" || a == "--baseline" || a == "--warmup" || a == "--out" || a == "--column";
    if (takes_value)
      ++i;
    else if (!a.starts_with("-"))
      throw UsageError(a + " beside --registered " + file +
                       ": the registered prediction's config is used; leave it out");
  }
  registration = read_registration(file);
  const std::vector<std::string> from = registered_validate_args(*registration);
  args.insert(args.end(), from.begin(), from.end());
  return args;
}

// The baseline's trace, refused where it is the measured one (a gain over itself is 0); null
// without --baseline.
std::unique_ptr<Trace> read_baseline(const po::variables_map& vm, const Trace& measured) {
  if (!vm.count("baseline")) return nullptr;
  const std::string path = vm["baseline"].as<std::string>();
  if (std::error_code ec; std::filesystem::equivalent(path, vm["measured"].as<std::string>(), ec))
    throw UsageError("--baseline " + path +
                     " is the --measured trace: a gain over itself is 0 by definition; give "
                     "the baseline policy's own trace");
  auto baseline = std::make_unique<Trace>(read_trace(path, {"step_ms"}));
  if (baseline->hash == measured.hash)
    throw UsageError("--baseline " + path + " holds the same bytes as --measured " + vm["measured"].as<std::string>() +
                     ": a gain over a copy of itself is 0; give the baseline policy's own trace");
  return baseline;
}

// A registration of configs against each other: one column's run scored against the base's, over
// every step, from the two traces alone (each is a run of its own setting; no replay).
int validate_column(const po::variables_map& vm, const Registration& r) {
  std::string labels;
  for (const auto& [label, setting] : r.doc["setting"]["columns"].items()) labels += (labels.empty() ? "" : ", ") + label;
  if (!vm.count("column"))
    throw UsageError("--registered " + r.path + " registers configs against each other (" + labels +
                     "): give --column LABEL, the column --measured ran");
  if (!vm["warmup"].defaulted())
    throw UsageError("--warmup: a registration of configs is scored over every step, as it was registered");
  const Trace measured = read_trace(vm["measured"].as<std::string>(), {"step_ms"});
  const std::unique_ptr<Trace> baseline = read_baseline(vm, measured);
  const std::string column = vm["column"].as<std::string>();
  if (vm.count("out")) {
    const std::filesystem::path dir = vm["out"].as<std::string>();
    if (std::filesystem::exists(dir / "validation.csv"))
      throw UsageError("--out " + dir.string() +
                       " holds a validation.csv, which a column's score does not write, so it would stand beside a "
                       "validation.json it does not belong to: give another folder");
    check_outputs({dir / "validation.json"});
  }
  const nlohmann::ordered_json scored = score_registered_column(r, column, measured, *baseline);
  std::cout << "ddpsim validate: " << measured.path << " (column " << column << ") against " << baseline->path << " ("
            << scored["baseline"]["policy"].get<std::string>() << ")\n"
            << registered_report(scored);
  if (vm.count("out")) {
    const std::filesystem::path file = std::filesystem::path(vm["out"].as<std::string>()) / "validation.json";
    const nlohmann::ordered_json doc{{"measured", measured.path},
                                     {"baseline", baseline->path},
                                     {"policies", nlohmann::ordered_json::object()},
                                     {"registered", scored}};
    write_outputs(file.parent_path(), {{"validation.json", doc.dump(2) + "\n"}});
    std::cout << "wrote " << file.string() << "\n";
  }
  return 0;
}

// Why the runs' times may be another trained model's or another machine's than the performance
// model's: the measured trace's reason, else its baseline's; "" where none.
struct OtherSource {
  std::string model, machine;
  std::string warnings() const {
    return (model.empty() ? "" : "warning: " + model + "\n") + (machine.empty() ? "" : "warning: " + machine + "\n");
  }
};

OtherSource other_source(const PerfModel& model, const Trace& measured, const Trace* baseline) {
  OtherSource other{trained_other_model(model, measured), ran_on_other_machine(model, measured)};
  if (baseline && other.model.empty()) other.model = trained_other_model(model, *baseline);
  if (baseline && other.machine.empty()) other.machine = ran_on_other_machine(model, *baseline);
  return other;
}

}  // namespace

int validate(const Args& given) {
  po::options_description visible("options"), hidden;
  po::positional_options_description positional;
  visible.add_options()("measured", po::value<std::string>()->required(), "the measured trace")(
      "baseline", po::value<std::string>(), "a measured trace of the baseline policy (e.g. static)")(
      "warmup", po::value<std::string>()->default_value("auto"),
      "steps of each run left out of the steady state: N, or auto (until the step time settles)")(
      "registered", po::value<std::string>(),
      "FILE: score the prediction ddpsim compare --register wrote before the run (its config, --set and model)")(
      "column", po::value<std::string>(),
      "LABEL: with --registered FILE of configs against each other (compare --against --register), the column "
      "--measured ran; --baseline is then the base column's run");
  add_replay_options(visible, hidden, positional);
  std::optional<Registration> registration;
  const Args args = with_registration(given, registration);
  po::variables_map vm;
  if (!parse(args, VALIDATE_USAGE, visible, hidden, positional, vm)) return 0;
  if (registration && !vm.count("baseline"))
    throw UsageError("--registered scores gains: give --baseline, the trace of the registered baseline " +
                     (registers_columns(*registration)
                          ? "column's run (" + registered_base_column(*registration) + ")"
                          : "policy (" + registration->doc["setting"]["policies"][0].get<std::string>() + ")"));
  if (registration && registers_columns(*registration)) return validate_column(vm, *registration);
  if (vm.count("column"))
    throw UsageError("--column " + vm["column"].as<std::string>() + " names a column of a registration of configs " +
                     "against each other (compare --against --register), and " +
                     (registration ? "--registered " + registration->path + " registers policies" : "none is given") +
                     ": leave --column out, or give --registered FILE of configs");
  const Trace measured = read_trace(vm["measured"].as<std::string>(), {"step_ms"});
  const std::unique_ptr<Trace> baseline = read_baseline(vm, measured);
  if (registration) check_registered_setting(*registration, measured, baseline.get());
  const Config config = config_for_trace(vm, measured);
  const int warmup = parse_warmup("--warmup", vm["warmup"].as<std::string>());
  if (vm.count("out"))
    check_outputs({std::filesystem::path(vm["out"].as<std::string>()) / "validation.json",
                   std::filesystem::path(vm["out"].as<std::string>()) / "validation.csv"});
  const Validation v = ddpsim::validate(measured, config, baseline.get(), warmup);
  const Extrapolation beyond = extrapolation(*config.model, {&measured, baseline.get()});
  const OtherSource other = other_source(*config.model, measured, baseline.get());
  std::cout << "ddpsim validate: " << measured.path << " against " << config.model->origin << "\n"
            << platform_line(config, measured) << "\n"
            << other.warnings() << beyond.note() << validation_report(v);
  nlohmann::ordered_json scored;
  if (registration) {
    scored = score_registered(*registration, v);
    std::cout << registered_report(scored);
  }
  if (!vm.count("out")) return 0;
  auto doc = validation_json(v, measured, config.model->origin);
  if (!beyond.text.empty()) {
    doc["model_extrapolated_rank_steps_pct"] = beyond.pct;
    doc["model_extrapolation"] = beyond.text;
  }
  if (!config.model->fit_warning.empty()) doc["model_fit_warning"] = config.model->fit_warning;
  if (!other.model.empty()) doc["model_trained_other"] = other.model;
  if (!other.machine.empty()) doc["model_other_machine"] = other.machine;
  if (registration) doc["registered"] = scored;
  const std::filesystem::path dir = vm["out"].as<std::string>();
  write_outputs(dir, {{"validation.json", doc.dump(2) + "\n"}, {"validation.csv", validation_csv(v)}});
  std::cout << "wrote " << (dir / "validation.json").string() << " and " << (dir / "validation.csv").string() << "\n";
  return 0;
}

}  // namespace ddpsim::cli
