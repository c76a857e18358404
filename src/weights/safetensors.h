#pragma once
// One safetensors file, mmapped read-only. Layout: u64 little-endian header length N, N bytes of JSON
// header, then the data area. Every header field is validated before any tensor byte is read:
// a malformed or lying file yields a Status naming the file and the tensor/field, never a crash.

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/status.h"
#include "core/tensor.h"

namespace deepinfer::weights {

struct HeaderEntry {
    std::string name;
    core::DType dtype;
    core::Shape shape;
    uint64_t begin = 0; // data_offsets, relative to the start of the data area
    uint64_t end = 0;
};

struct SafetensorsHeader {
    std::vector<HeaderEntry> tensors;            // sorted by name
    std::map<std::string, std::string> metadata; // "__metadata__" (string values only)
    uint64_t data_offset = 0;                    // 8 + header length: where the data area starts
    uint64_t data_size = 0;                      // bytes in the data area
};

// Largest header accepted (the reference implementation's limit).
inline constexpr uint64_t kMaxSafetensorsHeaderBytes = 100ull << 20;

// Parse and validate the header of a whole file image [bytes, bytes + size). file_name is only used in
// messages. Codes: DataLoss for a truncated or malformed file (length prefix, JSON, missing or
// mistyped fields, offsets outside the data area, size != numel x dtype size, duplicate names),
// Unimplemented for a dtype this engine does not know.
core::Result<SafetensorsHeader> parse_header(const uint8_t* bytes, size_t size, const std::string& file_name);

class SafetensorsFile {
public:
    // path: the file to map; display_name: how messages name it (usually the name inside the checkpoint).
    static core::Result<std::unique_ptr<SafetensorsFile>> open(const std::string& path,
                                                               const std::string& display_name);
    ~SafetensorsFile();
    SafetensorsFile(const SafetensorsFile&) = delete;
    SafetensorsFile& operator=(const SafetensorsFile&) = delete;

    const std::string& name() const { return name_; }
    const SafetensorsHeader& header() const { return header_; }
    size_t file_size() const { return size_; }
    // Bytes of entry e (validated by parse_header to lie inside the map).
    const void* data(const HeaderEntry& e) const { return base_ + header_.data_offset + e.begin; }
    // Where entry e starts in the file.
    uint64_t file_offset(const HeaderEntry& e) const { return header_.data_offset + e.begin; }
    // The file, open read-only for the map's lifetime (weights::Placement::kHugePages reads tensors with
    // pread instead of faulting the map in).
    int fd() const { return fd_; }
    // Drops this process's mapping of the pages wholly inside [p, p + n) (a pointer into this file's map),
    // then asks the page cache to drop them (POSIX_FADV_DONTNEED). Hints: the map stays valid and a later
    // read faults the pages in again.
    void release(const void* p, size_t n) const;

private:
    SafetensorsFile() = default;
    std::string name_;
    const uint8_t* base_ = nullptr;
    size_t size_ = 0;
    int fd_ = -1;
    SafetensorsHeader header_;
};

} // namespace deepinfer::weights
