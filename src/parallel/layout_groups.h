#pragma once
// The communicators of a layout: one split of the world per group kind (ParallelLayout::Group).

#include "parallel/communicator.h"
#include "parallel/parallel_layout.h"

#include <memory>

namespace deepinfer::parallel {

struct LayoutGroups {
    std::unique_ptr<Communicator> tp;  // heads / shared expert / vocabulary all-reduces and gathers
    std::unique_ptr<Communicator> ep;  // all-to-all dispatch of routed tokens
    std::unique_ptr<Communicator> cp;  // KV-block split: the LSE merge of partial attention
    std::unique_ptr<Communicator> moe; // the MoE partial-output all-reduce
};

// Every rank of `world` must call it (four collective splits). InvalidArgument when the layout is for
// another world size.
Result<LayoutGroups> make_layout_groups(Communicator& world, const ParallelLayout& layout);

} // namespace deepinfer::parallel
