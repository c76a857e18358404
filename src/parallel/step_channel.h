#pragma once
// The step protocol between the leader (rank 0 of the world) and its followers.
//
//   leader:    handshake → for each engine step: publish(step) → run forward → sample
//              while idle: keep_alive() (an idle step every deadline/3);   at exit: publish_shutdown()
//   follower:  handshake → run_follower(channel, forward): receive → run forward → repeat until shutdown
//
// Each publish is two broadcasts from the leader (length, then the encoded StepMessage). Every rank then
// runs the same forward, entering the same collectives in the same order (docs/parallelism.md). The
// follower's receive has the communicator's deadline, so a leader that died or stopped makes it fail
// instead of waiting forever; that is why an idle leader sends keep-alives.

#include "parallel/communicator.h"
#include "parallel/step_message.h"

#include <chrono>
#include <functional>

namespace deepinfer::parallel {

class StepChannel {
public:
    explicit StepChannel(Communicator& comm, int leader = 0) : comm_(comm), leader_(leader) {}

    bool is_leader() const { return comm_.rank() == leader_; }

    // Leader only. Stamps the step counter (the n-th publish carries step n, from 1).
    Status publish(StepMessage m);
    Status publish_idle();
    Status publish_shutdown();
    // For the leader's idle loop: publishes an idle step when nothing was published for a third of the
    // communicator's deadline, so followers waiting in receive() never reach their deadline.
    Status keep_alive();

    // Follower only. Checks the step counter advances by exactly one (a lost or repeated step is DataLoss).
    Result<StepMessage> receive();

    std::uint64_t last_step() const { return step_; }
    std::chrono::milliseconds deadline() const { return comm_.deadline(); }

private:
    Communicator& comm_;
    int leader_;
    std::uint64_t step_ = 0;
    std::chrono::steady_clock::time_point last_publish_ = std::chrono::steady_clock::now();
};

// Runs the follower loop until a shutdown step (returns ok) or an error (returned as is: the caller exits
// non-zero). `forward` is called for kForward and kControl steps (it applies the ops, then runs the
// forward of a kForward step).
Status run_follower(StepChannel& channel, const std::function<Status(const StepMessage&)>& forward);

} // namespace deepinfer::parallel
