#include "model/distilbert.hpp"

#include <cmath>
#include <stdexcept>

#include <ATen/CPUGeneratorImpl.h>
#include <torch/version.h>

namespace ddptrain {

namespace nn = torch::nn;

DistilBertConfig DistilBertConfig::base() {
  return {};
}

DistilBertConfig DistilBertConfig::tiny() {
  DistilBertConfig c;
  c.name = "tiny";
  c.max_positions = 128;
  c.dim = 32;
  c.layers = 2;
  c.heads = 4;
  c.hidden_dim = 64;
  return c;
}

DistilBertConfig DistilBertConfig::small() {
  DistilBertConfig c;
  c.name = "small";
  c.dim = 256;
  c.layers = 4;
  c.heads = 4;
  c.hidden_dim = 1024;
  return c;
}

DistilBertConfig DistilBertConfig::named(const std::string& name) {
  if (name == "base") return base();
  if (name == "small") return small();
  if (name == "tiny") return tiny();
  throw std::invalid_argument("unknown model size \"" + name + "\" (known: base, small, tiny)");
}

torch::Tensor attention_reference(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                  const torch::Tensor& mask, double dropout_p, bool training) {
  // q, k, v: (B, H, L, d); mask: (B, L) → keys of padding get −∞ before the softmax.
  auto scores = torch::matmul(q, k.transpose(-2, -1)) / std::sqrt(double(q.size(-1)));
  scores = scores.masked_fill(mask.logical_not().view({mask.size(0), 1, 1, mask.size(1)}),
                              -std::numeric_limits<float>::infinity());
  auto weights = torch::softmax(scores, /*dim=*/-1);
  if (training && dropout_p > 0) weights = torch::dropout(weights, dropout_p, /*train=*/true);
  return torch::matmul(weights, v);
}

torch::Tensor attention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                        const torch::Tensor& mask, double dropout_p, bool training) {
#if TORCH_VERSION_MAJOR >= 2
  const auto keep = mask.view({mask.size(0), 1, 1, mask.size(1)});  // true = take part
  return at::scaled_dot_product_attention(q, k, v, keep, training ? dropout_p : 0.0, /*is_causal=*/false);
#else
  return attention_reference(q, k, v, mask, dropout_p, training);
#endif
}

const char* attention_kind() {
#if TORCH_VERSION_MAJOR >= 2
  return "sdpa";
#else
  return "explicit";
#endif
}

EmbeddingsImpl::EmbeddingsImpl(const DistilBertConfig& c) {
  word_embeddings = register_module("word_embeddings", nn::Embedding(c.vocab_size, c.dim));
  position_embeddings = register_module("position_embeddings", nn::Embedding(c.max_positions, c.dim));
  LayerNorm = register_module("LayerNorm", nn::LayerNorm(nn::LayerNormOptions({c.dim}).eps(1e-12)));
  dropout = register_module("dropout", nn::Dropout(c.dropout));
}

torch::Tensor EmbeddingsImpl::forward(const torch::Tensor& ids) {
  const auto positions = torch::arange(ids.size(1), ids.options()).unsqueeze(0);  // (1, L)
  return dropout(LayerNorm(word_embeddings(ids) + position_embeddings(positions)));
}

MultiHeadSelfAttentionImpl::MultiHeadSelfAttentionImpl(const DistilBertConfig& c)
    : heads(c.heads), head_dim(c.dim / c.heads), attention_dropout(c.attention_dropout) {
  if (c.dim % c.heads != 0) throw std::invalid_argument("model dim must be a multiple of the head count");
  q_lin = register_module("q_lin", nn::Linear(c.dim, c.dim));
  k_lin = register_module("k_lin", nn::Linear(c.dim, c.dim));
  v_lin = register_module("v_lin", nn::Linear(c.dim, c.dim));
  out_lin = register_module("out_lin", nn::Linear(c.dim, c.dim));
}

