// The training loop: it learns, resumes to the same parameters, and refuses bad input clearly.
#include <cmath>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <set>

#include "common/error.hpp"
#include "common/rng.hpp"
#include "test_data.hpp"
#include "train/optimizer_control.hpp"
#include "train/padding.hpp"
#include "train/trainer.hpp"

// Last: LibTorch brings glog, whose CHECK macros doctest must override.
#include <doctest/doctest.h>

using namespace ddptrain;
using ddpsim::test::TempDir;
namespace fs = std::filesystem;

namespace {

// A task a tiny model can learn quickly: the label says whether "good" or "bad" appears.
void write_task(const TempDir& dir, int rows) {
  std::ofstream vocab(dir / "vocab.txt");
  for (const char* t : {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "good", "bad", "movie", "film", "the", "a", "plot", "was",
                        "acting", "and", "very", "story"})
    vocab << t << "\n";
  std::ofstream tsv(dir / "train.tsv");
  tsv << "sentence\tlabel\n";
  ddpsim::Rng rng(11);
  const char* filler[] = {"movie", "film", "the", "a", "plot", "was", "acting", "and", "very", "story"};
  for (int i = 0; i < rows; ++i) {
    const int label = static_cast<int>(rng.below(2));
    std::string sentence;
    const auto words = 2 + rng.below(8), where = rng.below(words);
    for (std::uint64_t w = 0; w < words; ++w) {
      sentence += w ? " " : "";
      sentence += w == where ? (label ? "good" : "bad") : filler[rng.below(10)];
    }
    tsv << sentence << "\t" << label << "\n";
  }
}

TrainOptions task_options(const TempDir& dir) {
  TrainOptions o;
  o.data = dir / "train.tsv";
  o.dev = dir / "train.tsv";
  o.vocab = dir / "vocab.txt";
  o.model_size = "tiny";
  o.max_length = 16;
  o.global_batch = 16;
  o.lr = 2e-3;
  o.log_every = 1000;
  return o;
}

}  // namespace

TEST_CASE("training learns a small learnable task within 200 steps, in fp32 and under bf16 autocast") {
  TempDir dir;
  write_task(dir, 2000);
  TrainOptions o = task_options(dir);
  o.steps = 200;
  o.emulate_ranks = 2;
  o.policy = "minmax:buffer=16";
  for (const Precision precision : {Precision::fp32, Precision::bf16}) {
    const std::string name = precision_name(precision);
    CAPTURE(name);
    o.precision = precision;
    std::ostream quiet(nullptr);
    Trainer trainer(o, nullptr, quiet);
    std::vector<double> losses;
    for (int s = 0; s < 200; ++s) losses.push_back(trainer.step());
    const double first = std::accumulate(losses.begin(), losses.begin() + 20, 0.0) / 20;
    const double last = std::accumulate(losses.end() - 20, losses.end(), 0.0) / 20;
    MESSAGE(name, ": mean loss, first 20 steps ", first, ", last 20 steps ", last);
    CHECK(first > 0.6);
    CHECK(last < 0.25);
    CHECK(trainer.evaluate() > 0.9);
  }
}

TEST_CASE("largest_fitting finds the largest batch that fits in about 2·log2(hi) trials") {
  for (const int hi : {1, 2, 7, 48, 64, 1000}) {
    for (const int limit : {0, 1, 2, 3, 5, 31, 32, 33, 47, 48, 63, 64, 65, 999, 5000}) {
      CAPTURE(hi);
      CAPTURE(limit);
      int trials = 0;
      const int found = largest_fitting(hi, [&](int b) {
        ++trials;
        REQUIRE(b >= 1);
        REQUIRE(b <= hi);
        return b <= limit;
      });
      CHECK(found == std::min(hi, limit));
      CHECK(trials <= 2 * static_cast<int>(std::ceil(std::log2(hi))) + 2);
    }
  }
}

