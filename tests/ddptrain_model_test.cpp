// ddptrain's DistilBERT: Hugging Face names and sizes, the attention paths, safetensors.
#include <filesystem>
#include <fstream>
#include <set>

#include "model/distilbert.hpp"
#include "model/layout.hpp"
#include "model/perf_model.hpp"
#include "model/safetensors.hpp"
#include "model/safetensors_header.hpp"
#include "train/precision.hpp"

// Last: LibTorch brings glog, whose CHECK macros doctest must override.
#include <doctest/doctest.h>

using namespace ddptrain;

TEST_CASE("the base model has distilbert-base-uncased's parameter names and count") {
  DistilBertForSequenceClassification model(DistilBertConfig::base(), 0);
  std::int64_t count = 0;
  std::set<std::string> names;
  for (const auto& p : model->named_parameters()) {
    count += p.value().numel();
    names.insert(p.key());
  }
  CHECK(count == 66955010);
  for (const char* name :
       {"distilbert.embeddings.word_embeddings.weight", "distilbert.embeddings.position_embeddings.weight",
        "distilbert.embeddings.LayerNorm.weight", "distilbert.transformer.layer.0.attention.q_lin.weight",
        "distilbert.transformer.layer.5.attention.out_lin.bias", "distilbert.transformer.layer.3.sa_layer_norm.bias",
        "distilbert.transformer.layer.2.ffn.lin1.weight", "distilbert.transformer.layer.4.output_layer_norm.weight",
        "pre_classifier.weight", "classifier.bias"})
    CHECK_MESSAGE(names.count(name), name);
}

TEST_CASE("attention() matches the explicit form, padding masked") {
  torch::manual_seed(3);
  const auto q = torch::randn({2, 4, 7, 8}), k = torch::randn({2, 4, 7, 8}), v = torch::randn({2, 4, 7, 8});
  auto mask = torch::ones({2, 7}, torch::kBool);
  mask[1].narrow(0, 4, 3).fill_(false);
  const auto fast = attention(q, k, v, mask, 0.0, false), reference = attention_reference(q, k, v, mask, 0.0, false);
  CHECK(torch::allclose(fast, reference, /*rtol=*/1e-5, /*atol=*/1e-6));
  // A padded key changes nothing: sample 1 with its padding cut off gives the same outputs.
  const auto cut =
      attention_reference(q[1].narrow(1, 0, 4).unsqueeze(0), k[1].narrow(1, 0, 4).unsqueeze(0),
                          v[1].narrow(1, 0, 4).unsqueeze(0), torch::ones({1, 4}, torch::kBool), 0.0, false);
  CHECK(torch::allclose(cut[0], reference[1].narrow(1, 0, 4), 1e-5, 1e-6));
  MESSAGE("attention compiled as ", std::string(attention_kind()));
}

TEST_CASE("a classification logit does not depend on how much padding follows") {
  DistilBertForSequenceClassification model(DistilBertConfig::tiny(), 1);
  model->eval();
  const auto ids = torch::tensor({101, 2000, 2001, 2002, 102}, torch::kInt64).unsqueeze(0);
  const auto padded = torch::cat({ids, torch::zeros({1, 6}, torch::kInt64)}, 1);
  auto mask = torch::zeros({1, 11}, torch::kBool);
  mask.narrow(1, 0, 5).fill_(true);
  CHECK(torch::allclose(model(ids, torch::ones({1, 5}, torch::kBool)), model(padded, mask), 1e-5, 1e-6));
}

TEST_CASE("safetensors: a round trip loads by name; a shape mismatch names the tensor") {
  const auto dir = std::filesystem::temp_directory_path() / "ddptrain_safetensors_test";
  std::filesystem::create_directories(dir);
  const std::string path = (dir / "model.safetensors").string();
  DistilBertForSequenceClassification a(DistilBertConfig::tiny(), 1), b(DistilBertConfig::tiny(), 2);
  std::map<std::string, torch::Tensor> tensors;
  for (const auto& p : a->named_parameters()) tensors[p.key()] = p.value();
  tensors["vocab_projector.bias"] = torch::zeros({5}, torch::kFloat16);  // a head the model lacks
  tensors.erase("classifier.weight");                                    // a head the file lacks
  write_safetensors(path, tensors);
  const auto report = load_parameters(*b, path);
  CHECK(report.unused == 1);
  CHECK(report.absent == std::vector<std::string>{"classifier.weight"});
  for (const auto& p : b->named_parameters())
    if (p.key() != "classifier.weight") CHECK_MESSAGE(torch::equal(p.value(), a->named_parameters()[p.key()]), p.key());

  tensors["pre_classifier.weight"] = torch::zeros({3, 3});
  write_safetensors(path, tensors);
  CHECK_THROWS_WITH(load_parameters(*b, path),
                    doctest::Contains("tensor \"pre_classifier.weight\" has shape [3, 3], the model expects [32, 32]"));

  std::ofstream(path, std::ios::binary | std::ios::trunc) << std::string("\x10\0\0\0\0\0\0\0{\"x\":1}", 15);
  CHECK_THROWS_WITH(read_safetensors(path), doctest::Contains("exceeds the file"));
  CHECK_THROWS_WITH(read_safetensors((dir / "missing.safetensors").string()), doctest::Contains("no such file"));
  std::filesystem::remove_all(dir);
}

