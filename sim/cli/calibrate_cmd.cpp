// `ddpsim calibrate`: from profiled traces (and training runs beside them) to a model.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <initializer_list>
#include <iostream>
#include <map>
#include <set>
#include <utility>

#include "calib/calibrate.hpp"
#include "calib/training_fit.hpp"
#include "calib/validate.hpp"
#include "calib/zero_fit.hpp"
#include "cli/commands.hpp"
#include "cli/config_args.hpp"
#include "cli/sync_fit.hpp"
#include "cli/trace_args.hpp"
#include "common/atomic_file.hpp"
#include "common/error.hpp"
#include "report/outputs.hpp"

namespace ddpsim::cli {

namespace {

constexpr const char* CALIBRATE_USAGE = R"(usage: ddpsim calibrate TRACE.csv... --out MODEL.json [options]

Fits a performance model to profiled traces (ddptrain writes them; a `ddptrain --profile`
sweep or any run of a dynamic policy covers enough (b, L) points). Repetitions of a shape
are reduced to their median, and fits minimise relative error:
  forward, backward   three forms of t(b, L) in ms: analytic a + beta*b*L + gamma*b*L^2
                      (non-negative least squares); roofline max(f, a + beta*b*L + gamma*b*L^2),
                      an accelerator's launch floor f under its compute; and a measured grid
                      (the shapes' medians, made non-decreasing, interpolated bilinearly,
                      growing as the roofline does beyond it); k-fold cross-validation by shape
                      gives each form's held-out MAPE, and the smallest is used unless --form
                      says otherwise
  optimizer           the mean of opt_ms
  noise               log-normal sigma of how a shape's repetitions on one rank spread, split
                      into each rank's own and a step's shared noise where ranks timed steps
                      together; and slow spells as measured: 101 quantiles of how far each
                      repeated shape sat from the surface (a spell lifts all its repetitions;
                      heavier-tailed than any log-normal); with the observed and the model's
                      P95/P50 of measured / predicted compute. By regime: where a knee of
                      padded tokens per rank-step splits the repetitions into two sigmas that
                      predict held-out shapes better than one (and differ beyond chance),
                      launch-bound shapes below it and compute-bound ones from it each keep
                      their own sigma and spells
  memory              m(b, L) = m0 + mu*b*L + nu*b*L^2 MiB, where peak_mem_mib is filled
  allreduce           ring alpha-beta, from allreduce rows (--profile over several ranks)
  comm_slowdown       backward beside back-to-back allreduces over backward alone, from
                      interference rows (--profile over several ranks)
  allgather_factor    ZeRO's parameter all-gather over the ring the allreduce fit implies, at
                      the profiled size nearest the parameters (# allgather= timings: ddptrain
                      --profile or ddpsim.torch.profile() over several ranks)
  optimizer_update_share
                      the update's share of the optimizer, which ZeRO divides over the ranks
                      (# optimizer_update_share=: ddptrain --profile, ddpsim.torch.profile())
  --training RUN...   training runs of the setting, kept out of the surface. From their
                      rank-steps after each process's warm-up (step 0, and leading steps
                      far slower than the process's second half, which the report names;
                      --training-warmup): their level by padded tokens a rank-step (the
                      medians of up to six bins in token order, each run's own level
                      taken out where runs share shapes), so that a policy or batch size of
                      other shapes takes its own level (--training-levels one: one level);
                      where two runs or more trained each of several batch sizes, a table
                      of them for each size;
                      each step's per-rank factors about that level, drawn whole steps at a
                      time in place of the noise above (tail and spikes that strike a step's
                      ranks together); the first use of a shape in a process (median extra;
                      emulated ranks share one process); the optimizer's time; with
                      several runs how far their levels differed (a term of every predicted
                      gain's interval), and with runs of two processes or more how far one
                      process's level lands from theirs (a term of every predicted step
                      time's interval); the tokens their levels cover (beyond them a gain
                      carries an "untrained tokens" term); and, replaying them, how much
                      longer their ranks waited for the gradients than the model says
                      (sync_ms: DDP's finalisation, which no profile times). DDP runs only
                      (a ZeRO run's optimizer column is a shard's step)
  --pool-run-levels MODEL...
                      earlier models of this machine fitted with --training: their runs'
                      levels, each about its session's mean within its model, pooled with
                      these runs' into that spread, and their processes' into the process
                      level (four pre-run processes give it three degrees of freedom; both
                      spreads take Student's t over theirs: 3.18 over three, 2.18 over 12)
Prints a fit report and writes MODEL.json, recording each source trace (file, FNV-1a hash,
metadata). The parameter layout and memory capacity come from --base (and the memory model
too when the traces have no peak memory).

examples:
  ddpsim calibrate runs/profile/steps.csv --gpu "RTX 3090" --out models/my-3090.json
  ddpsim calibrate prof/steps.csv comm/steps.csv --form grid --out m.json --residuals residuals.csv
  ddpsim calibrate prof/steps.csv --training runs/static/steps.csv --out m.json
  ddpsim calibrate prof/steps.csv --training pre/static/steps.csv pre/sorted/steps.csv \
      --pool-run-levels last-week.json --out m.json
)";

// The --training runs, each checked to be a run of the profiled setting: not given twice (by
// name or bytes), not a profile nor a byte copy of one, of the profile's device, model and
// attention mode, and all of one world size (the steps are drawn whole, a world at a time).
std::vector<Trace> read_training(const po::variables_map& vm, const std::vector<Trace>& traces,
                                 std::set<std::filesystem::path>& named) {
  std::vector<Trace> training;
  if (!vm.count("training")) return training;
  const auto meta = [](const Trace& t, const char* key) {
    const auto it = t.metadata.find(key);
    return it == t.metadata.end() ? std::string() : it->second;
  };
  const Trace& profile = traces.front();
  for (const auto& path : vm["training"].as<std::vector<std::string>>()) {
    std::error_code ec;
    if (!named.insert(std::filesystem::weakly_canonical(path, ec)).second)
      throw UsageError(path +
                       ": given twice (a training trace fits the spread, not the surface: name it once, "
                       "after --training)");
    training.push_back(read_trace(path, {"fwd_ms", "bwd_ms"}));
    const Trace& run = training.back();
    for (const Trace& t : traces)
      if (t.hash == run.hash)
        throw InputError(path + " holds the same bytes as the profile " + t.path +
                         ": --training takes a run of the setting, kept out of the surface");
    for (std::size_t k = 0; k + 1 < training.size(); ++k)
      if (training[k].hash == run.hash)
        throw InputError(path + " holds the same bytes as " + training[k].path +
                         ": a training run given twice would count its steps twice and hide how far runs differ");
    if (meta(run, "policy") == "profile" || run.metadata.count("profile"))
      throw InputError(path +
                       ": a profile (policy=profile), not a training run: --training takes the steps of "
                       "a run of the setting (ddptrain --policy ...), whose spread the profile cannot show");
    if (const std::string dp = meta(run, "data_parallel"); !dp.empty() && dp != "ddp")
      throw InputError(path + ": a run under data_parallel " + dp +
                       ", whose optimizer column is a shard's step and whose waits hold the parameters' "
                       "all-gather: --training fits a DDP model's spread, optimizer and first use from DDP runs "
                       "(simulate " +
                       dp + " with training.data_parallel)");
    for (const char* key : {"device", "model", "cpu", "blas", "malloc"})
      if (const std::string mine = meta(run, key), theirs = meta(profile, key);
          !mine.empty() && !theirs.empty() && mine != theirs)
        throw InputError(path + ": " + key + "=" + mine + ", and the profile " + profile.path + " has " + key + "=" +
                         theirs + ": its steps' spread is another setting's");
    if (run.runs.front().packed != profile.runs.front().packed)
      throw InputError(path + ": " + (run.runs.front().packed ? "packed" : "padded") + " sequences, and the profile " +
                       profile.path + " measured " + (profile.runs.front().packed ? "packed" : "padded") +
                       " ones: a run's spread is read against a surface of its own attention mode");
    if (const int G = run.runs.front().G, first = training.front().runs.front().G; G != first)
      throw InputError(path + ": " + std::to_string(G) + " ranks, and " + training.front().path + " " +
                       std::to_string(first) +
                       ": the measured steps are drawn a whole world at a time, so the "
                       "training runs share one world size");
  }
  return training;
}

// calibrate's options, as --help lists them.
po::options_description calibrate_options() {
  po::options_description visible("options");
  visible.add_options()("out", po::value<std::string>()->required(), "the model JSON to write")(
      "gpu", po::value<std::string>(), "GPU name for the model (default: the traces' device metadata)")(
      "name", po::value<std::string>()->default_value("calibrated"), "the model's name")(
      "base", po::value<std::string>()->default_value("rtx3090-distilbert"),
      "model giving the parameter layout and memory capacity")(
      "form", po::value<std::string>()->default_value("auto"),
      "auto (the smallest held-out error), analytic, grid or roofline")("folds", po::value<int>()->default_value(5),
                                                                        "cross-validation folds (by shape)")(
      "residuals", po::value<std::string>(), "write phase,b,L,measured_ms,predicted_ms rows for residual plots")(
      "training", po::value<std::vector<std::string>>()->multitoken(),
      "TRACE.csv...: training runs of the setting (e.g. the static run); not fitted into the surface: they give "
      "the rank-steps' spread around it (drawn a step at a time), a shape's first-use cost, the optimizer and, "
      "from several runs trained in turn, how far their levels differed")(
      "training-levels", po::value<std::string>()->default_value("tokens"),
      "tokens (the runs' level by padded tokens a rank-step, where their steady rank-steps fill two bins of at "
      "least 40 at different token counts) or one (a single level for every shape)")(
      "training-warmup", po::value<std::string>()->default_value("auto"),
      "steps after step 0 that each process's runs leave out: auto (its leading steps far slower than its "
      "second half, first uses' cost aside; at most a quarter of its steps) or a number, 0 for every step")(
      "pool-run-levels", po::value<std::vector<std::string>>()->multitoken(),
      "MODEL.json...: earlier models calibrated with --training on this machine; their runs' levels, each about "
      "its session's mean within its model, are pooled with these runs' into the run-level spread (a few pre-runs "
      "estimate it "
      "poorly)")("help,h", "this help");
  return visible;
}

// The options that need others, before any file is read; the training fit's options they give.
TrainingFitOptions check_calibrate_args(const po::variables_map& vm) {
  if (vm.count("pool-run-levels"))  // a profile after the list is taken into it
    for (const std::string& path : vm["pool-run-levels"].as<std::vector<std::string>>())
      if (path.ends_with(".csv"))
        throw UsageError(path +
                         ": a trace given to --pool-run-levels, which takes models (MODEL.json): give the "
                         "traces to calibrate before the options");
  if (!vm.count("trace")) throw UsageError("give at least one TRACE.csv");
  const std::string levels = vm["training-levels"].as<std::string>();
  if (levels != "tokens" && levels != "one")
    throw UsageError("--training-levels is tokens or one, got \"" + levels + "\"");
  if (!vm["training-levels"].defaulted() && !vm.count("training"))
    throw UsageError("--training-levels describes the --training runs' fit: give --training RUN...");
  if (vm.count("pool-run-levels") && !vm.count("training"))
    throw UsageError("--pool-run-levels adds to the --training runs' run-level spread: give --training RUN...");
  if (!vm["training-warmup"].defaulted() && !vm.count("training"))
    throw UsageError("--training-warmup describes the --training runs' fit: give --training RUN...");
  TrainingFitOptions options;
  options.levels_by_tokens = levels == "tokens";
  options.warmup = parse_warmup("--training-warmup", vm["training-warmup"].as<std::string>());
  return options;
}

// A pooled model whose levels were fitted about levels by tokens where this one's are about one
// level (or the other way round): its runs' levels hold other things than these runs' do.
void warn_levels_read_otherwise(const TrainingFit& t) {
  const bool tokens = !t.step_levels.empty() || !t.samples_levels.empty();
  std::string others;
  for (const PooledRunLevels& p : t.pooled)
    if (p.by_tokens != tokens) others += (others.empty() ? "" : ", ") + p.model;
  if (others.empty()) return;
  std::cerr << "ddpsim calibrate: warning: the run levels of " << others << " were read about "
            << (tokens ? "one level for every shape" : "levels by shape") << ", this model's about "
            << (tokens ? "levels by shape" : "one level for every shape") << ": "
            << (tokens ? "theirs hold how their runs' shapes differed too, so the pooled spread errs wide"
                       : "each run's shapes are out of theirs, so the pooled spread errs narrow")
            << "\n";
}

// The profiles to fit, each given once and with the columns calibrate fits.
std::vector<Trace> read_profiles(const po::variables_map& vm, std::set<std::filesystem::path>& named) {
  std::vector<Trace> traces;
  for (const auto& path : vm["trace"].as<std::vector<std::string>>()) {
    std::error_code ec;
    if (!named.insert(std::filesystem::weakly_canonical(path, ec)).second)
      throw UsageError(path + ": given twice (its rows would count twice in the fit)");
    traces.push_back(read_trace(path));
    const auto& cols = traces.back().columns;
    auto has = [&](const char* name) { return std::find(cols.begin(), cols.end(), name) != cols.end(); };
    if (!(has("fwd_ms") && has("bwd_ms")) && !(has("allreduce_bytes") && has("allreduce_ms")) &&
        !(has("bwd_ms") && has("concurrent_allreduce_bytes")))
      throw InputError(path + ": the header lacks column \"" + std::string(has("fwd_ms") ? "bwd_ms" : "fwd_ms") +
                       "\" (calibrate fits fwd_ms and bwd_ms, or allreduce_bytes and allreduce_ms)");
  }
  return traces;
}

// A ddptrain trace is fitted on its own size's layout: `ddptrain --write-layout` names the size
// it wrote, and any other base must have distilbert-base's parameters, like the default.
void check_base(const po::variables_map& vm, const std::vector<Trace>& traces, const PerfModel& base) {
  const bool base_is_layout = base.source.find("ddptrain --write-layout") != std::string::npos;
  const long long distilbert_base = load_perf_model("rtx3090-distilbert").total_params();
  for (const auto& trace : traces) {
    const auto size = trace.metadata.find("model");
    if (size == trace.metadata.end() || !trace.metadata.count("tool") || trace.metadata.at("tool") != "ddptrain")
      continue;
    const std::string fix =
        ": give --base LAYOUT.json from ddptrain --model " + size->second + " --write-layout LAYOUT.json";
    if (base_is_layout && base.name != size->second)
      throw UsageError(trace.path + ": profiled with ddptrain --model " + size->second + ", and --base " +
                       vm["base"].as<std::string>() + " is the layout of --model " + base.name + fix);
    if (!base_is_layout && (size->second != "base" || base.total_params() != distilbert_base))
      throw UsageError(trace.path + ": profiled with ddptrain --model " + size->second + ", and --base " +
                       (vm["base"].defaulted() ? "defaults to distilbert-base's layout"
                                               : vm["base"].as<std::string>() + " is not its layout") +
                       fix);
  }
}

// The model and, with --residuals, the fit's residuals, each written whole or not at all.
void write_model(const po::variables_map& vm, const nlohmann::ordered_json& model, const Calibration& c) {
  AtomicFile out(vm["out"].as<std::string>());
  out.stream() << model.dump(2) << "\n";
  std::unique_ptr<AtomicFile> residuals;
  if (vm.count("residuals")) {
    residuals = std::make_unique<AtomicFile>(vm["residuals"].as<std::string>());
    residuals->stream() << "phase,b,L,measured_ms,predicted_ms\n";
    for (const auto& r : c.residuals)
      residuals->stream() << r.phase << "," << r.b << "," << r.L << "," << r.measured << "," << r.predicted << "\n";
  }
  out.commit();
  if (residuals) residuals->commit();
}

// --pool-run-levels' models, read before the fit; a model of another machine is pooled with a
// warning: the machine's name is the user's own words.
std::vector<PooledRunLevels> pooled_levels(const po::variables_map& vm, const std::vector<Trace>& training,
                                           const std::string& gpu) {
  if (!vm.count("pool-run-levels")) return {};
  std::vector<std::pair<std::string, std::string>> own;
  for (const Trace& t : training) own.emplace_back(t.path, t.hash);
  auto pooled = read_pooled_run_levels(vm["pool-run-levels"].as<std::vector<std::string>>(), own);
  std::map<std::string, std::string> elsewhere;  // another machine's name → its models
  for (const PooledRunLevels& p : pooled)
    if (!p.gpu.empty() && !gpu.empty() && p.gpu != gpu)
      elsewhere[p.gpu] += (elsewhere[p.gpu].empty() ? "" : ", ") + p.model;
  for (const auto& [machine, models] : elsewhere)
    std::cerr << "ddpsim calibrate: warning: " << models << " calibrated on \"" << machine << "\" and this model on \""
              << gpu << "\": pool the levels of one machine's runs (--gpu NAME names this model's)\n";
  return pooled;
}

}  // namespace

int calibrate(const Args& args) {
  po::options_description visible = calibrate_options(), hidden;
  hidden.add_options()("trace", po::value<std::vector<std::string>>());
  po::positional_options_description positional;
  positional.add("trace", -1);
  // Boost takes the option after an empty list for its value, then blames that option.
  for (std::size_t i = 0; i < args.size(); ++i)
    for (const auto& [option, what] : {std::pair{"--training", "the training runs' trace files"},
                                       std::pair{"--pool-run-levels", "the earlier models' JSON files"}})
      if (args[i] == option && (i + 1 == args.size() || args[i + 1].starts_with("-")))
        throw UsageError(std::string(option) + ": expected " + what + " after it" +
                         (i + 1 < args.size() ? ", got " + args[i + 1] : std::string()));
  po::variables_map vm;
  if (!parse(args, CALIBRATE_USAGE, visible, hidden, positional, vm)) return 0;
  TrainingFitOptions fit_options = check_calibrate_args(vm);
  std::set<std::filesystem::path> named;
  const std::vector<Trace> traces = read_profiles(vm, named);
  const PerfModel base = load_perf_model(vm["base"].as<std::string>());
  check_base(vm, traces, base);
  CalibrationOptions options;
  options.form = vm["form"].as<std::string>();
  options.folds = vm["folds"].as<int>();
  if (options.folds < 2) throw UsageError("--folds must be at least 2");
  std::string gpu = vm.count("gpu") ? vm["gpu"].as<std::string>() : "";
  if (gpu.empty() && traces.front().metadata.count("device")) gpu = traces.front().metadata.at("device");
  const std::vector<Trace> training = read_training(vm, traces, named);
  fit_options.pooled = pooled_levels(vm, training, gpu);
  std::vector<std::filesystem::path> outputs{vm["out"].as<std::string>()};
  if (vm.count("residuals")) outputs.emplace_back(vm["residuals"].as<std::string>());
  check_outputs(outputs);  // after every input is read (none overwritten), before the long fit
  // ZeRO's figures, read (and refused if malformed) before the fit.
  const auto gathers = allgather_timings(traces);
  const double update_share = optimizer_update_share(traces);
  const Calibration c = calibrate(traces, options);
  auto model = calibrated_model(c, traces, base, vm["name"].as<std::string>(), gpu);
  const AllgatherFit allgather = fit_allgather(gathers, c, double(base.total_params()) * base.bytes_per_param);
  add_allgather(model, allgather);
  add_update_share(model, update_share);
  std::string report = fit_report(c) + allgather_report(allgather) + update_share_report(update_share);
  if (!training.empty()) {
    const TrainingFit t = fit_training(training, c, std::move(fit_options));
    warn_levels_read_otherwise(t);
    add_training(model, t, training);
    report += training_report(t);
    const SyncFit sync = fit_sync(model, training, t.warmups);
    add_sync(model, sync);
    report += sync_report(sync);
  }
  parse_perf_model(nlohmann::json::parse(model.dump()), "the calibrated model");  // what we write must load
  std::cout << "ddpsim calibrate: " << traces.size()
            << " trace(s)" +
                   (training.empty() ? std::string() : ", " + std::to_string(training.size()) + " training run(s)")
            << "\n"
            << report;
  if (!c.fit_warnings.empty()) std::cerr << "ddpsim calibrate: warning: the model " << fit_warning_text(c) << "\n";
  write_model(vm, model, c);
  std::cout << "wrote " << vm["out"].as<std::string>() << "\n";
  return 0;
}

}  // namespace ddpsim::cli
