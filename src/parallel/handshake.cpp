#include "parallel/handshake.h"

#include "parallel/step_message.h"

#include <cstdio>
#include <cstring>

namespace deepinfer::parallel {
namespace {

constexpr std::size_t kLabelBytes = 96;

struct Record {
    std::uint64_t checkpoint_hash;
    std::uint64_t config_hash;
    std::int32_t tp, ep, cp, world;
    std::uint16_t protocol;
    std::uint16_t ep_on_cp;
    std::int32_t world_rank;
    char label[kLabelBytes]; // NUL-terminated
};

std::string hex(std::uint64_t v) {
    char buf[24];
    std::snprintf(buf, sizeof buf, "0x%016llx", static_cast<unsigned long long>(v));
    return buf;
}

std::string layout_text(const Record& r) {
    return "tp=" + std::to_string(r.tp) + " ep=" + std::to_string(r.ep) + " cp=" + std::to_string(r.cp) +
           " of " + std::to_string(r.world) + (r.ep_on_cp ? " (ep on cp)" : "");
}

} // namespace

Status handshake(Communicator& world, const RankIdentity& mine) {
    Record me{};
    me.checkpoint_hash = mine.checkpoint_hash;
    me.config_hash = mine.config_hash;
    me.tp = mine.layout.tp;
    me.ep = mine.layout.ep;
    me.cp = mine.layout.cp;
    me.world = mine.layout.world;
    me.ep_on_cp = mine.layout.ep_on_cp ? 1 : 0;
    me.protocol = kStepMessageVersion;
    me.world_rank = world.rank();
    std::strncpy(me.label, mine.checkpoint_label.c_str(), kLabelBytes - 1);

    std::vector<Record> all(static_cast<std::size_t>(world.size()));
    DI_RETURN_IF_ERROR(world
                           .all_gather(std::as_bytes(std::span<const Record>(&me, 1)),
                                       std::as_writable_bytes(std::span<Record>(all)))
                           .with_context("start-up handshake"));
    const Record& ref = all[0];
    std::string problems;
    for (std::size_t r = 1; r < all.size(); ++r) {
        const Record& o = all[r];
        std::string diff;
        auto add = [&](const std::string& what) { diff += (diff.empty() ? "" : "; ") + what; };
        if (o.protocol != ref.protocol) {
            add("step protocol version " + std::to_string(o.protocol) + " vs " +
                std::to_string(ref.protocol));
        }
        if (o.checkpoint_hash != ref.checkpoint_hash) {
            add("checkpoint " + hex(o.checkpoint_hash) + " ('" + o.label + "') vs " +
                hex(ref.checkpoint_hash) + " ('" + ref.label + "')");
        }
        if (o.config_hash != ref.config_hash)
            add("config " + hex(o.config_hash) + " vs " + hex(ref.config_hash));
        if (o.tp != ref.tp || o.ep != ref.ep || o.cp != ref.cp || o.world != ref.world ||
            o.ep_on_cp != ref.ep_on_cp) {
            add("layout " + layout_text(o) + " vs " + layout_text(ref));
        }
        if (!diff.empty()) problems += "\n  rank " + std::to_string(r) + " differs from rank 0: " + diff;
    }
    if (ref.world != world.size()) {
        problems += "\n  the layout is for " + std::to_string(ref.world) + " ranks, the job has " +
                    std::to_string(world.size());
    }
    if (!problems.empty()) {
        return core::failed_precondition("start-up handshake refused the job (every rank must run the same "
                                         "checkpoint, config and layout):" +
                                         problems);
    }
    return {};
}

} // namespace deepinfer::parallel
