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
  std::string family;  // model_type: distilbert, bert, roberta, gpt2, llama, mistral, qwen2
  std::string head;    // "sequence classification", "causal LM" or "none" (the base model)
  int layers = 0, hidden = 0, heads = 0;
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
