// SPDX-License-Identifier: GPL-2.0-only
// The thread that takes a process's stop signals.
#pragma once

#include <atomic>
#include <csignal>
#include <functional>
#include <pthread.h>
#include <thread>
#include <utility>

namespace busprof {

// Waits in sigwait() for a signal of `set`, which the caller has blocked
// in every thread, and calls on_signal once it comes.  Joined when this
// object goes (a signal of the set is sent to it first, in case none
// came), so that on_signal never runs after what it uses is gone: declare
// it after that.
class SignalThread {
  public:
    SignalThread(const sigset_t& set, const char* name, std::function<void()> on_signal)
        : set_(set), thread_([this, name, f = std::move(on_signal)] {
              pthread_setname_np(pthread_self(), name);
              int sig;
              if (sigwait(&set_, &sig) == 0 && !done_)
                  f();
          }) {}
    ~SignalThread() {
        done_ = true;
        int sig = SIGTERM;
        for (int s = 1; s < NSIG; s++)
            if (sigismember(&set_, s) == 1) {
                sig = s;
                break;
            }
        pthread_kill(thread_.native_handle(), sig);
        thread_.join();
    }
    SignalThread(const SignalThread&) = delete;
    SignalThread& operator=(const SignalThread&) = delete;

  private:
    sigset_t set_;
    std::atomic<bool> done_{false};
    std::thread thread_;
};

} // namespace busprof
