#include "engine/interference.hpp"

#include <mutex>

#include <simgrid/s4u/Actor.hpp>
#include <simgrid/s4u/Engine.hpp>

namespace sg4 = simgrid::s4u;

namespace ddpsim {

Interference::Interference(int devices) : in_flight_(static_cast<std::size_t>(devices), 0) {
  for (int d = 0; d < devices; ++d) {
    lock_.push_back(sg4::Mutex::create());
    changed_.push_back(sg4::ConditionVariable::create());
  }
}

void Interference::compute(int device, double work_s, double slowdown) {
  if (slowdown == 1) return sg4::this_actor::sleep_for(work_s);
  const auto d = static_cast<std::size_t>(device);
  std::unique_lock lock(*lock_[d]);
  // Sleep until the work is done or the communication state changes, then account for the
  // time at the rate that held.
  while (work_s > 0) {
    const double rate = in_flight_[d] > 0 ? 1 / slowdown : 1.0, since = sg4::Engine::get_clock();
    if (changed_[d]->wait_for(lock, work_s / rate) == std::cv_status::timeout) return;
    work_s -= (sg4::Engine::get_clock() - since) * rate;
  }
}

void Interference::communicating(int device, int delta) {
  const auto d = static_cast<std::size_t>(device);
  std::unique_lock lock(*lock_[d]);
  in_flight_[d] += delta;
  changed_[d]->notify_all();
}

}  // namespace ddpsim
