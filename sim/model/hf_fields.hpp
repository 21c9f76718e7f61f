// The reading of a Hugging Face config.json shared by its families' layouts (hf_config.cpp,
// hf_decoder.cpp): checked fields that remember which keys were read, and the tensor list.
#pragma once

#include <set>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/error.hpp"
#include "common/json_util.hpp"
#include "model/hf_model.hpp"

namespace ddpsim::hf {

// Config fields by family: a missing one is named with what needs it; every key read is kept,
// so that the keys nobody read can be said.
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
    return 100'000'000;  // vocabularies, position tables, labels, windows
  }

  bool given(const char* key) const {
    read_.insert(key);
    return config_.contains(key) && !config_[key].is_null();
  }
  const nlohmann::json& raw(const char* key) const { return read_.insert(key), config_[key]; }
  long long need(const char* key) const {
    if (!given(key)) throw InputError(origin_ + ": a " + family_ + " config needs \"" + key + "\"");
    return in_range(key, 1);
  }
  long long get(const char* key, long long fallback) const { return given(key) ? in_range(key, 1) : fallback; }
  long long count(const char* key, long long fallback) const { return given(key) ? in_range(key, 0) : fallback; }
  bool flag(const char* key, bool fallback) const {
    return given(key) ? convert<bool>(config_[key], where(key)) : fallback;
  }
  std::string text(const char* key, const std::string& fallback) const {
    return given(key) ? convert<std::string>(config_[key], where(key)) : fallback;
  }
  std::string where(const char* key) const { return origin_ + ": key \"" + key + "\""; }
  const std::string& origin() const { return origin_; }

  // The config's keys neither read nor listed by hf_ignored_keys().
  std::vector<std::string> unread() const;

 private:
  long long in_range(const char* key, long long lo) const {
    const std::string range = "from " + std::to_string(lo) + " to " + std::to_string(limit(key));
    if (config_[key].is_number_float())
      throw InputError(where(key) + " is " + config_[key].dump() + ": expected an integer " + range);
    if (!config_[key].is_number_integer()) throw wrong_type(config_[key], where(key), "an integer " + range);
    const auto v = convert<long long>(config_[key], where(key));
    if (v < lo || v > limit(key)) throw InputError(where(key) + " must be " + range + ", got " + std::to_string(v));
    return v;
  }

  const nlohmann::json& config_;
  std::string origin_, family_;
  mutable std::set<std::string, std::less<>> read_;
};

// Adds the tensors of one family in registration order, which sets DDP's buckets.
class Layout {
 public:
  explicit Layout(TransformerSpec& s) : s_(s) {}
  void add(std::string name, long long rows, long long cols = 1, bool matmul = false) {
    s_.tensors.push_back({std::move(name), rows, cols, matmul});
  }
  void linear(const std::string& name, long long out, long long in, bool bias) {
    add(name + ".weight", out, in, true);
    if (bias) add(name + ".bias", out);
  }
  void norm(const std::string& name, long long h, bool bias) {
    add(name + ".weight", h);
    if (bias) add(name + ".bias", h);
  }

 private:
  TransformerSpec& s_;
};

// The sizes every family has, each under its own key names: sets vocab, layers, heads, hidden
// and head_dim (hidden / heads) in `s`; returns the hidden size.
long long sizes(const HfFields& f, TransformerSpec& s, const char* hidden, const char* layers, const char* heads);
// Labels of a sequence-classification head: id2label's size, num_labels, or 2.
long long label_count(const HfFields& f);
// The head after a decoder's last norm: a causal LM's (tied to the embeddings, or untied, as
// `tie_default` says when the config does not) or a sequence classifier's score.
void decoder_head(const HfFields& f, TransformerSpec& s, Layout& t, long long hidden, bool tie_default);
// llama, mistral, qwen2, qwen3: grouped-query attention, SwiGLU, RMSNorm, sliding windows.
void decoder_layout(const HfFields& f, TransformerSpec& s, Layout& t);

}  // namespace ddpsim::hf
