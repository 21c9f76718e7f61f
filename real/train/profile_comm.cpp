// ddptrain --profile with several ranks, after the grid: allreduces over a range of sizes,
// backward alone against backward beside back-to-back allreduces (interference), and ZeRO-1's
// all-gather at each size.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "common/rng.hpp"
#include "common/stats.hpp"
#include "report/outputs.hpp"
#include "train/profile_support.hpp"
#include "train/step_timer.hpp"
#include "train/trainer.hpp"
#include "train/zero1.hpp"

namespace ddptrain {

std::function<double()> Trainer::settled_collective(const ProfileOptions& p, std::function<void()> collective) {
  auto once = [this, collective = std::move(collective)] {
    comm_->barrier();
    StepTimer timer(device_);
    timer.mark(0);
    collective();
    timer.mark(1);
    return timer.ms(0, 1);
  };
  warm_up(once, p.warmup, p.max_warmup, [&](bool settled) { return agree_max(settled ? 0 : 1) == 0; });
  return once;
}

std::vector<ddpsim::RankStep> Trainer::profile_communication(const ProfileOptions& p) {
  std::vector<ddpsim::RankStep> rows;
  int timed = 0;
  std::vector<int> sizes = p.bytes;
  ddpsim::Rng(opt_.seed).shuffle(std::span(sizes));  // every rank the same order: they share the seed
  for (int size : sizes) {
    auto buffer = torch::ones({std::max(1, size / 4)}, torch::TensorOptions().dtype(torch::kFloat32).device(device_));
    const auto once = settled_collective(p, [&] { comm_->allreduce_sum(buffer)->wait(); });
    std::vector<double> times;
    for (int r = 0; r < p.reps; ++r) {
      ddpsim::RankStep row;
      row.step = timed++;
      row.allreduce_bytes = double(buffer.numel()) * 4;
      row.allreduce_ms = row.step_ms = once();
      times.push_back(row.allreduce_ms);
      rows.push_back(row);
    }
    log_ << "profile: allreduce of " << size << " bytes over " << G_ << " ranks: " << ddpsim::percentile(times, 50)
         << " ms (median of " << p.reps << ")\n";
  }
  profile_interference(p, rows);
  return rows;
}

// The all-gather a ZeRO-1 step ends with (allgather_slices, then the copy into place), at each
// --profile-bytes size S (a G-th of S from each rank): "S:median ms" pairs, which ddpsim calibrate
// reads as the collective library's all-gather against the ring its allreduce fit implies.
std::string Trainer::profile_allgather(const ProfileOptions& p) {
  std::string out;
  for (const int size : p.bytes) {
    const std::int64_t per_rank = std::max<std::int64_t>(1, size / 4 / G_);
    const auto options = torch::TensorOptions().dtype(torch::kFloat32).device(device_);
    const torch::Tensor slice = torch::ones({per_rank}, options), into = torch::empty({per_rank * G_}, options);
    const auto once = settled_collective(p, [&] { into.copy_(allgather_slices(*comm_, slice, per_rank)); });
    std::vector<double> times;
    for (int r = 0; r < p.reps; ++r) times.push_back(once());
    // This rank's median, as the allreduce rows are this rank's (each timing starts at a barrier).
    const double median = ddpsim::percentile(times, 50);
    log_ << "profile: all-gather of " << per_rank * G_ * 4 << " bytes over " << G_ << " ranks: " << median
         << " ms (median of " << p.reps << ")\n";
    out += (out.empty() ? "" : ",") + std::to_string(per_rank * G_ * 4) + ":" + ddpsim::format("%.4f", median);
  }
  return out;
}

// Interference, both ways, on every rank at once with DDP's own hooks off (the only
// communication is the one measured): backward alone against backward while allreduces of the
// largest DDP bucket run back to back for all of it (ddpsim calibrate fits the ratio as
// comm_slowdown), and a few such allreduces alone against the same ones queued beside a
// backward pass that outlasts them (fitted as allreduce_slowdown: on a CPU, the collective's
// threads share the cores that backward keeps busy).
void Trainer::profile_interference(const ProfileOptions& p, std::vector<ddpsim::RankStep>& rows) {
  const int b = std::max(1, opt_.global_batch / G_);
  std::vector<int> lengths = {p.lengths[p.lengths.size() / 2], p.lengths.back()};
  lengths.erase(std::unique(lengths.begin(), lengths.end()), lengths.end());
  constexpr double MiB = 1024.0 * 1024.0;
  const auto sizes = ddp_bucket_bytes();
  // DDP's largest bucket, up to --bucket-mb (the word-embedding gradient can be a bucket of its own).
  const auto bucket_elems = static_cast<std::int64_t>(
      std::min(*std::max_element(sizes.begin(), sizes.end()), std::max(opt_.bucket_mb, 1.0) * MiB) / 4);
  const double bucket_bytes = double(bucket_elems) * 4;
  // n allreduces queued back to back, over at most 8 buffers in turn (a small model's
  // backward can outlast hundreds of them, and their values do not matter).
  auto queue = [&](int n, std::vector<torch::Tensor>& buffers) {
    std::vector<WorkPtr> works;
    for (int i = 0; i < n; ++i) {
      if (buffers.size() < 8)
        buffers.push_back(torch::ones({bucket_elems}, torch::TensorOptions().dtype(torch::kFloat32).device(device_)));
      works.push_back(comm_->allreduce_sum(buffers[static_cast<std::size_t>(i) % buffers.size()]));
    }
    return works;
  };
  using Clock = std::chrono::steady_clock;
  auto ms_since = [](Clock::time_point t0, Clock::time_point t1) {
    return std::chrono::duration<double, std::milli>(t1 - t0).count();
  };
  if (buckets_) buckets_->set_active(false);
  int timed = rows.empty() ? 0 : rows.back().step + 1;
  for (int L : lengths) {
    const Batch batch = full_batch(b, L, device_);
    // One backward beside `concurrent` queued allreduces. Returns backward's time, whether the
    // allreduces outlasted it, and their time from launch to the last one's completion (taken
    // by a waiting thread, which uses no core while it waits).
    struct Beside {
      double bwd_ms, comm_ms;
      bool outlasted;
    };
    auto backward = [&](int concurrent) {
      model_->train();
      optimizer_->zero_grad();
      const auto loss = mean_loss(batch);
      std::vector<torch::Tensor> buffers;
      comm_->barrier();
      const auto t0 = Clock::now();
      auto works = queue(concurrent, buffers);
      Clock::time_point comm_done = t0;
      std::thread waiter([&] {
        for (auto& w : works) w->wait();
        comm_done = Clock::now();
      });
      StepTimer timer(device_);
      timer.mark(0);
      loss.backward();
      timer.mark(1);
      const auto bwd_done = Clock::now();
      waiter.join();
      return Beside{timer.ms(0, 1), ms_since(t0, comm_done), comm_done > bwd_done};
    };
    // Every rank's (valid, values...), so that rank 0 writes them all.
    auto gather = [&](bool valid, double a, double b = 0) {
      return comm_->allgather(torch::tensor({valid ? 1.0 : 0.0, a, b}, torch::kFloat64).to(device_)).cpu();
    };
    const double alone = [&] {
      warm_up([&] { return backward(0).bwd_ms; }, 3, 3);
      std::vector<double> t;
      for (int r = 0; r < 3; ++r) t.push_back(backward(0).bwd_ms);
      return agree_max(static_cast<int>(std::ceil(ddpsim::percentile(t, 50))));
    }();
    auto probe = torch::ones({bucket_elems}, torch::TensorOptions().dtype(torch::kFloat32).device(device_));
    comm_->barrier();
    const auto t0 = Clock::now();
    comm_->allreduce_sum(probe)->wait();
    const double one_ms = std::max(ms_since(t0, Clock::now()), 1e-3);

    // Compute beside communication: enough allreduces queued to outlast two backward passes,
    // the same count on every rank.
    const int outlasting = std::min(1024, agree_max(static_cast<int>(std::ceil(2.0 * alone / one_ms)) + 1));
    std::vector<int> order;
    for (int r = 0; r < p.reps; ++r) order.push_back(0), order.push_back(1);
    ddpsim::Rng(opt_.seed + static_cast<std::uint64_t>(L)).shuffle(std::span(order));
    std::vector<double> times[2];
    for (int with : order) {
      const Beside run = backward(with ? outlasting : 0);
      // A backward that outlived its allreduces was not slowed for all of it: drop the row
      // (every rank sees it alike only by chance, so each decides for its own row).
      const torch::Tensor all = gather(run.outlasted, run.bwd_ms);
      for (int g = 0; g < G_; ++g) {
        if (with && all[g][0].item<double>() == 0) continue;
        ddpsim::RankStep row = shape_row(b, L);
        row.step = timed++;
        row.bwd_ms = all[g][1].item<double>();
        row.concurrent_allreduce_bytes = with ? bucket_bytes : 0;
        times[with].push_back(row.bwd_ms);
        rows.push_back(row);
      }
    }
    if (!times[0].empty() && !times[1].empty())
      log_ << "profile: interference at b=" << b << " L=" << L << ": backward " << ddpsim::percentile(times[0], 50)
           << " ms alone, " << ddpsim::percentile(times[1], 50) << " ms beside " << outlasting << " allreduces of "
           << bucket_bytes << " bytes\n";

    // Communication beside compute: as many allreduces as take a third of backward alone (the
    // fewest over the ranks), so that they finish inside it even when slowed threefold.
    const int inside = -agree_max(-static_cast<int>(alone / (3 * one_ms)));
    if (inside < 1) {
      log_ << "profile: an allreduce of " << bucket_bytes << " bytes (" << one_ms
           << " ms) takes over a third of backward at b=" << b << " L=" << L
           << ": its slowdown beside backward is not measured there\n";
      continue;
    }
    for (auto& t : times) t.clear();
    for (int with : order) {
      Beside run{};
      if (with) {
        run = backward(inside);
      } else {
        std::vector<torch::Tensor> buffers;
        comm_->barrier();
        const auto start = Clock::now();
        for (auto& w : queue(inside, buffers)) w->wait();
        run.comm_ms = ms_since(start, Clock::now());
      }
      // Each allreduce's share of the time from launch to the last one's completion; a row
      // whose allreduces outlasted backward was not slowed for all of it and is dropped.
      const torch::Tensor all = gather(!with || !run.outlasted, run.comm_ms / inside, run.bwd_ms);
      for (int g = 0; g < G_; ++g) {
        if (all[g][0].item<double>() == 0) continue;
        ddpsim::RankStep row = with ? shape_row(b, L) : ddpsim::RankStep{};
        row.step = timed++;
        row.allreduce_bytes = bucket_bytes;
        row.allreduce_ms = all[g][1].item<double>();
        if (with) row.bwd_ms = all[g][2].item<double>();
        times[with].push_back(row.allreduce_ms);
        rows.push_back(row);
      }
    }
    if (!times[0].empty() && !times[1].empty())
      log_ << "profile: interference at b=" << b << " L=" << L << ": allreduce of " << bucket_bytes << " bytes "
           << ddpsim::percentile(times[0], 50) << " ms alone, " << ddpsim::percentile(times[1], 50)
           << " ms beside backward (" << inside << " queued)\n";
  }
  if (buckets_) buckets_->set_active(true);
}

// The largest of every rank's value, so that all ranks run as many collectives.
int Trainer::agree_max(int value) {
  const auto all = comm_->allgather(torch::tensor({static_cast<std::int64_t>(value)}, torch::kInt64).to(device_));
  return static_cast<int>(all.cpu().max().item<std::int64_t>());
}

}  // namespace ddptrain
