// DistilBERT for sequence classification in the LibTorch C++ frontend, matching Hugging Face's
// distilbert-base-uncased: parameter names follow its layout ("distilbert.embeddings.
// word_embeddings.weight", ..., "pre_classifier.weight", "classifier.bias"), so a user's
// model.safetensors loads by name. Shapes in comments: B samples, L padded length, D model dim.
#pragma once

#include <string>

#include <torch/torch.h>

namespace ddptrain {

struct DistilBertConfig {
  std::string name = "base";
  int vocab_size = 30522;
  int max_positions = 512;
  int dim = 768;
  int layers = 6;
  int heads = 12;
  int hidden_dim = 3072;  // FFN
  int labels = 2;
  double dropout = 0.1, attention_dropout = 0.1, classifier_dropout = 0.2;

  static DistilBertConfig base();
  // Four layers of width 256 (4 heads, FFN 1024): DistilBERT's shape at about a tenth of its
  // compute per token, so that a CPU core runs a 12-sample step in a fraction of a second.
  static DistilBertConfig small();
  // Two layers of width 32: the test-sized model (same vocabulary, so real tokens fit).
  static DistilBertConfig tiny();
  // "base", "small" or "tiny"; throws std::invalid_argument otherwise.
  static DistilBertConfig named(const std::string& name);
};

// Self-attention over (B, L, D) with a (B, L) padding mask (true = real token). On LibTorch ≥ 2.0
// it calls scaled_dot_product_attention; on 1.13 the explicit softmax(QKᵀ/√d)V. The choice is
// made at compile time; attention_reference() is the explicit form, kept as the test oracle.
torch::Tensor attention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                        const torch::Tensor& mask, double dropout_p, bool training);
torch::Tensor attention_reference(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                  const torch::Tensor& mask, double dropout_p, bool training);
// "sdpa" or "explicit": what attention() compiled to.
const char* attention_kind();

struct EmbeddingsImpl : torch::nn::Module {
  explicit EmbeddingsImpl(const DistilBertConfig& c);
  torch::Tensor forward(const torch::Tensor& ids);  // (B, L) → (B, L, D)
  torch::nn::Embedding word_embeddings{nullptr}, position_embeddings{nullptr};
  torch::nn::LayerNorm LayerNorm{nullptr};
  torch::nn::Dropout dropout{nullptr};
};
TORCH_MODULE(Embeddings);

struct MultiHeadSelfAttentionImpl : torch::nn::Module {
  explicit MultiHeadSelfAttentionImpl(const DistilBertConfig& c);
  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& mask);  // (B, L, D), (B, L)
  int heads, head_dim;
  double attention_dropout;
  torch::nn::Linear q_lin{nullptr}, k_lin{nullptr}, v_lin{nullptr}, out_lin{nullptr};
};
TORCH_MODULE(MultiHeadSelfAttention);

struct FFNImpl : torch::nn::Module {
  explicit FFNImpl(const DistilBertConfig& c);
  torch::Tensor forward(const torch::Tensor& x);
  torch::nn::Linear lin1{nullptr}, lin2{nullptr};
  torch::nn::Dropout dropout{nullptr};
};
TORCH_MODULE(FFN);

// Post-LN block: x = LN(x + attn(x)); x = LN(x + ffn(x)).
struct TransformerBlockImpl : torch::nn::Module {
  explicit TransformerBlockImpl(const DistilBertConfig& c);
  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& mask);
  MultiHeadSelfAttention attention{nullptr};
  torch::nn::LayerNorm sa_layer_norm{nullptr};
  FFN ffn{nullptr};
  torch::nn::LayerNorm output_layer_norm{nullptr};
};
TORCH_MODULE(TransformerBlock);

struct TransformerImpl : torch::nn::Module {
  explicit TransformerImpl(const DistilBertConfig& c);
  torch::Tensor forward(torch::Tensor x, const torch::Tensor& mask);
  torch::nn::ModuleList layer{nullptr};
};
TORCH_MODULE(Transformer);

struct DistilBertModelImpl : torch::nn::Module {
  explicit DistilBertModelImpl(const DistilBertConfig& c);
  torch::Tensor forward(const torch::Tensor& ids, const torch::Tensor& mask);  // → (B, L, D)
  Embeddings embeddings{nullptr};
  Transformer transformer{nullptr};
};
TORCH_MODULE(DistilBertModel);

struct DistilBertForSequenceClassificationImpl : torch::nn::Module {
  // Initialised from its own generator seeded with `seed` (Hugging Face's scheme: N(0, 0.02)
  // weights, zero biases, unit LayerNorm), so ranks and threads agree without shared state.
  DistilBertForSequenceClassificationImpl(const DistilBertConfig& c, std::uint64_t seed);
  // ids (B, L) int64, mask (B, L) bool → logits (B, labels), from the [CLS] position.
  torch::Tensor forward(const torch::Tensor& ids, const torch::Tensor& mask);
  DistilBertConfig config;
  DistilBertModel distilbert{nullptr};
  torch::nn::Linear pre_classifier{nullptr}, classifier{nullptr};
  torch::nn::Dropout dropout{nullptr};
};
TORCH_MODULE(DistilBertForSequenceClassification);

}  // namespace ddptrain
