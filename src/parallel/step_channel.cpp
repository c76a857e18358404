#include "parallel/step_channel.h"

#include "core/check.h"

#include <string>

namespace deepinfer::parallel {

Status StepChannel::publish(StepMessage m) {
    DI_CHECK(is_leader()) << "publish on rank " << comm_.rank() << ", the leader is " << leader_;
    m.step = step_ + 1;
    DI_ASSIGN_OR_RETURN(std::vector<std::byte> bytes, encode_step_message(m));
    DI_RETURN_IF_ERROR(comm_.broadcast_bytes(bytes, leader_)
                           .with_context("step protocol: publishing step " + std::to_string(m.step)));
    step_ = m.step;
    last_publish_ = std::chrono::steady_clock::now();
    return {};
}

Status StepChannel::keep_alive() {
    if (std::chrono::steady_clock::now() - last_publish_ < comm_.deadline() / 3) return {};
    return publish_idle();
}

Status StepChannel::publish_idle() {
    StepMessage m;
    m.kind = StepKind::kIdle;
    return publish(std::move(m));
}

Status StepChannel::publish_shutdown() {
    StepMessage m;
    m.kind = StepKind::kShutdown;
    return publish(std::move(m));
}

Result<StepMessage> StepChannel::receive() {
    DI_CHECK(!is_leader()) << "receive on the leader rank " << leader_;
    std::vector<std::byte> bytes;
    DI_RETURN_IF_ERROR(comm_.broadcast_bytes(bytes, leader_)
                           .with_context("step protocol: waiting for step " + std::to_string(step_ + 1)));
    DI_ASSIGN_OR_RETURN(StepMessage m, decode_step_message(bytes));
    if (m.step != step_ + 1) {
        return core::data_loss("step protocol: rank " + std::to_string(comm_.rank()) + " expected step " +
                               std::to_string(step_ + 1) + ", the leader sent step " +
                               std::to_string(m.step));
    }
    step_ = m.step;
    return m;
}

Status run_follower(StepChannel& channel, const std::function<Status(const StepMessage&)>& forward) {
    for (;;) {
        DI_ASSIGN_OR_RETURN(StepMessage m, channel.receive());
        switch (m.kind) {
        case StepKind::kShutdown:
            return {};
        case StepKind::kIdle:
            break;
        case StepKind::kForward:
        case StepKind::kControl:
            DI_RETURN_IF_ERROR(forward(m).with_context("step " + std::to_string(m.step)));
            break;
        }
    }
}

} // namespace deepinfer::parallel