TEST_CASE("20 straight steps and 10 + resume + 10 give identical parameters") {
  TempDir dir;
  write_task(dir, 400);
  TrainOptions o = task_options(dir);
  o.steps = 20;
  o.policy = "sorted:mega=4";  // a policy with internal state the resume must rebuild
  o.emulate_ranks = 2;         // dropout stays on: the RNG state must be restored too
  std::ostream quiet(nullptr);
  Trainer straight(o, nullptr, quiet);
  for (int s = 0; s < 20; ++s) straight.step();

  Trainer first_half(o, nullptr, quiet);
  for (int s = 0; s < 10; ++s) first_half.step();
  first_half.save_checkpoint(dir / "ckpt.pt");
  TrainOptions resumed_options = o;
  resumed_options.resume = dir / "ckpt.pt";
  Trainer resumed(resumed_options, nullptr, quiet);
  CHECK(resumed.steps_done() == 10);
  for (int s = 10; s < 20; ++s) resumed.step();
  const auto a = straight.model()->named_parameters(), b = resumed.model()->named_parameters();
  // On CUDA, kernels that reduce with atomics (attention's backward) are not bitwise reproducible:
  // there the parameters must agree within 1e-5, where another dropout stream moves them ~lr.
  for (const auto& p : a)
    CHECK_MESSAGE(
        (p.value().is_cuda() ? torch::allclose(p.value(), b[p.key()], 0, 1e-5) : torch::equal(p.value(), b[p.key()])),
        p.key());
  for (std::size_t i = 0; i < resumed.rows().size(); ++i)
    CHECK(resumed.rows()[i].real_tokens == straight.rows()[20 + i].real_tokens);

  TrainOptions other = resumed_options;
  other.emulate_ranks = 3;
  other.global_batch = 18;
  CHECK_THROWS_WITH_AS(Trainer(other, nullptr, quiet), doctest::Contains("saved with 2 ranks, this run has 3"),
                       ddpsim::InputError);
  TrainOptions capped = resumed_options;
  capped.b_max = {12, 12};
  CHECK_THROWS_WITH_AS(Trainer(capped, nullptr, quiet),
                       doctest::Contains("saved with b_max none, this run has 12,12; resume with the same --bmax"),
                       ddpsim::InputError);
  TrainOptions truncated = resumed_options;
  truncated.max_length = o.max_length / 2;  // another sample stream under the same step count
  const std::string expected = ", max_length " + std::to_string(o.max_length / 2) + "; resume with the same --data";
  CHECK_THROWS_WITH_AS(Trainer(truncated, nullptr, quiet), doctest::Contains(expected.c_str()), ddpsim::InputError);
  TrainOptions faster = resumed_options;
  faster.lr = 1e-3;  // another update rule: not the saved run continued
  CHECK_THROWS_WITH_AS(Trainer(faster, nullptr, quiet), doctest::Contains(", this run has --lr 0.001, --weight-decay"),
                       ddpsim::InputError);
  TrainOptions bigger = resumed_options;
  bigger.model_size = "small";  // other layers: named, not torch's missing-submodule error
  CHECK_THROWS_WITH_AS(Trainer(bigger, nullptr, quiet), doctest::Contains("do not fit --model small"),
                       ddpsim::InputError);
  TrainOptions folder = resumed_options;
  folder.resume = dir / ".";
  CHECK_THROWS_WITH_AS(Trainer(folder, nullptr, quiet), doctest::Contains("not a regular file"), ddpsim::InputError);
  TrainOptions done = resumed_options;
  done.steps = 10;  // the checkpoint is at step 10: nothing left to train
  CHECK_THROWS_WITH_AS(Trainer(done, nullptr, quiet), doctest::Contains("saved at step 10, and --steps 10 leaves"),
                       ddpsim::UsageError);
}

