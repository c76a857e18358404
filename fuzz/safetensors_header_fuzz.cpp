// libFuzzer target over the safetensors header parser: any byte string is a file image; parse_header must
// return ok or a Status, never crash, read out of bounds or overflow. When it accepts, every entry must
// lie inside the data area with nbytes == numel x dtype size (checked here independently).
#include <cstdint>
#include <cstdlib>

#include "weights/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    auto r = deepinfer::weights::parse_header(data, size, "fuzz.safetensors");
    if (!r.ok()) {
        if (r.status().message().find("fuzz.safetensors") == std::string::npos) std::abort();
        return 0;
    }
    const auto& h = r.value();
    if (h.data_offset + h.data_size != size) std::abort();
    uint64_t sum = 0;
    for (const auto& e : h.tensors) {
        if (e.begin > e.end || e.end > h.data_size) std::abort();
        unsigned __int128 n = deepinfer::core::dtype_size(e.dtype);
        for (int i = 0; i < e.shape.ndim(); ++i) n *= static_cast<uint64_t>(e.shape[i]);
        if (n != e.end - e.begin) std::abort();
        // Touch the first and last byte, as a loader would.
        if (e.end > e.begin) sum += data[h.data_offset + e.begin] + data[h.data_offset + e.end - 1];
    }
    return static_cast<int>(sum & 0);
}
