// Config parsing: defaults, overrides and the errors users will meet.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>

#include "common/error.hpp"
#include "common/json_util.hpp"
#include "eval/config.hpp"
#include "eval/simulate.hpp"

using namespace ddpsim;

namespace {
Config parse(const std::string& text) {
  return parse_config(parse_json(text, "c.json"), "c.json", "/base");
}
void fails(const std::string& text, const std::string& expected) {
  CAPTURE(text);
  CHECK_THROWS_WITH_AS(parse(text), doctest::Contains(expected.c_str()), InputError);
}
}  // namespace

TEST_CASE("the embedded default is the study's setting") {
  const Config c = parse_config(default_config_json(), "default", "");
  CHECK(c.training.world_size == 4);
  CHECK(c.training.global_batch == 48);
  CHECK(c.training.steps == 800);
  CHECK(c.training.max_length == 256);
  CHECK(c.data.source == "sst2");
  REQUIRE(c.policies.size() >= 2);
  CHECK(c.policies[0].label() == "static");
  CHECK(c.policies[1].label() == "minmax:buffer=64:cost=tokens");
}

TEST_CASE("unknown keys name the key and the one meant") {
  fails(R"({"training": {"world_sise": 8}})",
        "c.json: training: unknown key \"world_sise\" (did you mean \"world_size\"?");
  fails(R"({"trainig": {}})", "did you mean \"training\"");
  fails(R"({"data": {"source": "sst2", "path": "x"}})", "data: unknown key \"path\"");
}

TEST_CASE("wrong types and impossible values are named") {
  fails(R"({"training": {"global_batch": "48"}})", "training: key \"global_batch\" is string: expected an integer");
  // Read exactly: no narrowing, no coercion from bool, float or null, no wrapped overflow.
  fails(R"({"training": {"world_size": 4.5}})", "key \"world_size\" is number 4.5: expected an integer from");
  fails(R"({"training": {"world_size": true}})", "key \"world_size\" is boolean true: expected an integer");
  fails(R"({"training": {"world_size": null}})", "key \"world_size\" is null: expected an integer");
  fails(R"({"training": {"steps": 2147483648}})", "key \"steps\" is number 2147483648: expected an integer from");
  fails(R"({"training": {"steps": 9223372036854775807}})", "is number 9223372036854775807");
  fails(R"({"simulation": {"rank_speed": ["a", 1, 1, 1]}})",
        "key \"rank_speed\"[0] is string: expected a finite number");
  fails(R"({"training": {"steps": 10, "steps": 20}})", "key \"steps\" appears twice in one object");
  // The first repeat is named, not a later key the dropped values put out of step.
  fails(R"({"simulation": {"spells": "off", "spells": [[1, 2]]}, "training": {"seed": 1}, "seed": 2})",
        "key \"spells\" appears twice in one object");
  // Values in range, windows that make sense, memory that fits.
  fails(R"({"training": {"b_max": -1}})", "key \"b_max\" is number -1: expected an integer from 0 to 2147483647");
  fails(R"({"training": {"world_size": 100000}})",
        "key \"world_size\" is number 100000: expected an integer from 1 to 65536");
  fails(R"({"simulation": {"noise_sigma": -0.1}})", "noise_sigma is a log-normal σ in [0, 3]");
  fails(R"({"simulation": {"noise_sigma": 50}})", "noise_sigma is a log-normal σ in [0, 3]");
  fails(R"({"simulation": {"rank_speed": [1, 1, 1, 1e308]}})", "rank_speed[3] must be in [1e-6, 1e6]");
  fails(R"({"simulation": {"stragglers": [{"rank": 1, "factor": 2, "from_step": 9, "to_step": 3}]}})",
        "stragglers[0]: to_step (3) must be after from_step (9)");
  fails(R"({"simulation": {"stragglers": [{"rank": 1, "factor": 2, "from_step": -4}]}})",
        "key \"from_step\" is number -4: expected an integer from 0");
  fails(R"({"simulation": {"stragglers": [{"rank": 1, "factr": 2}]}})", "unknown key \"factr\"");
  fails(R"({"training": {"steps": 1000000000}})", "37.2529 GiB of per-step figures (at most 8)");
  // Full mode streams its rows too: the same bound, the same message.
  fails(R"({"training": {"steps": 1000000000}, "simulation": {"mode": "full"}})",
        "37.2529 GiB of per-step figures (at most 8)");
  CHECK_THROWS_WITH_AS(parse(R"({"training": {"bucket_mb": 1e999}})"), doctest::Contains("c.json: invalid JSON"),
                       InputError);
  fails(R"({"training": {"steps": 0}})", "key \"steps\" is number 0: expected an integer from 1");
  fails(R"({"training": {"max_length": 1}})", "expected an integer from 2 to 1000000");
  fails(R"({"training": {"world_size": 2, "b_max": [4, 4, 4]}})", "b_max lists 3 ranks, world_size is 2");
  fails(R"({"data": {"source": "csv"}})", "unknown source \"csv\"");
  fails(R"({"data": {"source": "tsv", "path": "a.tsv"}})", "missing key \"vocab\"");
  fails(R"({"policies": []})", "non-empty array");
  fails(R"({"policies": [{"cost": "tokens"}]})", "needs a \"name\"");
}

