#pragma once
// Non-owning tensor views (row-major, contiguous) and a small owning F32 buffer for activations.

#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

#include "core/check.h"
#include "core/dtype.h"

namespace deepinfer::core {

// Up to 6 dims, row-major.
class Shape {
public:
    static constexpr int kMaxDims = 6;
    Shape() = default;
    Shape(std::initializer_list<int64_t> dims) {
        DI_CHECK(dims.size() <= kMaxDims);
        for (int64_t d : dims) dims_[ndim_++] = d;
    }
    explicit Shape(const std::vector<int64_t>& dims) {
        DI_CHECK(dims.size() <= kMaxDims);
        for (int64_t d : dims) dims_[ndim_++] = d;
    }
    int ndim() const { return ndim_; }
    int64_t operator[](int i) const {
        DI_CHECK(i >= 0 && i < ndim_) << "dim " << i << " of " << ndim_;
        return dims_[i];
    }
    int64_t numel() const {
        int64_t n = 1;
        for (int i = 0; i < ndim_; ++i) n *= dims_[i];
        return n;
    }
    std::vector<int64_t> to_vector() const { return {dims_, dims_ + ndim_}; }
    bool operator==(const Shape& o) const {
        if (ndim_ != o.ndim_) return false;
        for (int i = 0; i < ndim_; ++i)
            if (dims_[i] != o.dims_[i]) return false;
        return true;
    }
    bool operator!=(const Shape& o) const { return !(*this == o); }
    std::string to_string() const; // "[4, 64]"

private:
    int64_t dims_[kMaxDims] = {};
    int ndim_ = 0;
};

// A view of bytes with a dtype and shape. Packed fp4 tensors are kI8 with the last dim halved, exactly
// as stored.
struct TensorView {
    const void* data = nullptr;
    DType dtype = DType::kF32;
    Shape shape;

    int64_t numel() const { return shape.numel(); }
    size_t nbytes() const { return static_cast<size_t>(numel()) * dtype_size(dtype); }
    template <typename T> const T* as() const { return static_cast<const T*>(data); }
};

} // namespace deepinfer::core
