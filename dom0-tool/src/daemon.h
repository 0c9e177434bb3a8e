// The busprof daemon: the profiler of one guest domain.
#pragma once

#include "bus.h"
#include "db.h"
#include "fd.h"
#include "hv.h"
#include "session.h"

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace busprof {

struct DaemonConfig {
    std::string backend = "sim";
    std::string sim_socket;
    std::string bus = "sim";
    std::string db;
    std::string control_socket;
    std::string domain;
    unsigned timeout_ms = 1000;
    size_t queue_capacity = 65536;
    Triggers triggers;
    SimBusConfig sim_bus;
};

class Daemon {
  public:
    explicit Daemon(DaemonConfig cfg);
    ~Daemon();
    Daemon(const Daemon&) = delete;

    // Serves until stop() or until Xen detaches the profiler (the domain
    // went away).  Returns false if it was detached after a timeout.
    bool run();
    void stop();

    int64_t session_id() const { return session_id_; }
    const DomainInfo& domain() const { return dom_; }

  private:
    struct Pending {
        bool valid = false;
        bool record = false;
        uint64_t seq = 0;
        Record r{};
    };

    void process_ctrl();
    void handle_ctrl(const xen_busprof_ctrl_msg& m);
    void handle_ioreq(unsigned v);
    void finalize(unsigned v, bool force);
    void finalize_all(bool force);
    void answer_extract(const xen_busprof_ctrl_msg& m);
    uint64_t stamp_ns(uint64_t tsc) const;
    uint64_t to_ns(uint64_t tsc) const;
    void calibrate_clock();
    bool trapped(unsigned port, unsigned size) const;
    void state_changed(const char* marker, uint64_t now); // mu_ held
    void sync_session(); // mu_ held
    void serve_control();
    std::string control(const std::string& line);

    DaemonConfig cfg_;
    std::unique_ptr<Hypervisor> hv_;
    std::unique_ptr<Bus> bus_;
    DomainInfo dom_;
    std::unique_ptr<Writer> writer_;
    std::unique_ptr<Db> reader_;
    std::unique_ptr<Channel> chan_;
    std::vector<Pending> pending_;
    std::vector<std::pair<uint16_t, uint16_t>> traps_;
    uint64_t last_stamp_seq_[XEN_BUSPROF_MAX_VCPUS] = {};
    int64_t tsc_offset_ = 0;
    uint32_t seen_lost_ = 0;
    bool queue_full_reported_ = false;

    // session_, session_id_, counters below; recursive: control messages
    // change the session and complete pending records under it.
    std::recursive_mutex mu_;
    Session session_;
    int64_t session_id_ = 0;
    uint64_t unrecorded_ = 0, timeouts_ = 0;

    FD wake_;
    FD control_listen_;
    std::thread control_thread_;
    std::atomic<bool> stopping_{false};
    bool detached_ = false;
};

} // namespace busprof
