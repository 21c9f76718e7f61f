// One SimGrid engine setup for every ddpsim simulation.
#pragma once

#include <memory>

#include <simgrid/s4u/Engine.hpp>

namespace ddpsim {

// A SimGrid engine configured for ddpsim: the CM02 network model (time = latency +
// size / bandwidth, bandwidth shared max-min between flows) without TCP window or
// cross-traffic corrections, so configured figures mean what they say. The configuration
// is process-wide in SimGrid and may be set only once.
std::unique_ptr<simgrid::s4u::Engine> make_engine();

}  // namespace ddpsim
