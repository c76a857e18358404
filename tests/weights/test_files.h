#pragma once
// Writes small safetensors files and checkpoint directories for the weights tests. The header JSON is
// built by hand here (not by the code under test) so that tests can also write lying headers.

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <unistd.h>

namespace deepinfer::weights::testing {

struct StTensor {
    std::string name;
    std::string dtype; // safetensors spelling
    std::vector<int64_t> shape;
    std::string bytes; // raw little-endian data
};

template <typename T> std::string to_bytes(const std::vector<T>& v) {
    std::string s(v.size() * sizeof(T), '\0');
    if (!v.empty()) std::memcpy(s.data(), v.data(), s.size());
    return s;
}

inline std::string length_prefix(uint64_t n) {
    std::string s(8, '\0');
    for (int i = 0; i < 8; ++i) s[i] = static_cast<char>((n >> (8 * i)) & 0xff);
    return s;
}

// A file image from a header text and a data area.
inline std::string raw_file(const std::string& header, const std::string& data) {
    return length_prefix(header.size()) + header + data;
}

inline std::string shape_json(const std::vector<int64_t>& shape) {
    std::string s = "[";
    for (size_t i = 0; i < shape.size(); ++i) s += (i ? "," : "") + std::to_string(shape[i]);
    return s + "]";
}

// A well-formed file as the reference writers lay it out: header padded with spaces so the data area
// starts 8-byte aligned, each tensor starting 8-byte aligned, in the given order.
inline std::string make_file(const std::vector<StTensor>& tensors) {
    std::string header = "{\"__metadata__\":{\"format\":\"pt\"}";
    std::string data;
    for (const auto& t : tensors) {
        data.resize((data.size() + 7) / 8 * 8, '\0');
        header += ",\"" + t.name + "\":{\"dtype\":\"" + t.dtype + "\",\"shape\":" + shape_json(t.shape) +
                  ",\"data_offsets\":[" + std::to_string(data.size()) + "," +
                  std::to_string(data.size() + t.bytes.size()) + "]}";
        data += t.bytes;
    }
    header += "}";
    header.resize((8 + header.size() + 7) / 8 * 8 - 8, ' ');
    return raw_file(header, data);
}

inline void write_text(const std::filesystem::path& p, const std::string& s) {
    std::ofstream out(p, std::ios::binary);
    out.write(s.data(), static_cast<std::streamsize>(s.size()));
}

// A fresh directory under the system temp dir, removed with the object.
class TempDir {
public:
    TempDir() {
        std::string tmpl = (std::filesystem::temp_directory_path() / "deepinfer_weights_XXXXXX").string();
        path_ = ::mkdtemp(tmpl.data());
    }
    ~TempDir() {
        std::error_code ec;
        std::filesystem::remove_all(path_, ec);
    }
    const std::filesystem::path& path() const { return path_; }
    std::string str() const { return path_.string(); }

private:
    std::filesystem::path path_;
};

} // namespace deepinfer::weights::testing
