// libFuzzer target: tokenizer encode/decode/incremental-decode invariants (fuzz_bodies.h).
#include "fuzz_bodies.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    deepinfer::tokenizer::fuzz::tokenizer_one(data, size);
    return 0;
}
