#include "core/tensor.h"

namespace deepinfer::core {

std::string Shape::to_string() const {
    std::string s = "[";
    for (int i = 0; i < ndim_; ++i) {
        if (i) s += ", ";
        s += std::to_string(dims_[i]);
    }
    return s + "]";
}

} // namespace deepinfer::core