TEST_CASE("policies come as spec strings or objects") {
  const Config c = parse(R"({"policies": ["kk", {"name": "minmax", "cost": "tokens_sq", "buffer": 32}]})");
  REQUIRE(c.policies.size() == 2);
  CHECK(c.policies[1].label() == "minmax:buffer=32:cost=tokens_sq");
}

TEST_CASE("relative paths resolve against the config's folder") {
  const Config c = parse(R"({"data": {"source": "histogram", "path": "h/lengths.json"}})");
  CHECK(c.data.path == "/base/h/lengths.json");
}

TEST_CASE("--set overrides nested keys with JSON values or strings") {
  nlohmann::json doc = default_config_json();
  apply_override(doc, "training.global_batch=64");
  apply_override(doc, "data.source=lognormal");
  apply_override(doc, "training.b_max=[20,20,20,20]");
  const Config c = parse_config(doc, "d", "");
  CHECK(c.training.global_batch == 64);
  CHECK(c.data.source == "lognormal");
  CHECK(c.training.b_max == std::vector<int>{20, 20, 20, 20});
  CHECK_THROWS_AS(apply_override(doc, "training.steps"), UsageError);
  CHECK_THROWS_AS(apply_override(doc, "training..steps=3"), UsageError);
}

TEST_CASE("training.grad_dtype sets the gradients' bytes in the buckets and says who chose them") {
  const Config model = parse(R"({"model": "h100-distilbert"})");
  CHECK(model.model->bytes_per_param == 4);
  CHECK(model.gradients() == "fp32 (4 B a parameter; the model's)");
  const Config bf16 = parse(R"({"model": "h100-distilbert", "training": {"grad_dtype": "bf16"}})");
  CHECK(bf16.model->bytes_per_param == 2);
  CHECK(bf16.gradients() == "bf16 (2 B a parameter; training.grad_dtype)");
  CHECK(bf16.provenance()["gradients"] == bf16.gradients());
  CHECK(bf16.resolved["training"]["grad_dtype"] == "bf16");
  // Half the bytes a parameter: DDP's 25 MiB cap then holds twice the parameters, so fewer buckets.
  CHECK(config_buckets(bf16).size() < config_buckets(model).size());
  fails(R"({"training": {"grad_dtype": "int8"}})",
        "c.json: training: grad_dtype is \"model\" (the model's gradient_bytes_per_param), \"fp32\", \"bf16\" or "
        "\"fp16\" (the gradients' dtype in the buckets and the allreduce), got \"int8\"");
}

TEST_CASE("errors keep their precedence: a sharded config's before a packed sliding window's") {
  // A spec-derived Mistral (a 4,096-token window, the analytic form packing needs) packed to
  // 8,192 tokens under zero2 with a tree allreduce: both are refused, the sharding first.
  const auto path = std::filesystem::temp_directory_path() / "ddpsim-config-test-mistral.json";
  {
    std::ofstream(path) << R"({"hf_config": ")" << DDPSIM_SOURCE_DIR
                        << R"(/models/hf/mistral-7b-v0.1.json", "gpu": "h100-sxm", "dtype": "bf16"})";
  }
  const auto with = [&](const std::string& extra, const std::string& simulation) {
    return R"({"model": ")" + path.string() + R"(", "training": {"attention": "packed", "max_length": 8192)" + extra +
           "}" + simulation + "}";
  };
  fails(with(R"(, "data_parallel": "zero2")", R"(, "simulation": {"algorithm": "tree"})"),
        "gathers and reduce-scatters in rings over the ranks");
  fails(with("", ""), "sliding window of 4096 tokens: packed sequences longer than the window are not modelled");
  std::filesystem::remove(path);
}
