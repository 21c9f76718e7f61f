// A Hugging Face config.json read into a transformer's parameter tensors and FLOPs. Every key
// is read, or listed (hf_ignored_keys, docs/models.md) with why it leaves the cost alone, or
// named in the derived model's source as not read: a key that changes the cost is never
// dropped in silence, and one that would (experts, cross-attention) is refused.
#include <algorithm>
#include <cstdio>
#include <set>
#include <string_view>

#include "common/error.hpp"
#include "common/json_util.hpp"
#include "model/hf_fields.hpp"

namespace ddpsim {

namespace hf {

// 8 TB of weights, gradients and AdamW state, below the 1e7 MiB a model file's memory takes.
constexpr double MAX_DERIVED_PARAMS = 5e11;

std::vector<std::string> HfFields::unread() const {
  std::vector<std::string> keys;
  for (const auto& item : config_.items()) {
    const std::string& key = item.key();
    if (!read_.contains(key) && !std::ranges::any_of(hf_ignored_keys(), [&](const auto& k) { return k.key == key; }))
      keys.push_back(key);
  }
  return keys;
}

// Every layer is a list of tensors held in memory: a bound keeps a typo from exhausting it.
static int layer_count(const HfFields& f, const char* key) {
  const long long layers = f.need(key);
  if (layers > 10000) throw InputError(f.where(key) + " must be at most 10000 layers");
  return static_cast<int>(layers);
}

long long sizes(const HfFields& f, TransformerSpec& s, const char* hidden, const char* layers, const char* heads) {
  const long long h = f.need(hidden);
  s.vocab = f.need("vocab_size");
  s.layers = layer_count(f, layers);
  s.heads = static_cast<int>(f.need(heads));
  s.hidden = static_cast<int>(h);
  s.head_dim = h % s.heads == 0 ? h / s.heads : 0;  // 0: a decoder's head_dim key must say it
  return h;
}

// Labels of a sequence-classification head: id2label's size, num_labels, or 2.
long long label_count(const HfFields& f) {
  const std::string& origin = f.origin();
  if (f.given("id2label")) {
    const nlohmann::json& labels = f.raw("id2label");
    if (!labels.is_object()) throw wrong_type(labels, f.where("id2label"), "an object of label names by id");
    if (labels.empty())
      throw InputError(f.where("id2label") + " is an empty object: expected a label name for each id");
    // The ids are the head's outputs: "0" to "n-1", each once, or the label count is ambiguous.
    const auto n = static_cast<long long>(labels.size());
    for (const auto& [id, label] : labels.items())
      if (id.empty() || id.size() > 9 || id.find_first_not_of("0123456789") != std::string::npos ||
          (id.size() > 1 && id[0] == '0') || std::stoll(id) >= n)
        throw InputError(origin + ": key \"id2label\": id \"" + id + "\" is not one of \"0\" to \"" +
                         std::to_string(n - 1) + "\" (one label per output of the head)");
    return n;
  }
  return f.get("num_labels", 2);
}

static std::string head_of(const HfFields& f) {
  if (!f.given("architectures")) return "none";
  const auto names = convert<std::vector<std::string>>(f.raw("architectures"), f.where("architectures"));
  if (names.size() != 1)  // one model, one head: which of several would be modelled is a guess
    throw InputError(f.where("architectures") + " lists " + std::to_string(names.size()) +
                     " classes: expected one (the head to model, e.g. \"BertForSequenceClassification\")");
  if (names[0].ends_with("ForSequenceClassification")) return "sequence classification";
  if (names[0].ends_with("ForCausalLM") || names[0].ends_with("LMHeadModel")) return "causal LM";
  return "none";  // other heads (masked LM, QA, ...) are not modelled: the base model alone
}

// What experts, cross-attention or quantized weights would add is not modelled: refused by name.
static void refuse_unmodelled(const nlohmann::json& config, const std::string& origin, const std::string& family) {
  static const char* const moe_types[] = {"mixtral", "qwen2_moe", "qwen3_moe", "deepseek_v2", "deepseek_v3",
                                          "dbrx",    "olmoe",     "jamba",     "phimoe",      "granitemoe"};
  std::string expert_key;
  for (const char* key : {"num_local_experts", "num_experts", "n_routed_experts", "moe_num_experts"})
    if (config.contains(key) && config[key].is_number() && config[key].get<double>() > 1) expert_key = key;
  if (std::ranges::find(moe_types, family) != std::end(moe_types) || !expert_key.empty())
    throw InputError(origin + ": a mixture-of-experts model (" +
                     (expert_key.empty() ? "model_type \"" + family + "\"" : "key \"" + expert_key + "\"") +
                     ") is not modelled: what is missing is the router — which tokens reach which of the experts "
                     "(each token's top-k), the experts' uneven loads that follow, and the all-to-all that carries "
                     "tokens to them under expert parallelism; the dense families are distilbert, bert, roberta, "
                     "gpt2, llama, mistral, qwen2, qwen3");
  for (const char* key : {"add_cross_attention", "is_encoder_decoder"})
    if (config.contains(key) && config[key] == true)
      throw InputError(origin + ": key \"" + key +
                       "\" is true: cross-attention (an encoder-decoder) is not modelled, only one stack of layers");
  if (config.contains("quantization_config") && !config["quantization_config"].is_null())
    throw InputError(origin +
                     ": key \"quantization_config\": quantized weights (and the adapters trained on them) "
                     "are not modelled; give the config of the unquantized model");
}

static void distilbert(const HfFields& f, TransformerSpec& s, Layout& t) {
  const long long d = sizes(f, s, "dim", "n_layers", "n_heads"), ff = f.need("hidden_dim");
  if (f.flag("sinusoidal_pos_embds", false))
    throw InputError(f.where("sinusoidal_pos_embds") +
                     " is true: a frozen sinusoidal position table is not modelled (DDP would not reduce it)");
  const std::string p = s.head == "none" ? "" : "distilbert.";
  t.add(p + "embeddings.word_embeddings.weight", s.vocab, d);
  s.position_table = f.need("max_position_embeddings");
  t.add(p + "embeddings.position_embeddings.weight", s.position_table, d);
  t.norm(p + "embeddings.LayerNorm", d, true);
  for (int i = 0; i < s.layers; ++i) {
    const std::string l = p + "transformer.layer." + std::to_string(i) + ".";
    for (const char* proj : {"q_lin", "k_lin", "v_lin", "out_lin"}) t.linear(l + "attention." + proj, d, d, true);
    t.norm(l + "sa_layer_norm", d, true);
    t.linear(l + "ffn.lin1", ff, d, true);
    t.linear(l + "ffn.lin2", d, ff, true);
    t.norm(l + "output_layer_norm", d, true);
  }
  if (s.head == "sequence classification") {
    t.linear("pre_classifier", d, d, true);
    t.linear("classifier", label_count(f), d, true);
  }
}

static void bert(const HfFields& f, TransformerSpec& s, Layout& t) {
  const long long h = sizes(f, s, "hidden_size", "num_hidden_layers", "num_attention_heads"),
                  ff = f.need("intermediate_size");
  if (const std::string kind = f.text("position_embedding_type", "absolute"); kind != "absolute")
    throw InputError(f.where("position_embedding_type") + " is \"" + kind +
                     "\": only \"absolute\" positions are modelled (relative ones add a term per token pair)");
  if (s.head == "causal LM") throw InputError(f.origin() + ": a " + s.family + " causal LM head is not modelled");
  const std::string p = s.head == "none" ? "" : s.family + ".";
  t.add(p + "embeddings.word_embeddings.weight", s.vocab, h);
  const long long positions = f.need("max_position_embeddings");
  t.add(p + "embeddings.position_embeddings.weight", positions, h);
  // RoBERTa numbers positions from its padding id + 1 (2): two rows are never a sample's.
  s.position_table = s.family == "roberta" ? std::max(0LL, positions - 2) : positions;
  t.add(p + "embeddings.token_type_embeddings.weight", f.get("type_vocab_size", 2), h);
  t.norm(p + "embeddings.LayerNorm", h, true);
  for (int i = 0; i < s.layers; ++i) {
    const std::string l = p + "encoder.layer." + std::to_string(i) + ".";
    for (const char* proj : {"query", "key", "value"}) t.linear(l + "attention.self." + proj, h, h, true);
    t.linear(l + "attention.output.dense", h, h, true);
    t.norm(l + "attention.output.LayerNorm", h, true);
    t.linear(l + "intermediate.dense", ff, h, true);
    t.linear(l + "output.dense", h, ff, true);
    t.norm(l + "output.LayerNorm", h, true);
  }
  if (s.head == "sequence classification" && s.family == "roberta") {
    t.linear("classifier.dense", h, h, true);  // RoBERTa's head replaces the pooler
    t.linear("classifier.out_proj", label_count(f), h, true);
  } else {
    t.linear(p + "pooler.dense", h, h, true);
    if (s.head == "sequence classification") t.linear("classifier", label_count(f), h, true);
  }
}

static void gpt2(const HfFields& f, TransformerSpec& s, Layout& t) {
  const long long d = sizes(f, s, "n_embd", "n_layer", "n_head"), ff = f.get("n_inner", 4 * d);
  const std::string p = s.head == "none" ? "" : "transformer.";
  t.add(p + "wte.weight", s.vocab, d);
  s.position_table = f.need("n_positions");
  t.add(p + "wpe.weight", s.position_table, d);
  for (int i = 0; i < s.layers; ++i) {
    const std::string l = p + "h." + std::to_string(i) + ".";
    t.norm(l + "ln_1", d, true);
    t.linear(l + "attn.c_attn", 3 * d, d, true);
    t.linear(l + "attn.c_proj", d, d, true);
    t.norm(l + "ln_2", d, true);
    t.linear(l + "mlp.c_fc", ff, d, true);
    t.linear(l + "mlp.c_proj", d, ff, true);
  }
  t.norm(p + "ln_f", d, true);
  decoder_head(f, s, t, d, /*tie_default=*/true);
}

// FLOPs per token and per token pair, once the tensors are known; refuses a model too large to hold.
static void finish_counts(TransformerSpec& s, const std::string& origin) {
  // Counted in doubles: the keys' bounds keep each tensor inside 64 bits, not their sum.
  double matmul = static_cast<double>(s.tied_head), total = 0;
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
                     "(the largest tensor, " + largest->name + ", is " + std::to_string(largest->rows) + " x " +
                     std::to_string(largest->cols) + ")");
  }
  s.linear_flops_per_token = 2.0 * matmul;
  s.attention_flops_per_pair = 4.0 * s.layers * s.heads * static_cast<double>(s.head_dim);
}

}  // namespace hf

