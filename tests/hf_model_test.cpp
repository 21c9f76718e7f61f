// Models from specifications: parameter counts equal the published ones, FLOPs follow the
// layout, and a spec file turns into a performance model whose times follow the peak.
#include <doctest/doctest.h>

#include <fstream>

#include "common/error.hpp"
#include "common/json_util.hpp"
#include "model/hf_model.hpp"
#include "model/perf_model.hpp"
#include "test_data.hpp"

using namespace ddpsim;

namespace {
TransformerSpec shipped(const std::string& name) {
  const std::string path = test::source_path("models/hf/" + name + ".json");
  return transformer_from_hf_config(read_json_file(path), path);
}
}  // namespace

TEST_CASE("derived parameter counts equal the published ones") {
  CHECK(shipped("distilbert-base-uncased").params() == 66'955'010);  // with the SST-2 classifier
  CHECK(shipped("bert-base-uncased").params() == 109'482'240);       // BertModel, pooler included
  CHECK(shipped("gpt2").params() == 124'439'808);                    // LM head tied to wte
  CHECK(shipped("llama-3-8b").params() == 8'030'261'248);
  CHECK(shipped("qwen2-7b").params() == 7'615'616'512);
  CHECK(shipped("mistral-7b-v0.1").params() == 7'241'732'096);
  // Qwen3: the Hugging Face safetensors totals, q/k norms included (0.44 B and 6.95 B without embeddings).
  CHECK(shipped("qwen3-0.6b").params() == 596'049'920);
  CHECK(shipped("qwen3-8b").params() == 8'190'735'360);
  // The decoders of the fourth GPU campaign: SmolLM-135M and Llama-3.2-1B, heads tied.
  CHECK(shipped("smollm-135m").params() == 134'515'008);
  CHECK(shipped("llama-3.2-1b").params() == 1'235'814'400);
}

TEST_CASE("Qwen3 normalises each head's queries and keys; a shipped config leaves no key unread") {
  const TransformerSpec qwen3 = shipped("qwen3-0.6b");
  CHECK(qwen3.tensors[4].name == "model.layers.0.self_attn.o_proj.weight");
  CHECK(qwen3.tensors[5].name == "model.layers.0.self_attn.q_norm.weight");
  CHECK(qwen3.tensors[5].rows == 128);
  CHECK(qwen3.tensors[6].name == "model.layers.0.self_attn.k_norm.weight");
  CHECK(qwen3.tensors[1].cols == 1024);  // no q bias: Qwen3 drops Qwen2's
  CHECK(qwen3.tensors[2].name == "model.layers.0.self_attn.k_proj.weight");
  CHECK(qwen3.windowed_layers == 0);  // use_sliding_window false: the window is dormant
  for (const char* name : {"distilbert-base-uncased", "bert-base-uncased", "gpt2", "llama-3-8b", "qwen2-7b",
                           "qwen3-0.6b", "qwen3-8b", "mistral-7b-v0.1", "smollm-135m", "llama-3.2-1b"}) {
    CAPTURE(name);
    CHECK(shipped(name).unread_keys.empty());
  }
}

TEST_CASE("the layout is in registration order, with grouped-query attention and untied heads") {
  const TransformerSpec llama = shipped("llama-3-8b");
  CHECK(llama.head == "causal LM");
  CHECK(llama.tensors.front().name == "model.embed_tokens.weight");
  CHECK(llama.tensors.back().name == "lm_head.weight");
  CHECK(llama.tensors.size() == 1 + 32 * 9 + 1 + 1);
  CHECK(llama.tensors[1].name == "model.layers.0.self_attn.q_proj.weight");
  CHECK(llama.tensors[2].rows == 8 * 128);  // k_proj: 8 key-value heads of 128
  CHECK(llama.attention_flops_per_pair == 4.0 * 32 * 32 * 128);
  const TransformerSpec qwen = shipped("qwen2-7b");
  CHECK(qwen.tensors[2].name == "model.layers.0.self_attn.q_proj.bias");  // Qwen2: q, k, v biases
  // GPT-2: 2 FLOPs per weight of every block's four matmuls, and of the tied LM head.
  const TransformerSpec gpt2 = shipped("gpt2");
  CHECK(gpt2.linear_flops_per_token == 2.0 * (12.0 * (768 * 2304 + 768 * 768 + 2 * 768 * 3072) + 50257.0 * 768));
  CHECK(shipped("distilbert-base-uncased").tensors.back().name == "classifier.bias");
}

TEST_CASE("a spec file is a performance model: times from the peak, memory from the layout") {
  const PerfModel m = load_perf_model(test::source_path("models/llama-3-8b-h100.json"));
  CHECK(m.total_params() == 8'030'261'248);
  CHECK(m.gpu == "NVIDIA H100 SXM5 80GB");
  CHECK(m.source.rfind("derived from specs", 0) == 0);
  CHECK(m.bytes_per_param == 4);  // bf16 compute, fp32 gradients: autocast DDP
  CHECK(m.precision == "bf16");   // the spec's dtype: its intervals hold a first-use cost then
  const TransformerSpec llama = shipped("llama-3-8b");
  const double flops = 989.4e12 * 0.4;
  CHECK(
      m.fwd_ms(2, 1000) ==
      doctest::Approx((2 * 1000 * llama.linear_flops_per_token + 2e6 * llama.attention_flops_per_pair) / flops * 1e3));
  CHECK(m.bwd_ms(2, 1000) == doctest::Approx(2 * m.fwd_ms(2, 1000)));
  CHECK(m.mem_capacity_mib == 80 * 1024);
  CHECK(m.peak_mem_mib(1, 16) > 8.03e9 * 16 / (1024.0 * 1024));  // weights, gradients, AdamW state
  // 16 B per parameter of weights, gradients and AdamW state: 128 GB, more than one H100 holds.
  // Plain DDP cannot fine-tune it there (sharding the state is what ZeRO is for).
  CHECK(m.max_batch(4096) == 0);

  test::TempDir dir;
  std::ofstream(dir / "gpt2.json") << nlohmann::json{
      {"hf_config", test::source_path("models/hf/gpt2.json")},
      {"gpu", "a100-80gb"}}.dump();
  const PerfModel gpt2 = load_perf_model(dir / "gpt2.json");
  CHECK(gpt2.name == "gpt2");
  CHECK(gpt2.precision == "bf16");  // the default dtype
  std::ofstream(dir / "gpt2-fp8.json") << nlohmann::json{
      {"hf_config", test::source_path("models/hf/gpt2.json")},
      {"gpu", "h100-sxm"},
      {"dtype", "fp8"}}.dump();
  CHECK(load_perf_model(dir / "gpt2-fp8.json").precision == "fp8");  // every dtype a preset has peaks for
  // About 2 GiB of state, and about 1 GiB of activations per 1,024-token sample.
  CHECK(gpt2.max_batch(1024) > 40);
  CHECK(gpt2.max_batch(1024) < 120);
}

TEST_CASE("a spec may state the interference factors no spec gives, and the model's source says so") {
  test::TempDir dir;
  std::ofstream(dir / "spec.json") << nlohmann::json{
      {"hf_config", test::source_path("models/hf/gpt2.json")},
      {"gpu", "h100-sxm"},
      {"comm_slowdown", 1.15}}.dump();
  const PerfModel m = load_perf_model(dir / "spec.json");
  CHECK(m.comm_slowdown == 1.15);
  CHECK(m.allreduce_slowdown == 1);
  CHECK(m.source.find("; comm_slowdown 1.15 as the spec gives it") != std::string::npos);
  CHECK(load_perf_model(test::source_path("models/llama-3-8b-h100.json")).comm_slowdown == 1);
  // ZeRO's measured terms likewise.
  std::ofstream(dir / "zero.json") << nlohmann::json{
      {"hf_config", test::source_path("models/hf/gpt2.json")},
      {"gpu", "h100-sxm"},
      {"allgather_factor", 1.5},
      {"optimizer_update_share", 0.8}}.dump();
  const PerfModel zero = load_perf_model(dir / "zero.json");
  CHECK(zero.allgather_factor == 1.5);
  CHECK(zero.optimizer_update_share == 0.8);
  CHECK(zero.source.find("; optimizer_update_share 0.8 as the spec gives it") != std::string::npos);
}

TEST_CASE("fused attention drops the quadratic memory term; recomputation keeps layer inputs only") {
  const TransformerSpec qwen = shipped("qwen2-7b");
  const auto plain = derived_model_json(qwen, "q", "h200", "bf16", {});
  const auto fused = derived_model_json(qwen, "q", "h200", "bf16", {.fused_attention = true});
  const auto recomputed = derived_model_json(qwen, "q", "h200", "bf16", {.checkpointing = true});
  CHECK(plain["memory_mib"]["nu"].get<double>() > 0);
  CHECK(fused["memory_mib"]["nu"] == 0.0);
  CHECK(fused["memory_mib"]["mu"] == plain["memory_mib"]["mu"]);
  CHECK(recomputed["memory_mib"]["mu"].get<double>() ==
        doctest::Approx((2.0 * 3584 * 28 + 34.0 * 3584) / (1024.0 * 1024)));
  // Backward redoes the forward: three forwards' worth instead of two.
  CHECK(recomputed["backward_ms"]["beta"].get<double>() ==
        doctest::Approx(3 * recomputed["forward_ms"]["beta"].get<double>()));
  CHECK(plain["backward_ms"]["beta"].get<double>() == doctest::Approx(2 * plain["forward_ms"]["beta"].get<double>()));
}

TEST_CASE("bad specs name the file and what is missing") {
  test::TempDir dir;
  const auto fails = [&](const nlohmann::json& config, const nlohmann::json& spec, const std::string& expected) {
    std::ofstream(dir / "config.json") << config.dump();
    std::ofstream(dir / "spec.json") << spec.dump();
    CAPTURE(expected);
    CHECK_THROWS_WITH_AS(load_perf_model(dir / "spec.json"), doctest::Contains(expected.c_str()), InputError);
  };
  nlohmann::json llama = read_json_file(test::source_path("models/hf/llama-3-8b.json"));
  const nlohmann::json spec = {{"hf_config", "config.json"}, {"gpu", "h100-sxm"}};
  nlohmann::json no_hidden = llama;
  no_hidden.erase("hidden_size");
  fails(no_hidden, spec, "config.json: a llama config needs \"hidden_size\"");
  fails({{"model_type", "t5"}}, spec, "model_type \"t5\" is not modelled");
  nlohmann::json odd_heads = llama;
  odd_heads["num_attention_heads"] = 7;
  odd_heads["num_key_value_heads"] = 7;
  fails(odd_heads, spec, "the hidden size 4096 is not a multiple of the 7 attention heads");
  nlohmann::json odd_kv = llama;
  odd_kv["num_key_value_heads"] = 5;
  fails(odd_kv, spec, "num_key_value_heads 5 does not divide the 32 attention heads");
  fails({{"hidden_size", 8}}, spec, "no \"model_type\"");
  fails(llama, {{"hf_config", "config.json"}, {"gpu", "v100"}}, "spec.json: gpu \"v100\" is not a preset");
  fails(llama, {{"hf_config", "config.json"}, {"gpu", "b200"}, {"dtype", "fp32"}},
        "dtype \"fp32\": b200 has peak figures for");
  fails(llama, {{"hf_config", "config.json"}, {"gpu", "h100-sxm"}, {"efficiency", 1.5}},
        "efficiency is the share of the GPU's peak FLOP/s reached: from 0.001 to 1, got 1.5");
  fails(llama, {{"hf_config", "config.json"}, {"gpu", "h100-sxm"}, {"efficiency", 1e-300}},
        "from 0.001 to 1, got 1e-300");
  fails(llama, {{"hf_config", "config.json"}, {"gpu", "h100-sxm"}, {"dtyp", "bf16"}}, "did you mean \"dtype\"");
  fails(llama, {{"hf_config", "missing.json"}, {"gpu", "h100-sxm"}}, "missing.json: cannot open JSON file");
  fails(llama, {{"hf_config", "config.json"}, {"gpu", "h100-sxm"}, {"comm_slowdown", 0.5}},
        "spec.json: comm_slowdown must be in [1, 100] (1: compute is not slowed by communication), got 0.5");
  fails(llama, {{"hf_config", "config.json"}, {"gpu", "h100-sxm"}, {"allreduce_slowdown", "2"}}, "allreduce_slowdown");
  llama["num_hidden_layers"] = 20000;
  fails(llama, spec, "key \"num_hidden_layers\" must be at most 10000 layers");
  llama["num_hidden_layers"] = 32;
  llama["num_attention_heads"] = -4;
  fails(llama, spec, "key \"num_attention_heads\" must be from 1 to 65536, got -4");
  llama["num_attention_heads"] = 32;
  llama["num_hidden_layers"] = 1.5;
  fails(llama, spec, "key \"num_hidden_layers\" is 1.5: expected an integer from 1 to 100000000");
  llama["num_hidden_layers"] = "32";
  fails(llama, spec, "key \"num_hidden_layers\" is string: expected an integer from 1 to 100000000");
}

TEST_CASE("issue 36: huge or mistyped Hugging Face sizes are named by the key written, never by a derived figure") {
  test::TempDir dir;
  const nlohmann::json spec = {{"hf_config", "config.json"}, {"gpu", "h100-sxm"}};
  const auto message = [&](const nlohmann::json& config) -> std::string {
    std::ofstream(dir / "config.json") << config.dump();
    std::ofstream(dir / "spec.json") << spec.dump();
    try {
      load_perf_model(dir / "spec.json");
    } catch (const InputError& e) {
      return e.what();
    }
    return "(no error)";
  };
  const nlohmann::json llama = read_json_file(test::source_path("models/hf/llama-3-8b.json"));
  auto with = [&](const char* key, const nlohmann::json& value) {
    nlohmann::json c = llama;
    c[key] = value;
    return c;
  };
  // heads × head_dim overflowed an int: the release build then blamed forward_ms.
  std::string m = message(with("head_dim", 100'000'000));
  CHECK_MESSAGE(m.find("config.json: key \"head_dim\" must be from 1 to 65536, got 100000000") != std::string::npos, m);
  m = message(with("model_type", 5));
  CHECK_MESSAGE(m.find("config.json: key \"model_type\" is number 5: expected a string") != std::string::npos, m);
  // Each key in its own range, together too large: said of the config's sizes, not of m0 or optimizer_ms.
  nlohmann::json huge = with("vocab_size", 100'000'000);
  huge["hidden_size"] = 1'000'000;
  huge["num_attention_heads"] = 1000;
  huge["num_key_value_heads"] = 1000;
  m = message(huge);
  CHECK_MESSAGE(m.find("config.json: its sizes make") != std::string::npos, m);
  CHECK_MESSAGE(m.find("more than the 5e11 a derived model holds") != std::string::npos, m);
  CHECK_MESSAGE(m.find("model.embed_tokens.weight, is 100000000 x 1000000") != std::string::npos, m);
  nlohmann::json wide = with("num_attention_heads", 65'536);
  wide["num_key_value_heads"] = 65'536;
  wide["head_dim"] = 65'536;
  m = message(wide);
  CHECK_MESSAGE(m.find("config.json: its sizes make") != std::string::npos, m);
  for (const char* derived : {"forward_ms", "memory_mib", "optimizer_ms", "beta"})
    CHECK_MESSAGE(m.find(derived) == std::string::npos, m);
}
