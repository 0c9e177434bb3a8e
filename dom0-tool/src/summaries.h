/* SPDX-License-Identifier: GPL-2.0-only */
// The writer's summaries of committed rows (latency_totals,
// latency_buckets).
#pragma once

#include "db.h"
#include "figures.h"
#include "histogram.h"
#include "record.h"

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <unordered_map>
#include <vector>

namespace busprof {

// Summaries of rows (latency_totals, latency_buckets) not yet written: what
// one commit adds, and what the writer holds back between the commits that
// write them.
class Summaries {
  public:
    bool empty() const { return groups_.empty(); }
    void clear() { groups_.clear(); }

    // Adds another's counts to these.
    void merge(const Summaries& o) {
        for (auto& [k, og] : o.groups_) {
            Group& g = groups_[k];
            g.count += og.count;
            g.bus.merge(og.bus);
            g.overhead.merge(og.overhead);
        }
    }

    void add(int64_t session, const Record& r) {
        if (r.status != XEN_BUSPROF_STATUS_OK)
            return;
        Group& g = groups_[Key{session, r.domid, r.port, r.dir}];
        g.count++;
        TransactionTimes t = times_of(r);
        if (t.bus_ns)
            g.bus.add(*t.bus_ns);
        if (t.overhead_ns)
            g.overhead.add(*t.overhead_ns);
    }

    // Adds these to the tables, and records that every committed row of
    // these sessions (the rows of sessions.id) is now in them.
    void write(sqlite3* db, const std::vector<int64_t>& sessions);

  private:
    struct Key {
        int64_t session;
        uint16_t domid, port;
        uint8_t dir;
        bool operator==(const Key&) const = default;
    };
    struct KeyHash {
        size_t operator()(const Key& k) const {
            return std::hash<uint64_t>()(static_cast<uint64_t>(k.session) * 0x9e3779b97f4a7c15ull ^
                                         (uint64_t{k.domid} << 24 | uint64_t{k.port} << 8 | k.dir));
        }
    };
    // Counts by bucket in blocks of 128 buckets, allocated as values reach
    // them: an array lookup per value rather than a hash.  Negative values
    // (one clock cannot produce them) go to a map.
    struct Metric {
        static constexpr int kBlock = 128;
        uint64_t n = 0;
        int64_t min = 0, max = 0, sum = 0;
        std::array<std::unique_ptr<std::array<uint64_t, kBlock>>, (kBuckets + kBlock - 1) / kBlock>
            blocks;
        std::map<int64_t, uint64_t> negative; // by lo
        uint64_t& at(int index) {
            auto& b = blocks[index / kBlock];
            if (!b)
                b = std::make_unique<std::array<uint64_t, kBlock>>();
            return (*b)[index % kBlock];
        }
        void add(int64_t v) {
            min = n ? std::min(min, v) : v;
            max = n ? std::max(max, v) : v;
            sum += v;
            n++;
            if (v >= 0)
                at(bucket_index(v))++;
            else
                negative[bucket_of(v).lo]++;
        }
        void merge(const Metric& o) {
            if (!o.n)
                return;
            min = n ? std::min(min, o.min) : o.min;
            max = n ? std::max(max, o.max) : o.max;
            sum += o.sum;
            n += o.n;
            for (size_t i = 0; i < blocks.size(); i++)
                if (o.blocks[i])
                    for (int j = 0; j < kBlock; j++)
                        if ((*o.blocks[i])[j])
                            at(static_cast<int>(i) * kBlock + j) += (*o.blocks[i])[j];
            for (auto& [lo, c] : o.negative)
                negative[lo] += c;
        }
        // Each non-empty bucket: f(bucket, count).
        template <typename F> void each(F f) const {
            for (auto& [lo, c] : negative)
                f(bucket_of(lo), c);
            for (size_t i = 0; i < blocks.size(); i++)
                if (blocks[i])
                    for (int j = 0; j < kBlock; j++)
                        if ((*blocks[i])[j])
                            f(bucket_at(static_cast<int>(i) * kBlock + j), (*blocks[i])[j]);
        }
        // min, max and sum, into columns at, at + 1, at + 2 of latency_totals
        void bind(Stmt& s, int at) const {
            n ? s.bind(at, min) : s.bind_null(at);
            n ? s.bind(at + 1, max) : s.bind_null(at + 1);
            s.bind(at + 2, sum);
        }
    };
    struct Group {
        uint64_t count = 0;
        Metric bus, overhead;
    };
    std::unordered_map<Key, Group, KeyHash> groups_;
};

// Adds the rows of a session that its writer committed but did not yet
// count in the summaries (see summaries.cpp).
void summarise_rest(Db& db, int64_t session);

} // namespace busprof
