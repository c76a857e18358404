#pragma once
// Start-up handshake: every rank must run the same checkpoint, config, layout and protocol, or the job is
// refused before the first step (a rank with another checkpoint would otherwise produce wrong tokens, and
// one with another layout would enter different collectives and hang the group).
//
// Every rank contributes a fixed-size record (all-gather, so every rank reaches the same verdict and all
// refuse together); records are compared with rank 0's. The error names each differing rank and field.

#include "parallel/communicator.h"
#include "parallel/parallel_layout.h"

#include <cstdint>
#include <string>

namespace deepinfer::parallel {

struct RankIdentity {
    std::uint64_t checkpoint_hash = 0; // fingerprint_checkpoint_dir(model dir)
    std::uint64_t config_hash = 0;     // the parsed model/engine config that changes numerics or shapes
    std::string checkpoint_label;      // shown in messages (model directory); first 95 bytes are sent
    ParallelLayout layout;
    std::uint16_t step_protocol_version = 0; // set by handshake() from kStepMessageVersion
};

// FailedPrecondition naming the differing rank(s) and fields; Unavailable if a rank does not answer.
Status handshake(Communicator& world, const RankIdentity& mine);

} // namespace deepinfer::parallel
