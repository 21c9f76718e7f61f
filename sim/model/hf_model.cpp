#include "model/hf_model.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string_view>

#include "common/error.hpp"
#include "common/json_util.hpp"

#include "embedded_gpu_presets.hpp"

namespace ddpsim {

namespace {

constexpr double MIB = 1024.0 * 1024.0;
// 8 TB of weights, gradients and AdamW state, below the 1e7 MiB a model file's memory takes.
constexpr double MAX_DERIVED_PARAMS = 5e11;

// Config fields by family: a missing one is named with what needs it.
class HfFields {
 public:
  HfFields(const nlohmann::json& config, std::string origin, std::string family)
      : config_(config), origin_(std::move(origin)), family_(std::move(family)) {}

  // Each size key is bounded where no real model reaches, so that any product of them stays far
  // inside 64 bits and a typo is named by its own key, not by a figure derived from it.
  static long long limit(std::string_view key) {
    for (const char* k : {"n_heads", "n_head", "num_attention_heads", "num_key_value_heads", "head_dim"})
      if (key == k) return 65'536;
    for (const char* k : {"dim", "hidden_size", "n_embd"})
      if (key == k) return 1'000'000;
    for (const char* k : {"hidden_dim", "intermediate_size", "n_inner"})
      if (key == k) return 10'000'000;
    return 100'000'000;  // vocabularies, position tables, labels
  }

  long long need(const char* key) const {
    if (!config_.contains(key) || config_[key].is_null())
      throw InputError(origin_ + ": a " + family_ + " config needs \"" + key + "\"");
    return positive(key);
  }
  long long get(const char* key, long long fallback) const {
    return config_.contains(key) && !config_[key].is_null() ? positive(key) : fallback;
  }
  bool flag(const char* key, bool fallback) const {
    return config_.contains(key) && !config_[key].is_null() ? convert<bool>(config_[key], where(key)) : fallback;
  }

  std::string where(const char* key) const { return origin_ + ": key \"" + key + "\""; }

 private:
  long long positive(const char* key) const {
    const std::string range = "from 1 to " + std::to_string(limit(key));
    if (config_[key].is_number_float())  // else convert() states the whole int64 range
      throw InputError(where(key) + " is " + config_[key].dump() + ": expected an integer " + range);
    const auto v = convert<long long>(config_[key], where(key));
    if (v < 1 || v > limit(key)) throw InputError(where(key) + " must be " + range + ", got " + std::to_string(v));
    return v;
  }