TransformerSpec transformer_from_hf_config(const nlohmann::json& config, const std::string& origin) {
  if (!config.is_object()) throw InputError(origin + ": expected a Hugging Face config.json object");
  if (!config.contains("model_type"))
    throw InputError(origin + ": no \"model_type\" (expected a Hugging Face config.json)");
  if (!config["model_type"].is_string())
    throw wrong_type(config["model_type"], origin + ": key \"model_type\"", "a string (e.g. \"llama\")");
  using namespace hf;
  TransformerSpec s;
  s.family = config["model_type"].get<std::string>();
  refuse_unmodelled(config, origin, s.family);
  const HfFields f(config, origin, s.family);
  f.given("model_type");
  s.head = head_of(f);
  Layout t(s);
  if (s.family == "distilbert")
    distilbert(f, s, t);
  else if (s.family == "bert" || s.family == "roberta")
    bert(f, s, t);
  else if (s.family == "gpt2")
    gpt2(f, s, t);
  else if (s.family == "llama" || s.family == "mistral" || s.family == "qwen2" || s.family == "qwen3")
    decoder_layout(f, s, t);
  else
    throw InputError(origin + ": model_type \"" + s.family +
                     "\" is not modelled (distilbert, bert, roberta, gpt2, llama, mistral, qwen2, qwen3)");
  if (s.head_dim == 0)
    throw InputError(origin + ": the hidden size " + std::to_string(s.hidden) + " is not a multiple of the " +
                     std::to_string(s.heads) + " attention heads" +
                     (s.family == "llama" || s.family.starts_with("mistral") || s.family.starts_with("qwen")
                          ? " (and no head_dim is given)"
                          : ""));
  s.unread_keys = f.unread();
  finish_counts(s, origin);
  return s;
}

}  // namespace ddpsim
