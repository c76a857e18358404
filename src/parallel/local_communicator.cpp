#include "parallel/local_communicator.h"

#include <cstring>

namespace deepinfer::parallel {

Status LocalCommunicator::all_reduce_sum(std::span<float> data) {
    return {};
}

Status LocalCommunicator::all_gather(std::span<const std::byte> send, std::span<std::byte> recv) {
    DI_RETURN_IF_ERROR(check_all_gather_sizes(*this, send.size(), recv.size()));
    if (!send.empty() && send.data() != recv.data()) std::memmove(recv.data(), send.data(), send.size());
    return {};
}

Status LocalCommunicator::reduce_scatter_sum(std::span<const float> send, std::span<float> recv) {
    DI_RETURN_IF_ERROR(check_reduce_scatter_sizes(*this, send.size(), recv.size()));
    if (!send.empty() && send.data() != recv.data()) {
        std::memmove(recv.data(), send.data(), send.size() * sizeof(float));
    }
    return {};
}

Status LocalCommunicator::broadcast(std::span<std::byte> data, int root) {
    return check_root(*this, "broadcast", root);
}

Status LocalCommunicator::barrier() {
    return {};
}

Status LocalCommunicator::all_to_all_v(std::span<const std::byte> send,
                                       std::span<const std::size_t> send_counts, std::span<std::byte> recv,
                                       std::span<const std::size_t> recv_counts) {
    DI_RETURN_IF_ERROR(check_all_to_all_sizes(*this, send.size(), send_counts, recv.size(), recv_counts));
    if (send_counts[0] != recv_counts[0]) {
        return core::invalid_argument("all_to_all_v on group '" + name_ + "': rank 0 sends itself " +
                                      std::to_string(send_counts[0]) + " bytes but expects " +
                                      std::to_string(recv_counts[0]));
    }
    if (!send.empty() && send.data() != recv.data()) std::memmove(recv.data(), send.data(), send.size());
    return {};
}

Result<std::unique_ptr<Communicator>> LocalCommunicator::split(int color, int key) {
    if (color < 0) {
        return core::invalid_argument("split of group '" + name_ + "': color " + std::to_string(color) +
                                      " must be >= 0");
    }
    auto child = std::make_unique<LocalCommunicator>(name_ + "/c" + std::to_string(color));
    child->set_deadline(deadline_);
    return std::unique_ptr<Communicator>(std::move(child));
}

} // namespace deepinfer::parallel