TEST_CASE("a checkpoint with bytes flipped inside it is refused on resume") {
  TempDir dir;
  write_task(dir, 100);
  TrainOptions o = task_options(dir);
  o.steps = 4;
  std::ostream quiet(nullptr);
  Trainer first(o, nullptr, quiet);
  first.step();
  first.save_checkpoint(dir / "ckpt.pt");
  o.resume = dir / "ckpt.pt";
  CHECK_NOTHROW(Trainer(o, nullptr, quiet));
  {
    // Tensors make up nearly all of the file: its middle lies inside one.
    std::fstream file(dir / "ckpt.pt", std::ios::in | std::ios::out | std::ios::binary);
    file.seekg(0, std::ios::end);
    const auto middle = file.tellg() / 2;
    std::string bytes(64, '\0');
    file.seekg(middle);
    file.read(bytes.data(), 64);
    for (auto& c : bytes) c = static_cast<char>(~c);
    file.seekp(middle);
    file.write(bytes.data(), 64);
  }
  CHECK_THROWS_WITH_AS(Trainer(o, nullptr, quiet), doctest::Contains("ckpt.pt: checksum mismatch"), ddpsim::InputError);
}

TEST_CASE("bad input is named: missing vocab, malformed TSV, impossible batch") {
  TempDir dir;
  write_task(dir, 50);
  std::ostream quiet(nullptr);
  TrainOptions o = task_options(dir);
  o.vocab = dir / "nope.txt";
  CHECK_THROWS_WITH_AS(Trainer(o, nullptr, quiet), doctest::Contains("nope.txt"), ddpsim::InputError);
  std::ofstream(dir / "bad.tsv") << "sentence\tlabel\ngood film\t1\nno label\n";
  o = task_options(dir);
  o.data = dir / "bad.tsv";
  CHECK_THROWS_WITH_AS(Trainer(o, nullptr, quiet), doctest::Contains("bad.tsv:3"), ddpsim::InputError);
  std::ofstream(dir / "labels.tsv") << "sentence\tlabel\ngood film\t1\nodd film\t5\n";
  o.data = dir / "labels.tsv";
  CHECK_THROWS_WITH_AS(Trainer(o, nullptr, quiet),
                       doctest::Contains("labels.tsv:3: label 5 is out of range: the classifier has 2 classes"),
                       ddpsim::InputError);
  o = task_options(dir);
  o.emulate_ranks = 4;
  o.global_batch = 3;
  CHECK_THROWS_WITH_AS(Trainer(o, nullptr, quiet), doctest::Contains("B=3 is smaller than G=4"), ddpsim::InputError);
}

TEST_CASE("padded_length rounds up to the multiple, never past max_length, and leaves an empty batch empty") {
  CHECK(padded_length(13, 8, 128) == 16);
  CHECK(padded_length(16, 8, 128) == 16);
  CHECK(padded_length(17, 8, 20) == 20);
  CHECK(padded_length(20, 8, 20) == 20);
  CHECK(padded_length(0, 8, 20) == 0);
  CHECK(padded_length(13, 1, 128) == 13);
}

