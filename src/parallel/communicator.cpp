#include "parallel/communicator.h"

#include <cstring>
#include <string>

namespace deepinfer::parallel {
namespace {

std::string where(const Communicator& c) {
    return "group '" + c.name() + "' (rank " + std::to_string(c.rank()) + " of " + std::to_string(c.size()) +
           ")";
}

std::span<const std::byte> bytes_of(std::span<const float> v) {
    return std::as_bytes(v);
}

} // namespace

Status Communicator::all_gather_f32(std::span<const float> send, std::span<float> recv) {
    return all_gather(bytes_of(send), std::as_writable_bytes(recv));
}

Status Communicator::all_gather_i64(std::span<const std::int64_t> send, std::span<std::int64_t> recv) {
    return all_gather(std::as_bytes(send), std::as_writable_bytes(recv));
}

Status Communicator::broadcast_f32(std::span<float> data, int root) {
    return broadcast(std::as_writable_bytes(data), root);
}

Status Communicator::broadcast_bytes(std::vector<std::byte>& data, int root) {
    DI_RETURN_IF_ERROR(check_root(*this, "broadcast_bytes", root));
    std::uint64_t n = data.size();
    DI_RETURN_IF_ERROR(broadcast(std::as_writable_bytes(std::span<std::uint64_t>(&n, 1)), root));
    if (rank() != root) data.resize(n);
    return broadcast(std::span<std::byte>(data), root);
}

Status Communicator::all_to_all_v_f32(std::span<const float> send, std::span<const std::size_t> send_counts,
                                      std::span<float> recv, std::span<const std::size_t> recv_counts) {
    std::vector<std::size_t> sb(send_counts.begin(), send_counts.end());
    std::vector<std::size_t> rb(recv_counts.begin(), recv_counts.end());
    for (auto& c : sb) c *= sizeof(float);
    for (auto& c : rb) c *= sizeof(float);
    return all_to_all_v(bytes_of(send), sb, std::as_writable_bytes(recv), rb);
}

void sum_in_rank_order(std::span<const std::span<const float>> parts, std::span<float> out) {
    if (parts.empty() || out.empty()) return;
    std::memcpy(out.data(), parts[0].data(), out.size() * sizeof(float));
    for (std::size_t r = 1; r < parts.size(); ++r) {
        const float* p = parts[r].data();
        for (std::size_t i = 0; i < out.size(); ++i) out[i] += p[i];
    }
}

Status check_all_gather_sizes(const Communicator& c, std::size_t send_bytes, std::size_t recv_bytes) {
    if (recv_bytes != send_bytes * static_cast<std::size_t>(c.size())) {
        return core::invalid_argument("all_gather on " + where(c) + ": recv holds " +
                                      std::to_string(recv_bytes) + " bytes, expected size * send = " +
                                      std::to_string(c.size()) + " * " + std::to_string(send_bytes));
    }
    return {};
}

Status check_reduce_scatter_sizes(const Communicator& c, std::size_t send_n, std::size_t recv_n) {
    if (send_n != recv_n * static_cast<std::size_t>(c.size())) {
        return core::invalid_argument(
            "reduce_scatter_sum on " + where(c) + ": send holds " + std::to_string(send_n) +
            " floats, expected size * recv = " + std::to_string(c.size()) + " * " + std::to_string(recv_n));
    }
    return {};
}

Status check_root(const Communicator& c, std::string_view op, int root) {
    if (root < 0 || root >= c.size()) {
        return core::invalid_argument(std::string(op) + " on " + where(c) + ": root " + std::to_string(root) +
                                      " is not a rank of the group");
    }
    return {};
}

Status check_all_to_all_sizes(const Communicator& c, std::size_t send_bytes,
                              std::span<const std::size_t> send_counts, std::size_t recv_bytes,
                              std::span<const std::size_t> recv_counts) {
    const auto n = static_cast<std::size_t>(c.size());
    if (send_counts.size() != n || recv_counts.size() != n) {
        return core::invalid_argument("all_to_all_v on " + where(c) + ": " +
                                      std::to_string(send_counts.size()) + " send counts and " +
                                      std::to_string(recv_counts.size()) +
                                      " recv counts, expected one per rank (" + std::to_string(n) + ")");
    }
    std::size_t s = 0, r = 0;
    for (std::size_t p = 0; p < n; ++p) s += send_counts[p], r += recv_counts[p];
    if (s != send_bytes || r != recv_bytes) {
        return core::invalid_argument("all_to_all_v on " + where(c) + ": counts sum to " + std::to_string(s) +
                                      " sent / " + std::to_string(r) + " received, buffers hold " +
                                      std::to_string(send_bytes) + " / " + std::to_string(recv_bytes));
    }
    return {};
}

} // namespace deepinfer::parallel
