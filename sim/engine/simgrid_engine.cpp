#include "engine/simgrid_engine.hpp"

#include <xbt/log.h>

#include "common/interrupt.hpp"

namespace sg4 = simgrid::s4u;

namespace ddpsim {

std::unique_ptr<sg4::Engine> make_engine() {
  static bool configured = false;
  auto engine = std::make_unique<sg4::Engine>("ddpsim");
  if (!configured) {
    xbt_log_control_set("root.thresh:critical");
    sg4::Engine::set_config("network/model:CM02");
    sg4::Engine::set_config("network/crosstraffic:0");
    sg4::Engine::set_config("network/TCP-gamma:0");
    sg4::Engine::set_config("contexts/stack-size:256");  // KiB: the actors are shallow, and many
    configured = true;
  }
  reinstall_interrupt_handler();
  return engine;
}

}  // namespace ddpsim
