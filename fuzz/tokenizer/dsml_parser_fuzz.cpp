// libFuzzer target: DSML/reasoning stream parser split-independence invariants (fuzz_bodies.h).
#include "fuzz_bodies.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    deepinfer::tokenizer::fuzz::dsml_one(data, size);
    return 0;
}
