#include "sys/cpu.h"

#include <sched.h>
#include <sys/prctl.h>

#include <cstring>

namespace rocelab::sys {

static_assert(sizeof(cpu_set_t) <= 128, "AvoidCore keeps a cpu_set_t");

int agent_core() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) != 0 || CPU_COUNT(&set) < 2) return -1;
  for (int c = CPU_SETSIZE - 1; c >= 0; --c)
    if (CPU_ISSET(c, &set)) return c;
  return -1;
}

bool pin_thread(int cpu) {
  if (cpu < 0 || cpu >= CPU_SETSIZE) return false;
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  return sched_setaffinity(0, sizeof set, &set) == 0;
}

AvoidCore::AvoidCore(int cpu) {
  if (cpu < 0 || cpu >= CPU_SETSIZE) return;
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) != 0 || !CPU_ISSET(cpu, &set) || CPU_COUNT(&set) < 2) return;
  std::memcpy(saved_, &set, sizeof set);
  CPU_CLR(cpu, &set);
  changed_ = sched_setaffinity(0, sizeof set, &set) == 0;
}

AvoidCore::~AvoidCore() {
  if (!changed_) return;
  cpu_set_t set;
  std::memcpy(&set, saved_, sizeof set);
  sched_setaffinity(0, sizeof set, &set);
}

PreciseTimers::PreciseTimers() {
  const int slack = prctl(PR_GET_TIMERSLACK, 0, 0, 0, 0);
  if (slack >= 0 && prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0) == 0) saved_ = slack;
}

PreciseTimers::~PreciseTimers() {
  if (saved_ > 0) prctl(PR_SET_TIMERSLACK, static_cast<unsigned long>(saved_), 0, 0, 0);
}

}  // namespace rocelab::sys