TEST_CASE(
    "--pad-to-multiple-of pads every batch to a multiple of N (capped at --max-length), the trace says so, "
    "and the losses are the unpadded run's") {
  TempDir dir;
  TrainOptions o;
  o.synthetic_lengths = "sst2";
  o.synthetic_samples = 400;
  o.model_size = "tiny";
  o.max_length = 20;  // not a multiple of 8: the longest batches are capped, not rounded to 24
  o.global_batch = 8;
  o.steps = 16;
  o.emulate_ranks = 2;
  o.dropout = 0;  // dropout's draws depend on the shape: off, so that only the padding differs
  o.policy = "minmax:buffer=16";
  o.log_every = 1000;
  std::ostream quiet(nullptr);
  for (const int micro_batches : {1, 2}) {
    CAPTURE(micro_batches);
    o.micro_batches = micro_batches;
    o.pad_to_multiple_of = 1;
    const fs::path plain_out = dir / ("plain" + std::to_string(micro_batches)),
                   padded_out = dir / ("padded" + std::to_string(micro_batches));
    o.out = plain_out;
    Trainer plain(o, nullptr, quiet);
    plain.run();
    o.pad_to_multiple_of = 8;
    o.out = padded_out;
    Trainer padded(o, nullptr, quiet);
    padded.run();
    REQUIRE(plain.rows().size() == padded.rows().size());
    std::set<int> lengths;
    for (std::size_t i = 0; i < padded.rows().size(); ++i) {
      const auto &p = padded.rows()[i], &q = plain.rows()[i];
      CAPTURE(i);
      lengths.insert(p.max_len);
      CHECK((p.max_len % 8 == 0 || p.max_len == o.max_length));
      CHECK(p.max_len == padded_length(q.max_len, 8, o.max_length));
      CHECK(p.real_tokens == q.real_tokens);
      std::int64_t tokens = std::int64_t{p.batch_size} * p.max_len;
      if (!p.micro.empty()) {
        tokens = 0;
        for (const auto& m : p.micro) {
          CHECK((m.max_len % 8 == 0 || m.max_len == o.max_length));
          tokens += std::int64_t{m.batch_size} * m.max_len;
        }
      }
      CHECK(p.padded_tokens == tokens);
      CHECK(p.loss == doctest::Approx(q.loss).epsilon(1e-4));  // masked positions change nothing but rounding
    }
    CHECK(lengths.count(o.max_length) == 1);  // some batches were capped
    CHECK(lengths.size() > 1);
    const auto header = [](const fs::path& csv) {
      std::ifstream in(csv);
      std::string line, text;
      while (std::getline(in, line) && line.rfind("#", 0) == 0) text += line + "\n";
      return text;
    };
    CHECK(header(padded_out / "steps.csv").find("# pad_to_multiple_of=8\n") != std::string::npos);
    CHECK(header(padded_out / "steps.csv").find("# grad_dtype=fp32\n") != std::string::npos);  // fp32 parameters
    CHECK(header(plain_out / "steps.csv").find("pad_to_multiple_of") == std::string::npos);
  }
  for (const int bad : {0, 21}) {
    o.pad_to_multiple_of = bad;
    CHECK_THROWS_WITH_AS(Trainer(o, nullptr, quiet),
                         doctest::Contains("--pad-to-multiple-of must be from 1 to --max-length (20), got"),
                         ddpsim::UsageError);
  }
}

TEST_CASE("the optimizer control: medians after step 0 by policy, and a warning past 10% apart") {
  // Two ranks, steps 0-4: step 0 (a first step's warm-up) is left out, rank 1 too.
  const auto rows = [](double opt) {
    std::vector<ddpsim::RankStep> out;
    for (int step = 0; step < 5; ++step)
      for (int rank = 0; rank < 2; ++rank) {
        ddpsim::RankStep r;
        r.step = step, r.rank = rank;
        r.opt_ms = step == 0 ? 1000 : rank == 1 ? 5 * opt : opt + step;  // medians: opt + 2.5
        out.push_back(r);
      }
    return out;
  };
  const auto a = rows(17.5), b = rows(18.5), c = rows(22.5);
  CHECK(
      optimizer_control_text({{"static", &a}, {"kk", &b}}) ==
      "optimizer, the same work in every policy's model, median after step 0: static 20.0, kk 21.0 ms (5.0% apart)\n");
  const std::string warned = optimizer_control_text({{"static", &a}, {"kk", &b}, {"sorted", &c}});
  CHECK(warned.find(
            "static 20.0, kk 21.0, sorted 25.0 ms (25.0% apart)\nwarning: this machine ran each policy's model at "
            "a level of its own") != std::string::npos);
  std::vector<ddpsim::RankStep> untimed = a;
  for (auto& r : untimed) r.opt_ms = std::nan("");
  CHECK(optimizer_control_text({{"static", &a}, {"kk", &untimed}}).empty());
}
