#pragma once
// ParallelLayout: how the ranks of one model split the work (docs/parallelism.md has the pictures).
//
//   tp  tensor parallel: attention heads, grouped output projection, shared expert, vocabulary split.
//   ep  expert parallel: routed experts partitioned across ranks.
//   cp  context parallel: a sequence's KV split across ranks by block; partial attention merged by LSE.
//
// Rules (validate() enforces them; world = number of ranks):
//   - tp, ep, cp >= 1.
//   - Separate axes: tp * ep * cp == world. Rank r has coordinates (cp, ep, tp) in row-major order, tp
//     fastest: tp = r % tp, ep = (r / tp) % ep, cp = r / (tp * ep).
//   - EP on the CP ranks (ep == cp, tp * cp == world, ep > 1): the expert-parallel group is the
//     context-parallel group. After the CP merge every rank of that group holds the same tokens, so the
//     MoE output is one all-reduce instead of all-gather + reduce-scatter. Coordinates: tp = r % tp,
//     cp = ep = r / tp.
// Anything else is InvalidArgument naming the sizes and the world.

#include "core/status.h"

#include <span>
#include <string>
#include <string_view>

namespace deepinfer::parallel {

using core::Result;
using core::Status;

struct ParallelLayout {
    int tp = 1;
    int ep = 1;
    int cp = 1;
    int world = 1;
    bool ep_on_cp = false; // the EP==CP case (set by validate/parse)

    struct Coords {
        int tp = 0;
        int ep = 0;
        int cp = 0;
    };
    Coords coords(int rank) const;
    int rank_of(Coords c) const;

    // Colors and keys for Communicator::split: ranks with equal color form one group, ordered by key.
    //   tp group: same (cp, ep), ordered by tp.   ep group: same (cp, tp), ordered by ep.
    //   cp group: same (ep, tp), ordered by cp.   With ep_on_cp the ep and cp groups are both "same tp".
    //   moe group: the ranks whose MoE partial outputs are summed (one all-reduce): all tp * ep ranks that
    //   share a cp coordinate on separate axes; the whole world when ep is on the cp ranks.
    enum class Group { kTp, kEp, kCp, kMoe };
    int color(Group g, int rank) const;
    int key(Group g, int rank) const;

    // "tp=2 ep=2 cp=1 (world 4)" or "... ep on cp".
    std::string to_string() const;
};

// Validates sizes against the world and sets ep_on_cp. InvalidArgument on anything the rules above forbid.
core::Result<ParallelLayout> make_parallel_layout(int tp, int ep, int cp, int world);

// One flag as the CLI received it: the name with or without leading dashes, and its value text.
struct LayoutFlag {
    std::string_view name;
    std::string_view value;
};

// Parses --tp/--ep/--cp and the vLLM/SGLang spellings --tensor-parallel-size, --expert-parallel-size,
// --context-parallel-size (a short and a long name for the same size must agree), then validates.
// Unknown names, non-integers and values < 1 are InvalidArgument naming the flag.
core::Result<ParallelLayout> parse_parallel_layout(std::span<const LayoutFlag> flags, int world);

} // namespace deepinfer::parallel
