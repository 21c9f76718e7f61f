// The decoder families (llama, mistral, qwen2, qwen3): grouped-query attention, SwiGLU, RMSNorm,
// Qwen2's q/k/v biases, Qwen3's per-head q/k norms, and sliding-window attention as each
// family's config declares it.
#include <algorithm>

#include "model/hf_fields.hpp"

namespace ddpsim::hf {

namespace {

// How many of the layers attend within a window, and its width in tokens. Hugging Face's
// rules: an explicit layer_types list wins; Mistral windows every layer when sliding_window is
// set; Qwen2 and Qwen3 window the layers from max_window_layers on, and only with
// use_sliding_window (their sliding_window is otherwise a dormant default).
void sliding_window(const HfFields& f, TransformerSpec& s) {
  const bool qwen = s.family == "qwen2" || s.family == "qwen3";
  if (!qwen && s.family != "mistral") return;  // Llama has no window: its keys stay unread, and said
  const bool width = f.given("sliding_window");
  const bool enabled = qwen ? f.flag("use_sliding_window", false) : width;
  const long long first_windowed = qwen ? f.count("max_window_layers", 28) : 0;  // HF's default
  if (f.given("layer_types")) {
    const auto types = convert<std::vector<std::string>>(f.raw("layer_types"), f.where("layer_types"));
    if (types.size() != static_cast<std::size_t>(s.layers))
      throw InputError(f.where("layer_types") + " lists " + std::to_string(types.size()) + " layers, the model has " +
                       std::to_string(s.layers));
    for (std::size_t i = 0; i < types.size(); ++i) {
      if (types[i] != "full_attention" && types[i] != "sliding_attention")
        throw InputError(f.where("layer_types") + "[" + std::to_string(i) + "] is \"" + types[i] +
                         "\": expected \"full_attention\" or \"sliding_attention\"");
      s.windowed_layers += types[i] == "sliding_attention";
    }
  } else if (enabled) {
    s.windowed_layers = static_cast<int>(std::max(0LL, s.layers - first_windowed));
  }
  if (s.windowed_layers == 0) return;
  if (!width)
    throw InputError(f.origin() + ": " + std::to_string(s.windowed_layers) +
                     " layers attend within a sliding window, but \"sliding_window\" (its width in tokens) is null");
  s.window = f.need("sliding_window");
}

}  // namespace

void decoder_layout(const HfFields& f, TransformerSpec& s, Layout& t) {
  const long long h = sizes(f, s, "hidden_size", "num_hidden_layers", "num_attention_heads"),
                  ff = f.need("intermediate_size");
  const long long kv = f.get("num_key_value_heads", s.heads);  // grouped-query attention
  if (s.heads % kv != 0)
    throw InputError(f.origin() + ": num_key_value_heads " + std::to_string(kv) + " does not divide the " +
                     std::to_string(s.heads) + " attention heads (each key/value head serves a group of them)");
  s.head_dim = f.get("head_dim", s.family == "qwen3" ? 128 : s.head_dim);  // Qwen3Config's default: 128
  sliding_window(f, s);
  const bool qwen2 = s.family == "qwen2", qk_norm = s.family == "qwen3";
  const bool qkv_bias = qwen2 || f.flag("attention_bias", false);
  const bool o_bias = !qwen2 && f.flag("attention_bias", false);
  const bool mlp_bias = f.flag("mlp_bias", false);
  t.add("model.embed_tokens.weight", s.vocab, h);
  for (int i = 0; i < s.layers; ++i) {
    const std::string l = "model.layers." + std::to_string(i) + ".";
    t.linear(l + "self_attn.q_proj", s.heads * s.head_dim, h, qkv_bias);
    t.linear(l + "self_attn.k_proj", kv * s.head_dim, h, qkv_bias);
    t.linear(l + "self_attn.v_proj", kv * s.head_dim, h, qkv_bias);
    t.linear(l + "self_attn.o_proj", h, s.heads * s.head_dim, o_bias);
    if (qk_norm) {  // Qwen3: RMSNorm over each head's queries and keys, one weight per head dimension
      t.norm(l + "self_attn.q_norm", s.head_dim, false);
      t.norm(l + "self_attn.k_norm", s.head_dim, false);
    }
    t.linear(l + "mlp.gate_proj", ff, h, mlp_bias);  // SwiGLU: gate and up, then down
    t.linear(l + "mlp.up_proj", ff, h, mlp_bias);
    t.linear(l + "mlp.down_proj", h, ff, mlp_bias);
    t.norm(l + "input_layernorm", h, false);  // RMSNorm: a weight, no bias
    t.norm(l + "post_attention_layernorm", h, false);
  }
  t.norm("model.norm", h, false);
  decoder_head(f, s, t, h, /*tie_default=*/false);
}

void decoder_head(const HfFields& f, TransformerSpec& s, Layout& t, long long hidden, bool tie_default) {
  if (s.head == "causal LM") {
    if (f.flag("tie_word_embeddings", tie_default))
      s.tied_head = s.vocab * hidden;
    else
      t.linear("lm_head", s.vocab, hidden, false);
  } else if (s.head == "sequence classification") {
    t.add("score.weight", label_count(f), hidden, true);
  }
}

}  // namespace ddpsim::hf