  const nlohmann::json& config_;
  std::string origin_, family_;
};

// Labels of a sequence-classification head: id2label's size, num_labels, or 2.
long long label_count(const nlohmann::json& config, const std::string& origin) {
  if (config.contains("id2label") && !config["id2label"].is_null()) {
    if (!config["id2label"].is_object())
      throw wrong_type(config["id2label"], origin + ": key \"id2label\"", "an object of label names by id");
    if (config["id2label"].empty())
      throw InputError(origin + ": key \"id2label\" is an empty object: expected a label name for each id");
    // The ids are the head's outputs: "0" to "n-1", each once, or the label count is ambiguous.
    const auto n = static_cast<long long>(config["id2label"].size());
    for (const auto& [id, label] : config["id2label"].items())
      if (id.empty() || id.size() > 9 || id.find_first_not_of("0123456789") != std::string::npos ||
          (id.size() > 1 && id[0] == '0') || std::stoll(id) >= n)
        throw InputError(origin + ": key \"id2label\": id \"" + id + "\" is not one of \"0\" to \"" +
                         std::to_string(n - 1) + "\" (one label per output of the head)");
    return n;
  }
  if (config.contains("num_labels") && !config["num_labels"].is_null()) {
    const auto n = convert<long long>(config["num_labels"], origin + ": key \"num_labels\"");
    if (n < 1 || n > 100'000'000) throw InputError(origin + ": key \"num_labels\" must be from 1 to 100000000");
    return n;
  }
  return 2;
}

std::string head_of(const nlohmann::json& config, const std::string& origin) {
  if (!config.contains("architectures") || config["architectures"].is_null()) return "none";
  const auto names = convert<std::vector<std::string>>(config["architectures"], origin + ": key \"architectures\"");
  if (names.size() != 1)  // one model, one head: which of several would be modelled is a guess
    throw InputError(origin + ": key \"architectures\" lists " + std::to_string(names.size()) +
                     " classes: expected one (the head to model, e.g. \"BertForSequenceClassification\")");
  for (const std::string& name : names) {
    if (name.ends_with("ForSequenceClassification")) return "sequence classification";
    if (name.ends_with("ForCausalLM") || name.ends_with("LMHeadModel")) return "causal LM";
  }
  return "none";  // other heads (masked LM, QA, ...) are not modelled: the base model alone
}

// Every layer is a list of tensors held in memory: a bound keeps a typo from exhausting it.
int layer_count(const HfFields& f, const char* key) {
  const long long layers = f.need(key);
  if (layers > 10000) throw InputError(f.where(key) + " must be at most 10000 layers");
  return static_cast<int>(layers);
}

}  // namespace

long long TransformerSpec::params() const {
  long long n = 0;
  for (const auto& t : tensors) n += t.numel();
  return n;
}

TransformerSpec transformer_from_hf_config(const nlohmann::json& config, const std::string& origin) {
  if (!config.is_object()) throw InputError(origin + ": expected a Hugging Face config.json object");
  if (!config.contains("model_type"))
    throw InputError(origin + ": no \"model_type\" (expected a Hugging Face config.json)");
  if (!config["model_type"].is_string())
    throw wrong_type(config["model_type"], origin + ": key \"model_type\"", "a string (e.g. \"llama\")");
  TransformerSpec s;
  s.family = config["model_type"].get<std::string>();
  s.head = head_of(config, origin);
  const HfFields f(config, origin, s.family);
  const auto add = [&s](std::string name, long long rows, long long cols = 1, bool matmul = false) {
    s.tensors.push_back({std::move(name), rows, cols, matmul});
  };
  const auto linear = [&](const std::string& name, long long out, long long in, bool bias) {
    add(name + ".weight", out, in, true);
    if (bias) add(name + ".bias", out);
  };
  const auto norm = [&](const std::string& name, long long h, bool bias) {
    add(name + ".weight", h);
    if (bias) add(name + ".bias", h);
  };
  long long vocab = 0, tied_head = 0;  // a tied LM head: no tensor of its own, but its FLOPs
  long long head_dim = 0;
  // The sizes every family has, each under its own key names; returns the hidden size.
  const auto sizes = [&](const char* hidden, const char* layers, const char* heads) {
    const long long h = f.need(hidden);
    vocab = f.need("vocab_size");
    s.layers = layer_count(f, layers);
    s.heads = static_cast<int>(f.need(heads));
    s.hidden = static_cast<int>(h);
    return h;
  };

  if (s.family == "distilbert") {
    const long long d = sizes("dim", "n_layers", "n_heads"), ff = f.need("hidden_dim");
    const std::string p = s.head == "none" ? "" : "distilbert.";
    add(p + "embeddings.word_embeddings.weight", vocab, d);
    s.position_table = f.need("max_position_embeddings");
    add(p + "embeddings.position_embeddings.weight", s.position_table, d);
    norm(p + "embeddings.LayerNorm", d, true);
    for (int i = 0; i < s.layers; ++i) {
      const std::string l = p + "transformer.layer." + std::to_string(i) + ".";
      for (const char* proj : {"q_lin", "k_lin", "v_lin", "out_lin"}) linear(l + "attention." + proj, d, d, true);
      norm(l + "sa_layer_norm", d, true);
      linear(l + "ffn.lin1", ff, d, true);
      linear(l + "ffn.lin2", d, ff, true);
      norm(l + "output_layer_norm", d, true);
    }
    if (s.head == "sequence classification") {
      linear("pre_classifier", d, d, true);
      linear("classifier", label_count(config, origin), d, true);
    }
  } else if (s.family == "bert" || s.family == "roberta") {
    const long long h = sizes("hidden_size", "num_hidden_layers", "num_attention_heads"),
                    ff = f.need("intermediate_size");
    const std::string p = s.head == "none" ? "" : s.family + ".";
    add(p + "embeddings.word_embeddings.weight", vocab, h);
    const long long positions = f.need("max_position_embeddings");
    add(p + "embeddings.position_embeddings.weight", positions, h);
    // RoBERTa numbers positions from its padding id + 1 (2): two rows are never a sample's.
    s.position_table = s.family == "roberta" ? std::max(0LL, positions - 2) : positions;
    add(p + "embeddings.token_type_embeddings.weight", f.get("type_vocab_size", 2), h);
    norm(p + "embeddings.LayerNorm", h, true);
    for (int i = 0; i < s.layers; ++i) {
      const std::string l = p + "encoder.layer." + std::to_string(i) + ".";
      for (const char* proj : {"query", "key", "value"}) linear(l + "attention.self." + proj, h, h, true);
      linear(l + "attention.output.dense", h, h, true);
      norm(l + "attention.output.LayerNorm", h, true);
      linear(l + "intermediate.dense", ff, h, true);
      linear(l + "output.dense", h, ff, true);
      norm(l + "output.LayerNorm", h, true);
    }
    if (s.head == "sequence classification" && s.family == "roberta") {
      linear("classifier.dense", h, h, true);  // RoBERTa's head replaces the pooler
      linear("classifier.out_proj", label_count(config, origin), h, true);
    } else {
      linear(p + "pooler.dense", h, h, true);
      if (s.head == "sequence classification") linear("classifier", label_count(config, origin), h, true);
    }
    if (s.head == "causal LM") throw InputError(origin + ": a " + s.family + " causal LM head is not modelled");
  } else if (s.family == "gpt2") {
    const long long d = sizes("n_embd", "n_layer", "n_head"), ff = f.get("n_inner", 4 * d);
    const std::string p = s.head == "none" ? "" : "transformer.";
    add(p + "wte.weight", vocab, d);
    s.position_table = f.need("n_positions");
    add(p + "wpe.weight", s.position_table, d);
    for (int i = 0; i < s.layers; ++i) {
      const std::string l = p + "h." + std::to_string(i) + ".";
      norm(l + "ln_1", d, true);
      linear(l + "attn.c_attn", 3 * d, d, true);
      linear(l + "attn.c_proj", d, d, true);
      norm(l + "ln_2", d, true);
      linear(l + "mlp.c_fc", ff, d, true);
      linear(l + "mlp.c_proj", d, ff, true);
    }
    norm(p + "ln_f", d, true);
    if (s.head == "causal LM") {
      if (f.flag("tie_word_embeddings", true))
        tied_head = vocab * d;
      else
        linear("lm_head", vocab, d, false);
    } else if (s.head == "sequence classification") {
      add("score.weight", label_count(config, origin), d, true);
    }
  } else if (s.family == "llama" || s.family == "mistral" || s.family == "qwen2") {
    const long long h = sizes("hidden_size", "num_hidden_layers", "num_attention_heads"),
                    ff = f.need("intermediate_size");
    const long long kv = f.get("num_key_value_heads", s.heads);  // grouped-query attention
    if (kv < 1 || s.heads % kv != 0)
      throw InputError(origin + ": num_key_value_heads " + std::to_string(kv) + " does not divide the " +
                       std::to_string(s.heads) + " attention heads (each key/value head serves a group of them)");
    head_dim = f.get("head_dim", 0);
    if (head_dim == 0 && h % s.heads != 0)
      throw InputError(origin + ": the hidden size " + std::to_string(h) + " is not a multiple of the " +
                       std::to_string(s.heads) + " attention heads (and no head_dim is given)");
    if (head_dim == 0) head_dim = h / s.heads;
    const bool qkv_bias = s.family == "qwen2" || f.flag("attention_bias", false);
    const bool o_bias = s.family != "qwen2" && f.flag("attention_bias", false);
    add("model.embed_tokens.weight", vocab, h);
    for (int i = 0; i < s.layers; ++i) {
      const std::string l = "model.layers." + std::to_string(i) + ".";
      linear(l + "self_attn.q_proj", s.heads * head_dim, h, qkv_bias);
      linear(l + "self_attn.k_proj", kv * head_dim, h, qkv_bias);
      linear(l + "self_attn.v_proj", kv * head_dim, h, qkv_bias);
      linear(l + "self_attn.o_proj", h, s.heads * head_dim, o_bias);
      linear(l + "mlp.gate_proj", ff, h, f.flag("mlp_bias", false));  // SwiGLU: gate and up, then down
      linear(l + "mlp.up_proj", ff, h, f.flag("mlp_bias", false));
      linear(l + "mlp.down_proj", h, ff, f.flag("mlp_bias", false));
      norm(l + "input_layernorm", h, false);  // RMSNorm: a weight, no bias
      norm(l + "post_attention_layernorm", h, false);
    }
    norm("model.norm", h, false);
    if (s.head == "causal LM") {
      if (f.flag("tie_word_embeddings", false))
        tied_head = vocab * h;
      else
        linear("lm_head", vocab, h, false);
    } else if (s.head == "sequence classification") {
      add("score.weight", label_count(config, origin), h, true);
    }
  } else {
    throw InputError(origin + ": model_type \"" + s.family +
                     "\" is not modelled (distilbert, bert, roberta, gpt2, llama, mistral, qwen2)");
  }
  if (s.hidden % s.heads != 0 && head_dim == 0)
    throw InputError(origin + ": the hidden size " + std::to_string(s.hidden) + " is not a multiple of the " +
                     std::to_string(s.heads) + " attention heads");
  if (head_dim == 0) head_dim = s.hidden / s.heads;

  // Counted in doubles: the keys' bounds keep each tensor inside 64 bits, not their sum.
  double matmul = static_cast<double>(tied_head), total = 0;
  const TensorSpec* largest = &s.tensors.front();
  for (const auto& t : s.tensors) {
    total += static_cast<double>(t.numel());
    if (t.matmul) matmul += static_cast<double>(t.numel());
    if (t.numel() > largest->numel()) largest = &t;
  }
  // Weights, gradients and AdamW state take 16 B a parameter: past this, a derived model's
  // memory would pass its own bound and the message would blame that figure.
  if (total > MAX_DERIVED_PARAMS) {
    char count[32];
    std::snprintf(count, sizeof count, "%.3g", total);
    throw InputError(origin + ": its sizes make " + count + " parameters, more than the 5e11 a derived model holds " +
                     "(the largest tensor, " +
                     largest->name + ", is " + std::to_string(largest->rows) + " x " + std::to_string(largest->cols) +
                     ")");
  }
  s.linear_flops_per_token = 2.0 * matmul;
  s.attention_flops_per_pair = 4.0 * s.layers * s.heads * static_cast<double>(head_dim);
  return s;
}

const nlohmann::json& gpu_presets() {
  static const nlohmann::json presets = parse_json(embedded::gpu_presets, "built-in models/gpus.json");
  return presets;
}

nlohmann::json derived_model_json(const TransformerSpec& spec, const std::string& model_name, const std::string& gpu,
                                  const std::string& dtype, const DerivationOptions& options) {
  const double efficiency = options.efficiency;
  const auto& presets = gpu_presets();
  if (gpu.empty() || gpu[0] == '$' || !presets.contains(gpu)) {
    std::string known;
    for (const auto& [key, value] : presets.items())
      if (key[0] != '$') known += (known.empty() ? "" : ", ") + key;
    throw InputError("gpu \"" + gpu + "\" is not a preset of models/gpus.json (" + known + ")");
  }
  const auto& preset = presets[gpu];
  if (!preset["tflops"].contains(dtype)) {
    std::string known;
    for (const auto& [key, value] : preset["tflops"].items()) known += (known.empty() ? "" : ", ") + key;
    throw InputError("dtype \"" + dtype + "\": " + gpu + " has peak figures for " + known);
  }
  // Below 0.1% of peak, times pass the model file's own bounds and the message would blame them.
  if (!(efficiency >= 1e-3 && efficiency <= 1))
    throw InputError("efficiency is the share of the GPU's peak FLOP/s reached: from 0.001 to 1, got " +
                     nlohmann::json(efficiency).dump());
  const double flops = preset["tflops"][dtype].get<double>() * 1e12 * efficiency;  // FLOP/s achieved
  const double dtype_bytes = dtype == "fp32" || dtype == "tf32" ? 4 : 2;
  const double bandwidth = preset["memory_GBps"].get<double>() * 1e9;
  const double params = static_cast<double>(spec.params());

  // Forward: 2 FLOPs per weight per token, plus attention per token pair; backward twice that.
  const double beta_ms = spec.linear_flops_per_token / flops * 1e3;
  const double gamma_ms = spec.attention_flops_per_pair / flops * 1e3;
  // AdamW streams the fp32 master weights, m and v in and out (24 B), reads the gradient and
  // writes the weight (in the training dtype; fp32 has no separate master copy).
  const double optimizer_bytes = dtype_bytes == 4 ? 28 : 24 + 2 * dtype_bytes;
  // Weights, gradients and AdamW state: 16 B per parameter in fp32 and in mixed precision alike;
  // activations per layer 34·h bytes per token and 5·heads bytes per token pair at 16 bits
  // (Korthikanti et al., "Reducing Activation Recomputation in Large Transformer Models", 2022,
  // without recomputation or fused attention); 512 MiB for the CUDA context and allocator.
  const double activation_scale = dtype_bytes / 2;
  // With full recomputation only each layer's input (2·h bytes per token at 16 bits) is kept,
  // plus one layer's activations while it is recomputed (the score term then fits in one layer,
  // dropped here with the fused kernels that go with it in practice); backward redoes forward.
  const double nu_per_layer = options.fused_attention ? 0.0 : 5.0 * spec.heads * activation_scale;
  const double mu_bytes = options.checkpointing
                              ? (2.0 * spec.hidden * spec.layers + 34.0 * spec.hidden) * activation_scale
                              : 34.0 * spec.hidden * spec.layers * activation_scale;
  const double backward_factor = options.checkpointing ? 3 : 2;
  // Backward time follows FLOPs: matmul weights take it, other tensors (embedding rows, norms)
  // a nominal hundredth per element.
  const auto weight = [](const TensorSpec& t) { return static_cast<double>(t.numel()) * (t.matmul ? 1.0 : 0.01); };
  double total_weight = 0;
  for (const auto& t : spec.tensors) total_weight += weight(t);
  nlohmann::json layers = nlohmann::json::array();
  for (const auto& t : spec.tensors)
    layers.push_back({{"name", t.name}, {"params", t.numel()}, {"bwd_fraction", weight(t) / total_weight}});
  char source[768];
  std::snprintf(source, sizeof source,
                "derived from specs, not profiled: %s (%s head, %.4g B parameters) on %s, %s at %.0f%% of the "
                "%.4g TFLOPS peak; no fixed per-step overhead (calibrate a profile for one); memory per "
                "Korthikanti et al. 2022, attention scores %s%s; figures: %s",
                spec.family.c_str(), spec.head.c_str(), params / 1e9, preset["name"].get<std::string>().c_str(),
                dtype.c_str(), efficiency * 100, preset["tflops"][dtype].get<double>(),
                options.fused_attention ? "never stored (fused attention)" : "stored",
                options.checkpointing ? ", full activation recomputation" : "",
                preset["source"].get<std::string>().c_str());
  return {{"name", model_name},
          {"gpu", preset["name"]},
          {"source", source},
          {"forward_ms", {{"a", 0}, {"beta", beta_ms}, {"gamma", gamma_ms}}},
          {"backward_ms", {{"a", 0}, {"beta", backward_factor * beta_ms}, {"gamma", backward_factor * gamma_ms}}},
          {"optimizer_ms", params * optimizer_bytes / bandwidth * 1e3},
          {"noise", {{"sigma", 0.01}}},
          {"memory_mib",
           {{"m0", 512 + params * 16 / MIB},
            {"mu", mu_bytes / MIB},
            {"nu", options.fused_attention || options.checkpointing ? 0.0 : nu_per_layer * spec.layers / MIB},
            {"capacity", preset["memory_gib"].get<double>() * 1024}}},
          {"gradient_bytes_per_param", static_cast<int>(dtype_bytes)},
          {"layers", layers}};
}

}  // namespace ddpsim
