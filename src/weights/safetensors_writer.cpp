#include "weights/safetensors_writer.h"

#include <cstdio>
#include <cstring>
#include <memory>

#include <nlohmann/json.hpp>

#include "core/check.h"

namespace deepinfer::weights {

void SafetensorsWriter::add(const std::string& name, core::DType dtype, const core::Shape& shape,
                            const void* bytes) {
    size_t n = static_cast<size_t>(shape.numel()) * core::dtype_size(dtype);
    Entry e{name, dtype, shape, std::vector<uint8_t>(n)};
    if (n) std::memcpy(e.bytes.data(), bytes, n);
    entries_.push_back(std::move(e));
}

void SafetensorsWriter::add_f32(const std::string& name, const core::Shape& shape,
                                const std::vector<float>& values) {
    DI_CHECK_EQ(static_cast<int64_t>(values.size()), shape.numel());
    add(name, core::DType::kF32, shape, values.data());
}

void SafetensorsWriter::add_i64(const std::string& name, const core::Shape& shape,
                                const std::vector<int64_t>& values) {
    DI_CHECK_EQ(static_cast<int64_t>(values.size()), shape.numel());
    add(name, core::DType::kI64, shape, values.data());
}

void SafetensorsWriter::set_metadata(const std::string& key, const std::string& value) {
    metadata_.emplace_back(key, value);
}

core::Status SafetensorsWriter::write(const std::string& path) const {
    nlohmann::ordered_json header = nlohmann::ordered_json::object();
    if (!metadata_.empty()) {
        nlohmann::ordered_json meta = nlohmann::ordered_json::object();
        for (const auto& [k, v] : metadata_) meta[k] = v;
        header["__metadata__"] = meta;
    }
    uint64_t offset = 0;
    for (const auto& e : entries_) {
        nlohmann::ordered_json t;
        t["dtype"] = std::string(core::dtype_name(e.dtype));
        t["shape"] = e.shape.to_vector();
        t["data_offsets"] = {offset, offset + e.bytes.size()};
        header[e.name] = t;
        offset += e.bytes.size();
    }
    std::string h = header.dump();
    while (h.size() % 8 != 0) h.push_back(' ');
    std::unique_ptr<FILE, int (*)(FILE*)> f(std::fopen(path.c_str(), "wb"), &std::fclose);
    if (!f) return core::io_error(path + ": cannot open for writing");
    uint64_t len = h.size();
    uint8_t len_le[8];
    for (int i = 0; i < 8; ++i) len_le[i] = static_cast<uint8_t>(len >> (8 * i));
    bool ok =
        std::fwrite(len_le, 1, 8, f.get()) == 8 && std::fwrite(h.data(), 1, h.size(), f.get()) == h.size();
    for (const auto& e : entries_) {
        if (!ok) break;
        ok = e.bytes.empty() || std::fwrite(e.bytes.data(), 1, e.bytes.size(), f.get()) == e.bytes.size();
    }
    if (!ok) return core::io_error(path + ": write failed");
    return core::Status();
}

} // namespace deepinfer::weights
