#pragma once
// LocalCommunicator: the group of one process. Every collective is a copy (or nothing); it exists so the
// model and engine call the same code whether or not they run sharded, and as the single-process side of
// the bit-for-bit tests.

#include "parallel/communicator.h"

namespace deepinfer::parallel {

class LocalCommunicator final : public Communicator {
public:
    explicit LocalCommunicator(std::string name = "local") : name_(std::move(name)) {}

    int rank() const override { return 0; }
    int size() const override { return 1; }
    const std::string& name() const override { return name_; }
    void set_deadline(std::chrono::milliseconds d) override { deadline_ = d; }
    std::chrono::milliseconds deadline() const override { return deadline_; }

    Status all_reduce_sum(std::span<float> data) override;
    Status all_gather(std::span<const std::byte> send, std::span<std::byte> recv) override;
    Status reduce_scatter_sum(std::span<const float> send, std::span<float> recv) override;
    Status broadcast(std::span<std::byte> data, int root) override;
    Status barrier() override;
    Status all_to_all_v(std::span<const std::byte> send, std::span<const std::size_t> send_counts,
                        std::span<std::byte> recv, std::span<const std::size_t> recv_counts) override;
    Result<std::unique_ptr<Communicator>> split(int color, int key) override;

private:
    std::string name_;
    std::chrono::milliseconds deadline_ = kDefaultCollectiveDeadline;
};

} // namespace deepinfer::parallel
