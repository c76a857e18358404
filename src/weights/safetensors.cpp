#include "weights/safetensors.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>

namespace deepinfer::weights {
namespace {

using nlohmann::json;

// Deepest nesting a valid header has is 3 ({"t": {"shape": [..]}}); anything far deeper is rejected
// before the JSON parser sees it.
constexpr int kMaxJsonDepth = 32;

core::Status loss(const std::string& file, const std::string& what) {
    return core::data_loss(file + ": " + what);
}

// Nesting depth of a JSON text, ignoring brackets inside strings. Only a guard: the parser validates.
int json_depth(const char* s, size_t n) {
    int depth = 0, max_depth = 0;
    bool in_string = false;
    for (size_t i = 0; i < n; ++i) {
        char c = s[i];
        if (in_string) {
            if (c == '\\')
                ++i;
            else if (c == '"')
                in_string = false;
        } else if (c == '"') {
            in_string = true;
        } else if (c == '{' || c == '[') {
            max_depth = std::max(max_depth, ++depth);
        } else if (c == '}' || c == ']') {
            --depth;
        }
    }
    return max_depth;
}

core::Result<HeaderEntry> parse_entry(const std::string& file, const std::string& name, const json& v,
                                      uint64_t data_size) {
    const std::string where = "tensor '" + name + "'";
    if (!v.is_object()) return loss(file, where + ": entry is not an object");
    auto dtype_it = v.find("dtype");
    if (dtype_it == v.end()) return loss(file, where + ": missing field 'dtype'");
    if (!dtype_it->is_string()) return loss(file, where + ": field 'dtype' is not a string");
    auto shape_it = v.find("shape");
    if (shape_it == v.end()) return loss(file, where + ": missing field 'shape'");
    if (!shape_it->is_array()) return loss(file, where + ": field 'shape' is not an array");
    auto off_it = v.find("data_offsets");
    if (off_it == v.end()) return loss(file, where + ": missing field 'data_offsets'");
    if (!off_it->is_array() || off_it->size() != 2)
        return loss(file, where + ": field 'data_offsets' is not an array of two integers");

    HeaderEntry e;
    e.name = name;
    const std::string dtype_str = dtype_it->get<std::string>();
    auto dtype = core::dtype_from_safetensors(dtype_str);
    if (!dtype) return core::unimplemented(file + ": " + where + ": unknown dtype '" + dtype_str + "'");
    e.dtype = *dtype;

    if (shape_it->size() > static_cast<size_t>(core::Shape::kMaxDims))
        return loss(file, where + ": field 'shape' has " + std::to_string(shape_it->size()) + " dims (max " +
                              std::to_string(core::Shape::kMaxDims) + ")");
    std::vector<int64_t> dims;
    uint64_t numel = 1;
    bool overflow = false;
    for (const json& d : *shape_it) {
        if (d.is_number_integer() && !d.is_number_unsigned())
            return loss(file, where + ": field 'shape' has a negative dim " + d.dump());
        if (!d.is_number_unsigned())
            return loss(file, where + ": field 'shape' has a non-integer dim " + d.dump());
        uint64_t u = d.get<uint64_t>();
        if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
            return loss(file, where + ": field 'shape' dim " + d.dump() + " is too large");
        dims.push_back(static_cast<int64_t>(u));
        overflow = overflow || __builtin_mul_overflow(numel, u, &numel);
    }
    uint64_t nbytes = 0;
    overflow = overflow || __builtin_mul_overflow(numel, core::dtype_size(e.dtype), &nbytes);
    // A zero dim makes the product 0 whatever overflowed before it.
    for (int64_t d : dims)
        if (d == 0) overflow = false, nbytes = 0;
    if (overflow || nbytes > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
        return loss(file, where + ": shape x dtype size overflows");
    e.shape = core::Shape(dims);

    const json& b = (*off_it)[0];
    const json& en = (*off_it)[1];
    if (!b.is_number_unsigned() || !en.is_number_unsigned())
        return loss(file, where + ": field 'data_offsets' must hold two non-negative integers");
    e.begin = b.get<uint64_t>();
    e.end = en.get<uint64_t>();
    const std::string range = "[" + std::to_string(e.begin) + ", " + std::to_string(e.end) + ")";
    if (e.end < e.begin) return loss(file, where + ": data_offsets " + range + " end before begin");
    if (e.end > data_size)
        return loss(file, where + ": data_offsets " + range + " beyond the data area (" +
                              std::to_string(data_size) + " bytes)");
    if (e.end - e.begin != nbytes)
        return loss(file, where + ": data_offsets " + range + " hold " + std::to_string(e.end - e.begin) +
                              " bytes but shape " + e.shape.to_string() + " x " +
                              std::string(core::dtype_name(e.dtype)) + " needs " + std::to_string(nbytes));
    return e;
}

} // namespace

core::Result<SafetensorsHeader> parse_header(const uint8_t* bytes, size_t size, const std::string& file) {
    if (size < 8) return loss(file, "truncated: " + std::to_string(size) + " bytes, no header length");
    uint64_t n = 0;
    for (int i = 7; i >= 0; --i) n = (n << 8) | bytes[i];
    if (n > size - 8)
        return loss(file, "header length " + std::to_string(n) + " beyond the file (" + std::to_string(size) +
                              " bytes)");
    if (n > kMaxSafetensorsHeaderBytes)
        return loss(file, "header length " + std::to_string(n) + " too large");
    if (n < 2) return loss(file, "header of " + std::to_string(n) + " bytes is not a JSON object");

    const char* text = reinterpret_cast<const char*>(bytes + 8);
    if (json_depth(text, n) > kMaxJsonDepth) return loss(file, "header JSON nested too deeply");

    // Duplicate top-level keys would silently overwrite each other in the DOM: catch them while parsing.
    std::set<std::string> seen;
    std::string duplicate;
    auto on_event = [&](int depth, json::parse_event_t event, json& parsed) {
        if (event == json::parse_event_t::key && depth == 1 && duplicate.empty()) {
            const auto& key = parsed.get_ref<const std::string&>();
            if (!seen.insert(key).second) duplicate = key;
        }
        return true;
    };
    json root;
    try {
        root = json::parse(text, text + n, on_event);
    } catch (const json::exception& e) {
        return loss(file, std::string("header is not valid JSON: ") + e.what());
    }
    if (!duplicate.empty()) return loss(file, "tensor '" + duplicate + "' appears twice in the header");
    if (!root.is_object()) return loss(file, "header is not a JSON object");

    SafetensorsHeader h;
    h.data_offset = 8 + n;
    h.data_size = size - h.data_offset;
    for (auto it = root.begin(); it != root.end(); ++it) {
        if (it.key() == "__metadata__") {
            if (!it->is_object()) return loss(file, "field '__metadata__' is not an object");
            for (auto m = it->begin(); m != it->end(); ++m) {
                if (!m->is_string())
                    return loss(file, "field '__metadata__." + m.key() + "' is not a string");
                h.metadata[m.key()] = m->get<std::string>();
            }
            continue;
        }
        auto entry = parse_entry(file, it.key(), *it, h.data_size);
        if (!entry.ok()) return entry.status();
        h.tensors.push_back(std::move(entry).value());
    }
    return h;
}

core::Result<std::unique_ptr<SafetensorsFile>> SafetensorsFile::open(const std::string& path,
                                                                     const std::string& display_name) {
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        int err = errno;
        std::string msg = display_name + ": cannot open " + path + ": " + std::strerror(err);
        return err == ENOENT ? core::not_found(msg) : core::io_error(msg);
    }
    struct stat st {};
    if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        ::close(fd);
        return core::io_error(display_name + ": not a regular file: " + path);
    }
    auto file = std::unique_ptr<SafetensorsFile>(new SafetensorsFile());
    file->name_ = display_name;
    file->size_ = static_cast<size_t>(st.st_size);
    if (file->size_ < 8) {
        ::close(fd);
        return loss(display_name, "truncated: " + std::to_string(file->size_) + " bytes, no header length");
    }
    void* p = ::mmap(nullptr, file->size_, PROT_READ, MAP_PRIVATE, fd, 0);
    int err = errno;
    if (p == MAP_FAILED) {
        ::close(fd);
        return core::io_error(display_name + ": mmap failed: " + std::strerror(err));
    }
    file->fd_ = fd;
    file->base_ = static_cast<const uint8_t*>(p);
    auto header = parse_header(file->base_, file->size_, display_name);
    if (!header.ok()) return header.status(); // the destructor unmaps
    file->header_ = std::move(header).value();
    return file;
}

SafetensorsFile::~SafetensorsFile() {
    if (base_) ::munmap(const_cast<uint8_t*>(base_), size_);
    if (fd_ >= 0) ::close(fd_);
}

void SafetensorsFile::release(const void* p, size_t n) const {
    const long page = ::sysconf(_SC_PAGESIZE);
    const auto lo = reinterpret_cast<uintptr_t>(p), hi = lo + n;
    const uintptr_t a = (lo + page - 1) / page * page, b = hi / page * page;
    if (b > a) ::madvise(reinterpret_cast<void*>(a), b - a, MADV_DONTNEED);
    // Then the page cache's copy (pages another process maps stay).
    const uint64_t off = static_cast<uint64_t>(static_cast<const uint8_t*>(p) - base_);
    ::posix_fadvise(fd_, static_cast<off_t>(off), static_cast<off_t>(n), POSIX_FADV_DONTNEED);
}

} // namespace deepinfer::weights