TEST_CASE("safetensors header: shapes and offsets are checked before anything is allocated") {
  const auto fails = [](const std::string& header, std::uint64_t data_size, const char* expected) {
    CHECK_THROWS_WITH(parse_safetensors_header(header, data_size, "m.safetensors"), doctest::Contains(expected));
  };
  const auto entries = parse_safetensors_header(
      R"({"__metadata__": {"format": "pt"}, "b": {"dtype": "BF16", "shape": [2, 3], "data_offsets": [16, 28]},
          "a": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}, "e": {"dtype": "I64", "shape": [0, 7],
          "data_offsets": [28, 28]}})",
      28, "m.safetensors");
  REQUIRE(entries.size() == 3);
  CHECK(entries[0].name == "a");
  CHECK(entries[1].shape == std::vector<std::int64_t>{2, 3});
  CHECK(entries[1].element_bytes == 2);
  CHECK(entries[1].end == 28);
  fails(R"({"a": {"dtype": "F32", "shape": [-4], "data_offsets": [0, 16]}})", 16, "negative dimension -4");
  fails(R"({"a": {"dtype": "F32", "shape": [4294967296, 4294967296, 16], "data_offsets": [0, 16]}})", 16,
        "more bytes than the file's 16 bytes of data");
  fails(R"({"a": {"dtype": "F32", "shape": [9223372036854775808], "data_offsets": [0, 16]}})", 16,
        "key \"shape\"[0] is");
  fails(R"({"a": {"dtype": "F32", "shape": [4], "data_offsets": [0, 99]}})", 16, "begin <= end <= 16");
  fails(R"({"a": {"dtype": "F32", "shape": [4], "data_offsets": [0, 8]}})", 16,
        "span 8 bytes, its shape and dtype need 16");
  fails(R"({"a": {"dtype": "U8", "shape": [4], "data_offsets": [0, 4]}})", 16, "unsupported dtype \"U8\"");
  fails(R"({"a": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16], "extra": 1}})", 16, "unknown key \"extra\"");
  fails(R"({"a": {"dtype": "F32", "shape": [4]}})", 16, "missing key \"data_offsets\"");
  fails(R"({"a": 3})", 16, "tensor \"a\" is");
  fails(R"([1])", 16, "header is not a JSON object");
  fails(R"({"a": )", 16, "m.safetensors: header");
}

TEST_CASE("bf16 autocast: forward in bf16 close to fp32, off again after the scope, sees updated weights") {
  DistilBertForSequenceClassification model(DistilBertConfig::tiny(), 2);
  model->eval();
  const auto ids = torch::randint(5, 1000, {3, 9}, torch::kInt64);
  const auto mask = torch::ones({3, 9}, torch::kBool);
  const auto fp32 = model(ids, mask);
  torch::Tensor bf16;
  {
    AutocastScope autocast(torch::kCPU, Precision::bf16);
    bf16 = model(ids, mask);
  }
  CHECK((bf16.scalar_type() == torch::kBFloat16));
  CHECK((fp32.scalar_type() == torch::kFloat));
  CHECK_FALSE(torch::equal(bf16.to(torch::kFloat), fp32));
  CHECK(torch::allclose(bf16.to(torch::kFloat), fp32, /*rtol=*/0.05, /*atol=*/0.02));
  CHECK((model(ids, mask).scalar_type() == torch::kFloat));

  // An in-place update, as the optimizer makes, shows in the next scope's forward (on CUDA the
  // scope's exit drops autocast's bf16 copies of the weights; LibTorch 1.13 keeps none on CPU).
  {
    torch::NoGradGuard no_grad;
    model->named_parameters()["classifier.bias"].add_(1.0);
  }
  torch::Tensor updated;
  {
    AutocastScope autocast(torch::kCPU, Precision::bf16);
    updated = model(ids, mask).to(torch::kFloat);
  }
  CHECK(torch::allclose(updated, bf16.to(torch::kFloat) + 1.0, 0.05, 0.02));
  CHECK(torch::allclose(updated, model(ids, mask), 0.05, 0.02));
  AutocastScope fp32_scope(torch::kCPU, Precision::fp32);
  CHECK((model(ids, mask).scalar_type() == torch::kFloat));
}

TEST_CASE("the written layout of the base model is the built-in DistilBERT model's, and loads in ddpsim") {
  DistilBertForSequenceClassification model(DistilBertConfig::base(), 0);
  const auto doc = layout_model(model, "base");
  const auto builtin = ddpsim::load_perf_model("rtx3090-distilbert");
  REQUIRE(doc["layers"].size() == builtin.layers.size());
  for (std::size_t i = 0; i < builtin.layers.size(); ++i) {
    CHECK(doc["layers"][i]["name"] == builtin.layers[i].name);  // tensor by tensor, as PyTorch's reducer sees them
    CHECK(doc["layers"][i]["params"] == builtin.layers[i].params);
  }
  const auto parsed = ddpsim::parse_perf_model(nlohmann::json::parse(doc.dump()), "layout");
  CHECK(parsed.total_params() == 66955010);
  DistilBertForSequenceClassification small(DistilBertConfig::small(), 0);
  CHECK(ddpsim::parse_perf_model(nlohmann::json::parse(layout_model(small, "small").dump()), "small").layers.size() ==
        builtin.layers.size() - 32);  // two layers fewer, sixteen tensors each
}
