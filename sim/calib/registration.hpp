// A prediction registered before its run (`ddpsim compare --register FILE`) and its scoring
// (`ddpsim validate --registered FILE`): a prediction made before the measurement is the only
// kind that tests the simulator rather than its fit, so the file pins what was predicted — the
// config and its --set, the model (by hash), every policy's figures and each gain's prediction
// interval — and the scoring refuses a run of another setting, naming the key that differs.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "calib/trace_reader.hpp"
#include "calib/validate.hpp"
#include "eval/config.hpp"

namespace ddpsim {

inline constexpr const char* kRegistrationFormat = "ddpsim-registered/1";

// What compare was given: the config file ("" for the embedded default), its --set assignments
// (and --steps / --policies as their --set equivalents), and the command line.
struct RegisteredInputs {
  std::string config_file;
  std::vector<std::string> sets;
  std::string command;
};

// The registration document of `file`, paths in it relative to the file's folder; `replicates`
// is compare's replicates object (figures over the seeds and the gains' intervals).
nlohmann::ordered_json registration_json(const std::string& file, const Config& config, const RegisteredInputs& inputs,
                                         const nlohmann::ordered_json& replicates);

struct Registration {
  std::string path;
  nlohmann::json doc;
};
// Reads and checks a registration; the config and model files it names must still hold the
// bytes they held (their FNV-1a hashes), else the prediction would be scored against others.
Registration read_registration(const std::string& path);

// The validate arguments the registration stands for: its config (a path), --model and each
// --set that replay takes (the ones the trace fixes are checked by check_registered_setting).
std::vector<std::string> registered_validate_args(const Registration& r);

// Throws InputError naming the trace, the key, both values and the registration where a run's
// setting differs from the registered one (world size, global batch, seed, steps, longest
// sample, padding, attention, policy; the baseline must be the registered first policy).
void check_registered_setting(const Registration& r, const Trace& measured, const Trace* baseline);

// Each measured policy's registered figures set against the measurement over every step (the
// steps the registration simulated, with no warm-up) and, under "steady_state", over the steps
// after the warm-up: the registered gain with its seeds' and prediction intervals, the measured
// gain and its interval, and whether each holds the other. Needs a validation with a baseline.
nlohmann::ordered_json score_registered(const Registration& r, const Validation& v);
// A measured gain over the baseline's run, and the figures a score sets beside it.
struct MeasuredGain {
  double gain_pct = 0;
  Interval ci;
  bool per_sample = false;
  double mean_ms = 0;  // the run's mean max step
  int from_step = 0;   // the first step the gain compares
};
// One registered gain (a policy's or a column's figures, with its "gain") against its measured one.
nlohmann::ordered_json gain_score(const nlohmann::json& registered, const MeasuredGain& measured);
// A registered mean step's prediction interval (its "step") against the measured mean, into
// `score`; nothing where the registration holds none (registered before step times had one).
// Beside it the tail: the registered P95 of the max step over its mean against the measured
// run's, a figure the process's level cancels out of, so the noise model is scored alone.
void add_step_score(nlohmann::ordered_json& score, const nlohmann::json& registered, double measured_ms,
                    double measured_p95_ms);

// The report of a score; one without "steady_state" (a column's) reports every step alone.
std::string registered_report(const nlohmann::ordered_json& score);

// Configs against each other (`compare --against --register`): the registration's
// setting.columns holds, per column (the base first), its --against values and the keys a
// trace of it is checked on; its predicted.columns the figures and each gain's interval.
nlohmann::ordered_json column_setting(const Config& config, const std::vector<std::string>& sets);
bool registers_columns(const Registration& r);
std::string registered_base_column(const Registration& r);
// One column's registered gain against its run and the base's: the measured gain over every step
// (per sample where the two take different samples a step) with its 95% interval, each run
// resampled alone; the score in score_registered's form, under the column's label.
nlohmann::ordered_json score_registered_column(const Registration& r, const std::string& column, const Trace& measured,
                                               const Trace& baseline);

}  // namespace ddpsim
