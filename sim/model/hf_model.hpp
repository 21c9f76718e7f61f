// Models from specifications: a Hugging Face config.json gives a transformer's parameter
// tensors (in registration order, which sets DDP's buckets) and its FLOPs; a GPU preset
// (models/gpus.json) gives peak throughput, memory and bandwidth. Together they make a
// performance model labelled "derived from specs": a prediction before any profile exists.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace ddpsim {

struct TensorSpec {
  std::string name;  // as the Hugging Face module names it: "model.layers.0.self_attn.q_proj.weight"
  long long rows = 0, cols = 1;
  bool matmul = false;  // a weight a token's forward multiplies by (2 FLOPs per element per token)
  long long numel() const { return rows * cols; }
};

// What a transformer costs per token, from its config alone.
struct TransformerSpec {
  std::string family;  // model_type: distilbert, bert, roberta, gpt2, llama, mistral, qwen2, qwen3
  std::string head;    // "sequence classification", "causal LM" or "none" (the base model)
  int layers = 0, hidden = 0, heads = 0;
  long long vocab = 0, head_dim = 0;
  long long tied_head = 0;  // a tied LM head's weights: no tensor of their own, but their FLOPs
  // Sliding-window attention: `windowed_layers` of the layers let a token attend to the `window`
  // tokens up to itself (Mistral, Qwen2/3's use_sliding_window); 0: every layer attends fully.
  long long window = 0;
  int windowed_layers = 0;
  // Keys of the config that no rule read and hf_ignored_keys() does not list: the derived
  // model's source names them, since they may change the cost.
  std::vector<std::string> unread_keys;
  std::vector<TensorSpec> tensors;      // each parameter once (tied weights are not repeated)
  double linear_flops_per_token = 0;    // forward: 2 per matmul weight element, the LM head included
  double attention_flops_per_pair = 0;  // forward: QKᵀ and AV, per (query, key) token pair
  // A learned position table's rows (BERT, GPT-2): no sample can be longer. 0 for RoPE models,
  // which take any length (training past max_position_embeddings is how context is extended).
  long long position_table = 0;
  long long params() const;
};

// Reads a config.json document of a supported family; throws InputError naming `origin` and the
// field a family needs when it is missing.
TransformerSpec transformer_from_hf_config(const nlohmann::json& config, const std::string& origin);

// The config keys read by no rule because they leave a training step's cost alone, with why
// (docs/models.md lists them; a test keeps the two alike).
struct IgnoredKey {
  const char* key;
  const char* reason;
};
const std::vector<IgnoredKey>& hf_ignored_keys();

// A spec-derived model document (the schema of models/*.json) for `spec` trained on `gpu` (a
// key of models/gpus.json) in `dtype`.
struct DerivationOptions {
  double efficiency = 0.5;       // of the dense peak
  bool fused_attention = false;  // scores never stored (FlashAttention): memory linear in L
  bool checkpointing = false;    // full activation recomputation: layer inputs kept, one more forward
};

nlohmann::json derived_model_json(const TransformerSpec& spec, const std::string& model_name, const std::string& gpu,
                                  const std::string& dtype, const DerivationOptions& options);

// The GPU presets (models/gpus.json, compiled in).
const nlohmann::json& gpu_presets();

}  // namespace ddpsim
