// Sliding-window attention, unread keys and refused families: what a config declares that
// changes the cost is costed, said, or refused, never dropped.
#include <doctest/doctest.h>

#include <fstream>
#include <sstream>

#include "common/error.hpp"
#include "common/json_util.hpp"
#include "eval/config.hpp"
#include "model/hf_model.hpp"
#include "model/perf_model.hpp"
#include "test_data.hpp"

using namespace ddpsim;

namespace {
nlohmann::json shipped_config(const std::string& name) {
  return read_json_file(test::source_path("models/hf/" + name + ".json"));
}

// The config's model on an H100 in bf16, loaded as a spec file would be.
PerfModel derived(const test::TempDir& dir, const nlohmann::json& config, const nlohmann::json& extra = {}) {
  std::ofstream(dir / "config.json") << config.dump();
  nlohmann::json spec = {{"hf_config", "config.json"}, {"gpu", "h100-sxm"}};
  if (extra.is_object()) spec.update(extra);
  std::ofstream(dir / "spec.json") << spec.dump();
  return load_perf_model(dir / "spec.json");
}

std::string refusal(const test::TempDir& dir, const nlohmann::json& config) {
  try {
    derived(dir, config);
  } catch (const InputError& e) {
    return e.what();
  }
  return "(no error)";
}
}  // namespace

TEST_CASE("a sliding window costs less attention than full attention, by L² − (L − W)² pairs a windowed layer") {
  test::TempDir dir;
  nlohmann::json mistral = shipped_config("mistral-7b-v0.1");
  mistral["sliding_window"] = 256;
  const PerfModel windowed = derived(dir, mistral);
  mistral["sliding_window"] = nullptr;
  const PerfModel full = derived(dir, mistral);
  CHECK(windowed.attention_window.tokens == 256);
  CHECK(windowed.attention_window.share == 1.0);
  CHECK(full.attention_window.tokens == 0);
  // Equal up to the window; beyond it, every layer saves (L − W)² pairs per sample.
  CHECK(windowed.fwd_ms(2, 256) == full.fwd_ms(2, 256));
  const double gamma = full.forward.analytic.gamma_ms, saved = 2.0 * (2048 - 256) * (2048 - 256);
  CHECK(full.fwd_ms(2, 2048) - windowed.fwd_ms(2, 2048) == doctest::Approx(gamma * saved));
  CHECK(full.bwd_ms(2, 2048) - windowed.bwd_ms(2, 2048) == doctest::Approx(2 * gamma * saved));
  CHECK(full.peak_mem_mib(2, 2048) - windowed.peak_mem_mib(2, 2048) ==
        doctest::Approx(full.mem_nu_mib * saved));  // the stored scores too
  CHECK(windowed.source.find("a sliding window of 256 tokens on 32 of 32 layers") != std::string::npos);
  // Fused attention stores no scores: only the FLOPs follow the window.
  CHECK(derived(dir, mistral, {{"fused_attention", true}}).mem_nu_mib == 0);
}

TEST_CASE("Qwen's window covers the layers from max_window_layers, or those layer_types names") {
  test::TempDir dir;
  nlohmann::json qwen = shipped_config("qwen2-7b");
  CHECK(derived(dir, qwen).attention_window.tokens == 0);  // use_sliding_window false
  qwen["use_sliding_window"] = true;
  qwen["sliding_window"] = 4096;
  qwen["max_window_layers"] = 21;
  const PerfModel seven = derived(dir, qwen);
  CHECK(seven.attention_window.tokens == 4096);
  CHECK(seven.attention_window.share == doctest::Approx(7.0 / 28));
  std::vector<std::string> types(28, "full_attention");
  types[3] = types[9] = "sliding_attention";
  qwen["layer_types"] = types;
  CHECK(derived(dir, qwen).attention_window.share == doctest::Approx(2.0 / 28));
  types.pop_back();
  qwen["layer_types"] = types;
  CHECK(refusal(dir, qwen).find("key \"layer_types\" lists 27 layers, the model has 28") != std::string::npos);
  qwen.erase("layer_types");
  qwen["sliding_window"] = nullptr;
  CHECK(refusal(dir, qwen).find("7 layers attend within a sliding window, but \"sliding_window\"") !=
        std::string::npos);
}

TEST_CASE("packed sequences longer than a window are refused, not charged their full square") {
  test::TempDir dir;
  nlohmann::json mistral = shipped_config("mistral-7b-v0.1");
  mistral["sliding_window"] = 256;
  const PerfModel m = derived(dir, mistral);
  CHECK(m.fwd_packed_ms(100, 100 * 100) == doctest::Approx(m.fwd_ms(1, 100)));  // within the window: exact
  nlohmann::json config = default_config_json();
  config["model"] = dir / "spec.json";
  config["data"] = {{"source", "lognormal"}, {"mean", 200}, {"std", 100}, {"min", 16}, {"max", 512}};
  config["training"]["attention"] = "packed";
  config["training"]["max_length"] = 256;
  config["policies"] = {"static"};
  CHECK_NOTHROW(parse_config(config, "c.json", ""));
  config["training"]["max_length"] = 512;
  CHECK_THROWS_WITH_AS(parse_config(config, "c.json", ""),
                       doctest::Contains("sliding window of 256 tokens: packed sequences longer than the window are "
                                         "not modelled (training.max_length is 512"),
                       InputError);
}

TEST_CASE("mixture-of-experts configs are refused with what is missing; unknown keys are named in the source") {
  test::TempDir dir;
  nlohmann::json mixtral = shipped_config("mistral-7b-v0.1");
  mixtral["model_type"] = "mixtral";
  mixtral["num_local_experts"] = 8;
  std::string m = refusal(dir, mixtral);
  CHECK_MESSAGE(m.find("a mixture-of-experts model (key \"num_local_experts\") is not modelled: what is missing is "
                       "the router") != std::string::npos,
                m);
  nlohmann::json qwen_moe = shipped_config("qwen3-8b");
  qwen_moe["model_type"] = "qwen3_moe";
  m = refusal(dir, qwen_moe);
  CHECK_MESSAGE(m.find("(model_type \"qwen3_moe\") is not modelled") != std::string::npos, m);
  nlohmann::json llama = shipped_config("llama-3-8b");
  llama["add_cross_attention"] = true;
  CHECK(refusal(dir, llama).find("cross-attention (an encoder-decoder) is not modelled") != std::string::npos);
  llama.erase("add_cross_attention");
  llama["sliding_window"] = 4096;  // not a Llama key: read by nobody, so said
  llama["attn_logit_softcapping"] = 50.0;
  const PerfModel said = derived(dir, llama);
  CHECK_MESSAGE(said.source.find("config keys not read (check they leave the cost alone): attn_logit_softcapping "
                                 "sliding_window") != std::string::npos,
                said.source);
  CHECK(said.attention_window.tokens == 0);
  nlohmann::json bert = shipped_config("bert-base-uncased");
  bert["position_embedding_type"] = "relative_key";
  CHECK(refusal(dir, bert).find("only \"absolute\" positions are modelled") != std::string::npos);
}

TEST_CASE("docs/models.md lists every key read and ignored, with its reason") {
  std::ifstream in(test::source_path("docs/models.md"));
  std::stringstream doc;
  doc << in.rdbuf();
  for (const auto& [key, reason] : hf_ignored_keys()) {
    const std::string name = key;
    CAPTURE(name);
    CHECK(doc.str().find(std::string("`") + key + "`") != std::string::npos);
    CHECK(!std::string(reason).empty());
  }
}
