#include "parallel/parallel_layout.h"

#include "core/check.h"

#include <charconv>

namespace deepinfer::parallel {

ParallelLayout::Coords ParallelLayout::coords(int rank) const {
    DI_CHECK(rank >= 0 && rank < world) << "rank " << rank << " world " << world;
    Coords c;
    c.tp = rank % tp;
    if (ep_on_cp) {
        c.cp = c.ep = rank / tp;
    } else {
        c.ep = (rank / tp) % ep;
        c.cp = rank / (tp * ep);
    }
    return c;
}

int ParallelLayout::rank_of(Coords c) const {
    if (ep_on_cp) return c.cp * tp + c.tp;
    return (c.cp * ep + c.ep) * tp + c.tp;
}

int ParallelLayout::color(Group g, int rank) const {
    const Coords c = coords(rank);
    switch (g) {
    case Group::kTp:
        return ep_on_cp ? c.cp : c.cp * ep + c.ep;
    case Group::kEp:
        return ep_on_cp ? c.tp : c.cp * tp + c.tp;
    case Group::kCp:
        return ep_on_cp ? c.tp : c.ep * tp + c.tp;
    case Group::kMoe:
        return ep_on_cp ? 0 : c.cp;
    }
    return 0;
}

int ParallelLayout::key(Group g, int rank) const {
    const Coords c = coords(rank);
    switch (g) {
    case Group::kTp:
        return c.tp;
    case Group::kEp:
        return c.ep;
    case Group::kCp:
        return c.cp;
    case Group::kMoe:
        return rank;
    }
    return 0;
}

std::string ParallelLayout::to_string() const {
    std::string s = "tp=" + std::to_string(tp) + " ep=" + std::to_string(ep) + " cp=" + std::to_string(cp) +
                    " (world " + std::to_string(world) + ")";
    if (ep_on_cp) s += ", ep on the cp ranks";
    return s;
}

core::Result<ParallelLayout> make_parallel_layout(int tp, int ep, int cp, int world) {
    const std::string sizes =
        "tp=" + std::to_string(tp) + " ep=" + std::to_string(ep) + " cp=" + std::to_string(cp);
    if (world < 1)
        return core::invalid_argument("parallel layout: world size " + std::to_string(world) + " < 1");
    if (tp < 1 || ep < 1 || cp < 1) {
        return core::invalid_argument("parallel layout " + sizes + ": every size must be >= 1");
    }
    ParallelLayout l{tp, ep, cp, world, false};
    const long long product = static_cast<long long>(tp) * ep * cp;
    if (product == world) return l;
    if (ep == cp && ep > 1 && static_cast<long long>(tp) * cp == world) {
        l.ep_on_cp = true;
        return l;
    }
    return core::invalid_argument("parallel layout " + sizes + " does not fit " + std::to_string(world) +
                                  " ranks: need tp*ep*cp == ranks (here " + std::to_string(product) +
                                  "), or ep == cp with tp*cp == ranks (experts spread over the cp ranks)");
}

core::Result<ParallelLayout> parse_parallel_layout(std::span<const LayoutFlag> flags, int world) {
    struct Slot {
        const char* short_name;
        const char* long_name;
        int value = 1;
        std::string_view given_as = {}; // first flag that set it
    };
    Slot slots[3] = {
        {"tp", "tensor-parallel-size"}, {"ep", "expert-parallel-size"}, {"cp", "context-parallel-size"}};
    for (const LayoutFlag& f : flags) {
        std::string_view name = f.name;
        while (!name.empty() && name.front() == '-') name.remove_prefix(1);
        Slot* slot = nullptr;
        for (Slot& s : slots) {
            if (name == s.short_name || name == s.long_name) slot = &s;
        }
        if (slot == nullptr) {
            return core::invalid_argument("parallel layout: unknown flag '--" + std::string(name) +
                                          "' (expected --tp, --ep, --cp, --tensor-parallel-size, "
                                          "--expert-parallel-size, --context-parallel-size)");
        }
        int v = 0;
        const char* b = f.value.data();
        const char* e = b + f.value.size();
        auto [ptr, ec] = std::from_chars(b, e, v);
        if (f.value.empty() || ec != std::errc() || ptr != e || v < 1) {
            return core::invalid_argument("parallel layout: flag '--" + std::string(name) +
                                          "' needs an integer >= 1, got '" + std::string(f.value) + "'");
        }
        if (!slot->given_as.empty() && slot->value != v) {
            return core::invalid_argument("parallel layout: '--" + std::string(slot->given_as) + " " +
                                          std::to_string(slot->value) + "' and '--" + std::string(name) +
                                          " " + std::to_string(v) + "' disagree");
        }
        slot->value = v;
        slot->given_as = name;
    }
    return make_parallel_layout(slots[0].value, slots[1].value, slots[2].value, world);
}

} // namespace deepinfer::parallel
