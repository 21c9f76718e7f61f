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

std::string window_text(const TransformerSpec& spec) {
  if (spec.windowed_layers == 0) return "";
  return "; a sliding window of " + std::to_string(spec.window) + " tokens on " + std::to_string(spec.windowed_layers) +
         " of " + std::to_string(spec.layers) +
         " layers (a window-aware kernel: FLOPs and scores within the window only)";
}
}  // namespace

long long TransformerSpec::params() const {
  long long n = 0;
  for (const auto& t : tensors) n += t.numel();
  return n;
}

const std::vector<IgnoredKey>& hf_ignored_keys() {
  static const char* const elementwise =
      "elementwise work, which neither FLOP term counts (the efficiency figure absorbs it)";
  static const std::vector<IgnoredKey> keys = {
      {"$comment", "a comment"},
      {"_name_or_path", "where the config was loaded from"},
      {"transformers_version", "the version of the library that wrote the config"},
      {"torch_dtype", "the dtype the weights were saved in: the spec's own \"dtype\" sets the training precision"},
      {"dtype", "the dtype the weights were saved in: the spec's own \"dtype\" sets the training precision"},
      {"bos_token_id", "a token id"},
      {"eos_token_id", "a token id"},
      {"pad_token_id", "a token id"},
      {"sep_token_id", "a token id"},
      {"decoder_start_token_id", "a token id"},
      {"id2label", "sizes a sequence-classification head, and is read for one"},
      {"label2id", "the inverse of id2label"},
      {"num_labels", "sizes a sequence-classification head, and is read for one"},
      {"problem_type", "the loss a head uses"},
      {"finetuning_task", "a label of the checkpoint"},
      {"task_specific_params", "generation settings"},
      {"initializer_range", "initialisation only"},
      {"rms_norm_eps", "a norm's epsilon"},
      {"layer_norm_eps", "a norm's epsilon"},
      {"layer_norm_epsilon", "a norm's epsilon"},
      {"hidden_act", elementwise},
      {"activation", elementwise},
      {"activation_function", elementwise},
      {"attention_dropout", elementwise},
      {"hidden_dropout", elementwise},
      {"hidden_dropout_prob", elementwise},
      {"attention_probs_dropout_prob", elementwise},
      {"dropout", elementwise},
      {"attn_pdrop", elementwise},
      {"embd_pdrop", elementwise},
      {"resid_pdrop", elementwise},
      {"seq_classif_dropout", elementwise},
      {"qa_dropout", elementwise},
      {"classifier_dropout", elementwise},
      {"summary_first_dropout", elementwise},
      {"scale_attn_weights", elementwise},
      {"scale_attn_by_inverse_layer_idx", elementwise},
      {"reorder_and_upcast_attn", elementwise},
      {"rope_theta", "rotary positions rotate queries and keys elementwise; the base changes no work"},
      {"rope_scaling", "rescales the rotary frequencies (context extension), not the work"},
      {"max_position_embeddings",
       "read where it sizes a learned position table; rotary families train at any length (past it is how context "
       "is extended)"},
      {"n_ctx", "GPT-2's older name for n_positions, which is read"},
      {"use_cache", "the key/value cache of inference"},
      {"pretraining_tp", "Llama's tensor-parallel slicing of the same matmuls"},
      {"is_decoder", "a causal mask over the same attention"},
      {"chunk_size_feed_forward", "runs the same feed-forward FLOPs in chunks"},
      {"gradient_checkpointing", "the spec's own \"activation_checkpointing\" decides recomputation"},
      {"attn_implementation", "the spec's own \"fused_attention\" says what the attention kernel stores"},
      {"_attn_implementation", "the spec's own \"fused_attention\" says what the attention kernel stores"},
      {"tie_weights_", "DistilBERT's flag for a masked-LM head, which is not modelled"},
      {"output_past", "outputs of inference"},
      {"output_hidden_states", "outputs of inference"},
      {"output_attentions", "outputs of inference"},
      {"return_dict", "outputs of inference"},
      {"torchscript", "tracing for export"},
      {"summary_activation", "GPT-2's double-heads summary, which is not modelled"},
      {"summary_proj_to_labels", "GPT-2's double-heads summary, which is not modelled"},
      {"summary_type", "GPT-2's double-heads summary, which is not modelled"},
      {"summary_use_proj", "GPT-2's double-heads summary, which is not modelled"},
  };
  return keys;
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
  char source[1024];
  std::snprintf(source, sizeof source,
                "derived from specs, not profiled: %s (%s head, %.4g B parameters) on %s, %s at %.0f%% of the "
                "%.4g TFLOPS peak; no fixed per-step overhead (calibrate a profile for one); memory per "
                "Korthikanti et al. 2022, attention scores %s%s%s; gradients fp32 as autocast DDP keeps them; "
                "figures: %s",
                spec.family.c_str(), spec.head.c_str(), params / 1e9, preset["name"].get<std::string>().c_str(),
                dtype.c_str(), efficiency * 100, preset["tflops"][dtype].get<double>(),
                options.fused_attention ? "never stored (fused attention)" : "stored",
                options.checkpointing ? ", full activation recomputation" : "", window_text(spec).c_str(),
                preset["source"].get<std::string>().c_str());
  std::string provenance = source;
  if (!spec.unread_keys.empty()) {  // said in every header, since they may change the cost
    provenance += "; config keys not read (check they leave the cost alone):";
    for (const auto& key : spec.unread_keys) provenance += " " + key;
  }
  nlohmann::json model = {
      {"name", model_name},
      {"gpu", preset["name"]},
      {"source", provenance},
      {"forward_ms", {{"a", 0}, {"beta", beta_ms}, {"gamma", gamma_ms}}},
      {"backward_ms", {{"a", 0}, {"beta", backward_factor * beta_ms}, {"gamma", backward_factor * gamma_ms}}},
      {"optimizer_ms", params * optimizer_bytes / bandwidth * 1e3},
      {"noise", {{"sigma", 0.01}}},
      {"memory_mib",
       {{"m0", 512 + params * 16 / MIB},
        {"mu", mu_bytes / MIB},
        {"nu", options.fused_attention || options.checkpointing ? 0.0 : nu_per_layer * spec.layers / MIB},
        {"capacity", preset["memory_gib"].get<double>() * 1024}}},
      {"gradient_bytes_per_param", 4},
      {"precision", dtype},
      {"layers", layers}};
  if (spec.windowed_layers > 0)
    model["attention_window"] = {{"tokens", spec.window},
                                 {"share", static_cast<double>(spec.windowed_layers) / spec.layers}};
  return model;
}

}  // namespace ddpsim
