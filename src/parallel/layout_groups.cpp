#include "parallel/layout_groups.h"

#include <string>

namespace deepinfer::parallel {

Result<LayoutGroups> make_layout_groups(Communicator& world, const ParallelLayout& layout) {
    if (layout.world != world.size()) {
        return core::invalid_argument("layout groups: layout " + layout.to_string() + " on a group of " +
                                      std::to_string(world.size()) + " ranks");
    }
    using G = ParallelLayout::Group;
    const int r = world.rank();
    LayoutGroups g;
    DI_ASSIGN_OR_RETURN(g.tp, world.split(layout.color(G::kTp, r), layout.key(G::kTp, r)));
    DI_ASSIGN_OR_RETURN(g.ep, world.split(layout.color(G::kEp, r), layout.key(G::kEp, r)));
    DI_ASSIGN_OR_RETURN(g.cp, world.split(layout.color(G::kCp, r), layout.key(G::kCp, r)));
    DI_ASSIGN_OR_RETURN(g.moe, world.split(layout.color(G::kMoe, r), layout.key(G::kMoe, r)));
    return g;
}

} // namespace deepinfer::parallel