torch::Tensor MultiHeadSelfAttentionImpl::forward(const torch::Tensor& x, const torch::Tensor& mask) {
  const auto B = x.size(0), L = x.size(1);
  auto split = [&](const torch::Tensor& t) { return t.view({B, L, heads, head_dim}).transpose(1, 2); };  // (B,H,L,d)
  const auto context =
      attention(split(q_lin(x)), split(k_lin(x)), split(v_lin(x)), mask, attention_dropout, is_training());
  return out_lin(context.transpose(1, 2).reshape({B, L, heads * head_dim}));
}

FFNImpl::FFNImpl(const DistilBertConfig& c) {
  lin1 = register_module("lin1", nn::Linear(c.dim, c.hidden_dim));
  lin2 = register_module("lin2", nn::Linear(c.hidden_dim, c.dim));
  dropout = register_module("dropout", nn::Dropout(c.dropout));
}

torch::Tensor FFNImpl::forward(const torch::Tensor& x) {
  return dropout(lin2(torch::gelu(lin1(x))));
}

TransformerBlockImpl::TransformerBlockImpl(const DistilBertConfig& c) {
  attention = register_module("attention", MultiHeadSelfAttention(c));
  sa_layer_norm = register_module("sa_layer_norm", nn::LayerNorm(nn::LayerNormOptions({c.dim}).eps(1e-12)));
  ffn = register_module("ffn", FFN(c));
  output_layer_norm = register_module("output_layer_norm", nn::LayerNorm(nn::LayerNormOptions({c.dim}).eps(1e-12)));
}

torch::Tensor TransformerBlockImpl::forward(const torch::Tensor& x, const torch::Tensor& mask) {
  const auto h = sa_layer_norm(attention(x, mask) + x);
  return output_layer_norm(ffn(h) + h);
}

TransformerImpl::TransformerImpl(const DistilBertConfig& c) {
  layer = register_module("layer", nn::ModuleList());
  for (int i = 0; i < c.layers; ++i) layer->push_back(TransformerBlock(c));
}

torch::Tensor TransformerImpl::forward(torch::Tensor x, const torch::Tensor& mask) {
  for (const auto& block : *layer) x = block->as<TransformerBlock>()->forward(x, mask);
  return x;
}

DistilBertModelImpl::DistilBertModelImpl(const DistilBertConfig& c) {
  embeddings = register_module("embeddings", Embeddings(c));
  transformer = register_module("transformer", Transformer(c));
}

torch::Tensor DistilBertModelImpl::forward(const torch::Tensor& ids, const torch::Tensor& mask) {
  return transformer(embeddings(ids), mask);
}

DistilBertForSequenceClassificationImpl::DistilBertForSequenceClassificationImpl(const DistilBertConfig& c,
                                                                                 std::uint64_t seed)
    : config(c) {
  distilbert = register_module("distilbert", DistilBertModel(c));
  pre_classifier = register_module("pre_classifier", nn::Linear(c.dim, c.dim));
  classifier = register_module("classifier", nn::Linear(c.dim, c.labels));
  dropout = register_module("dropout", nn::Dropout(c.classifier_dropout));
  auto generator = at::make_generator<at::CPUGeneratorImpl>(seed);
  for (auto& p : named_parameters()) {
    torch::NoGradGuard no_grad;
    const auto& name = p.key();
    if (name.find("LayerNorm") != std::string::npos || name.find("layer_norm") != std::string::npos)
      name.size() >= 6 && name.compare(name.size() - 6, 6, "weight") == 0 ? p.value().fill_(1.0) : p.value().zero_();
    else if (name.compare(name.size() - 4, 4, "bias") == 0)
      p.value().zero_();
    else
      p.value().normal_(0.0, 0.02, generator);
  }
}

torch::Tensor DistilBertForSequenceClassificationImpl::forward(const torch::Tensor& ids, const torch::Tensor& mask) {
  const auto cls = distilbert(ids, mask).select(/*dim=*/1, /*index=*/0);  // (B, D)
  return classifier(dropout(torch::relu(pre_classifier(cls))));
}

}  // namespace ddptrain
