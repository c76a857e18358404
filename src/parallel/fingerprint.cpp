#include "parallel/fingerprint.h"

#include "parallel/step_message.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <system_error>
#include <vector>

namespace deepinfer::parallel {
namespace {

namespace fs = std::filesystem;

constexpr std::uint64_t kMaxHeaderBytes = 256ull << 20; // a safetensors header this large is corrupt

std::uint64_t mix(std::uint64_t h, std::span<const std::byte> bytes) {
    return fnv1a64(bytes, h);
}

std::uint64_t mix_u64(std::uint64_t h, std::uint64_t v) {
    std::byte b[8];
    for (int i = 0; i < 8; ++i) b[i] = static_cast<std::byte>((v >> (8 * i)) & 0xff);
    return mix(h, b);
}

core::Result<std::vector<std::byte>> read_prefix(const fs::path& p, std::uint64_t offset, std::uint64_t n) {
    std::ifstream in(p, std::ios::binary);
    if (!in) return core::io_error("fingerprint: cannot open '" + p.string() + "'");
    std::vector<std::byte> buf(n);
    in.seekg(static_cast<std::streamoff>(offset));
    in.read(reinterpret_cast<char*>(buf.data()), static_cast<std::streamsize>(n));
    if (static_cast<std::uint64_t>(in.gcount()) != n) {
        return core::data_loss("fingerprint: '" + p.string() + "' is shorter than " +
                               std::to_string(offset + n) + " bytes");
    }
    return buf;
}

} // namespace

core::Result<std::uint64_t> fingerprint_checkpoint_dir(const std::string& dir) {
    std::error_code ec;
    if (!fs::is_directory(dir, ec)) return core::not_found("fingerprint: '" + dir + "' is not a directory");
    std::vector<fs::path> files;
    for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
        if (it->is_regular_file(ec)) files.push_back(it->path());
    }
    if (ec) return core::io_error("fingerprint: listing '" + dir + "': " + ec.message());
    std::sort(files.begin(), files.end(), [](const fs::path& a, const fs::path& b) {
        return a.filename().string() < b.filename().string();
    });
    std::uint64_t h = 0xcbf29ce484222325ull;
    for (const fs::path& p : files) {
        const std::string name = p.filename().string();
        const std::uint64_t size = fs::file_size(p, ec);
        if (ec) return core::io_error("fingerprint: size of '" + p.string() + "': " + ec.message());
        h = mix(h, std::as_bytes(std::span<const char>(name.data(), name.size())));
        h = mix_u64(h, size);
        const std::string ext = p.extension().string();
        if (ext == ".json") {
            DI_ASSIGN_OR_RETURN(auto content, read_prefix(p, 0, size));
            h = mix(h, content);
        } else if (ext == ".safetensors") {
            DI_ASSIGN_OR_RETURN(auto len_bytes, read_prefix(p, 0, 8));
            std::uint64_t len = 0;
            for (int i = 0; i < 8; ++i) len |= static_cast<std::uint64_t>(len_bytes[i]) << (8 * i);
            if (len > kMaxHeaderBytes || len + 8 > size) {
                return core::data_loss("fingerprint: '" + p.string() + "' declares a " + std::to_string(len) +
                                       "-byte header in a " + std::to_string(size) + "-byte file");
            }
            DI_ASSIGN_OR_RETURN(auto header, read_prefix(p, 8, len));
            h = mix(h, header);
        }
    }
    return h;
}

} // namespace deepinfer::parallel
