#pragma once
// Fingerprints for the start-up handshake: cheap enough to compute on every rank at start-up (a real
// checkpoint is hundreds of GB, so tensor data is not read), specific enough that two different
// checkpoints or configs do not collide by accident.

#include "core/status.h"

#include <cstdint>
#include <string>

namespace deepinfer::parallel {

// FNV-1a 64 over, for every regular file of `dir` (not recursive) in name order: the name, the size, and
// for `*.json` the whole content, for `*.safetensors` its header (the u64 length and the JSON header, which
// lists every tensor's name, dtype, shape and offsets). Other files count by name and size.
// NotFound / IoError / DataLoss naming the directory or file.
core::Result<std::uint64_t> fingerprint_checkpoint_dir(const std::string& dir);

} // namespace deepinfer::parallel
