#include "engine/step_budget.h"

namespace deepinfer::engine {

std::vector<Sequence*> packing_order(const std::vector<Sequence*>& running) {
    std::vector<Sequence*> order;
    order.reserve(running.size());
    for (Sequence* s : running)
        if (s->is_decode()) order.push_back(s);
    for (Sequence* s : running)
        if (!s->is_decode()) order.push_back(s);
    return order;
}

} // namespace deepinfer::engine
