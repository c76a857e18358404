#include "weights/checkpoint.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "core/check.h"
#include "core/logging.h"
#include "weights/quantize.h"
#include "weights/safetensors.h"

namespace deepinfer::weights {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr const char* kSingleFile = "model.safetensors";
constexpr const char* kIndexFile = "model.safetensors.index.json";

// weight_map of the index: tensor name -> shard file name.
core::Result<std::map<std::string, std::string>> read_index(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) return core::io_error(std::string(kIndexFile) + ": cannot read " + path);
    std::stringstream ss;
    ss << in.rdbuf();
    json root;
    try {
        root = json::parse(ss.str());
    } catch (const json::exception& e) {
        return core::data_loss(std::string(kIndexFile) + ": not valid JSON: " + e.what());
    }
    if (!root.is_object()) return core::data_loss(std::string(kIndexFile) + ": not a JSON object");
    auto wm = root.find("weight_map");
    if (wm == root.end()) return core::data_loss(std::string(kIndexFile) + ": missing field 'weight_map'");
    if (!wm->is_object())
        return core::data_loss(std::string(kIndexFile) + ": field 'weight_map' is not an object");
    std::map<std::string, std::string> out;
    for (auto it = wm->begin(); it != wm->end(); ++it) {
        if (!it->is_string())
            return core::data_loss(std::string(kIndexFile) + ": weight_map entry for tensor '" + it.key() +
                                   "' is not a file name");
        std::string shard = it->get<std::string>();
        // Shards live in the checkpoint directory: no path components.
        if (shard.empty() || shard.find('/') != std::string::npos || shard == "." || shard == "..")
            return core::data_loss(std::string(kIndexFile) + ": tensor '" + it.key() +
                                   "' maps to bad shard name '" + shard + "'");
        out[it.key()] = shard;
    }
    return out;
}

core::Status shape_error(const TensorInfo& t, const std::string& what, const core::Shape& want) {
    return core::invalid_argument(t.file + ": tensor '" + t.name + "': " + what + " " + t.shape.to_string() +
                                  ", expected " + want.to_string());
}

} // namespace

Checkpoint::~Checkpoint() = default;

core::Result<std::unique_ptr<Checkpoint>> Checkpoint::open(const std::string& dir, Placement placement) {
    auto ck = std::unique_ptr<Checkpoint>(new Checkpoint());
    ck->dir_ = dir;
    ck->placement_ = placement;
    const fs::path root(dir);
    std::error_code ec;
    if (!fs::is_directory(root, ec)) return core::not_found(dir + ": not a checkpoint directory");

    std::map<std::string, std::string> weight_map; // empty for a single file
    std::vector<std::string> shard_names;
    if (fs::exists(root / kIndexFile, ec)) {
        DI_ASSIGN_OR_RETURN(weight_map, read_index((root / kIndexFile).string()));
        for (const auto& [name, shard] : weight_map) shard_names.push_back(shard);
        std::sort(shard_names.begin(), shard_names.end());
        shard_names.erase(std::unique(shard_names.begin(), shard_names.end()), shard_names.end());
    } else if (fs::exists(root / kSingleFile, ec)) {
        shard_names.push_back(kSingleFile);
    } else {
        return core::not_found(dir + ": neither " + kSingleFile + " nor " + kIndexFile + " found");
    }

    std::map<std::string, const TensorInfo*> by_name;
    for (const std::string& shard : shard_names) {
        const fs::path path = root / shard;
        if (!fs::exists(path, ec))
            return core::not_found(std::string(kIndexFile) + ": shard '" + shard + "' not found in " + dir);
        DI_ASSIGN_OR_RETURN(auto file, SafetensorsFile::open(path.string(), shard));
        for (const HeaderEntry& e : file->header().tensors) {
            // Kernels read elements in place: a tensor must start on a multiple of its element size
            // (the reference writers pad the header so that it does; the format itself does not demand it).
            if ((file->header().data_offset + e.begin) % core::dtype_size(e.dtype) != 0)
                return core::unimplemented(shard + ": tensor '" + e.name + "' starts at byte " +
                                           std::to_string(file->header().data_offset + e.begin) +
                                           ", not aligned to its " + std::string(core::dtype_name(e.dtype)) +
                                           " elements");
            ck->tensors_.push_back(TensorInfo{e.name, e.dtype, e.shape, shard, file->data(e),
                                              static_cast<size_t>(e.end - e.begin), file->file_offset(e)});
        }
        ck->files_.push_back(std::move(file));
    }
    std::sort(ck->tensors_.begin(), ck->tensors_.end(),
              [](const TensorInfo& a, const TensorInfo& b) { return a.name < b.name; });
    for (size_t i = 1; i < ck->tensors_.size(); ++i) {
        const TensorInfo& a = ck->tensors_[i - 1];
        const TensorInfo& b = ck->tensors_[i];
        if (a.name == b.name)
            return core::data_loss("tensor '" + a.name + "' is in two shards: " + a.file + " and " + b.file);
    }
    for (const auto& [name, shard] : weight_map) {
        const TensorInfo* t = ck->find(name);
        if (t == nullptr)
            return core::data_loss(std::string(kIndexFile) + ": tensor '" + name + "' listed in shard '" +
                                   shard + "' is not in it");
        if (t->file != shard)
            return core::data_loss(std::string(kIndexFile) + ": tensor '" + name + "' listed in shard '" +
                                   shard + "' is in '" + t->file + "'");
    }
    return ck;
}

const TensorInfo* Checkpoint::find(std::string_view name) const {
    auto it = std::lower_bound(tensors_.begin(), tensors_.end(), name,
                               [](const TensorInfo& t, std::string_view n) { return t.name < n; });
    return (it != tensors_.end() && it->name == name) ? &*it : nullptr;
}

core::Result<core::TensorView> Checkpoint::tensor(std::string_view name, core::DType dtype,
                                                  const core::Shape& shape) const {
    const TensorInfo* t = find(name);
    if (t == nullptr) return core::not_found(dir_ + ": tensor '" + std::string(name) + "' not found");
    if (t->dtype != dtype)
        return core::invalid_argument(t->file + ": tensor '" + t->name + "': dtype " +
                                      std::string(core::dtype_name(t->dtype)) + ", expected " +
                                      std::string(core::dtype_name(dtype)));
    if (t->shape != shape) return shape_error(*t, "shape", shape);
    return core::TensorView{t->data, t->dtype, t->shape};
}

core::Result<core::Weight> Checkpoint::weight(std::string_view prefix, int64_t rows, int64_t cols,
                                              const QuantizationConfig& q) const {
    DI_ASSIGN_OR_RETURN(core::Weight w, mapped_weight(prefix, rows, cols, q));
    if (placement_ != Placement::kHugePages || prefix == "embed") return w;
    DI_ASSIGN_OR_RETURN(w.data, placed(*find(std::string(prefix) + ".weight")));
    if (w.scale != nullptr) {
        DI_ASSIGN_OR_RETURN(const void* s, placed(*find(std::string(prefix) + ".scale")));
        w.scale = static_cast<const uint8_t*>(s);
    }
    return w;
}

const SafetensorsFile& Checkpoint::file_of(const TensorInfo& t) const {
    for (const auto& f : files_)
        if (f->name() == t.file) return *f;
    DI_CHECK(false) << t.file;
    return *files_.front();
}

core::Result<const void*> Checkpoint::placed(const TensorInfo& t) const {
    std::lock_guard<std::mutex> lock(place_mu_);
    if (auto it = placed_.find(&t); it != placed_.end()) return it->second;
    if (arena_locked() == nullptr) return t.data;
    const SafetensorsFile* file = &file_of(t);
    const int threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    DI_ASSIGN_OR_RETURN(const void* p, arena_->copy_in(file->fd(), t.offset, t.nbytes, threads,
                                                       t.file + ": tensor '" + t.name + "'"));
    file->release(t.data, t.nbytes); // the copy is what the kernels read from now on
    placed_.emplace(&t, p);
    return p;
}

HugePageArena* Checkpoint::arena_locked() const {
    if (arena_refused_) return nullptr;
    if (!arena_) {
        // Address space for every tensor of the checkpoint (only what is copied becomes resident), each
        // copy page-aligned. A weight quantized to FP8 at load is at most as large as its stored form (one
        // byte per element from two or four, plus a scale per block) and is never copied as stored too; with
        // a derived_copy beside it (e.g. int8 panels, about 1 + 1/32 bytes per element) the two may pass the
        // stored form by a few percent, and a stored FP8 weight with panels (derived_bytes) takes about
        // twice its bytes: half as much address space again (reserved, not resident) covers that.
        auto arena = HugePageArena::reserve(mapped_bytes() + mapped_bytes() / 2 + tensors_.size() * 4096);
        if (!arena.ok()) {
            DI_LOG(Warn) << dir_ << ": " << arena.status().message()
                         << "; weights stay mapped from the files";
            arena_refused_ = true;
            return nullptr;
        }
        arena_ = std::move(arena).value();
    }
    return arena_.get();
}

core::Result<core::Weight> Checkpoint::fp8_block_weight(std::string_view prefix, int64_t rows, int64_t cols,
                                                        int br, int bc, const QuantizationConfig& q,
                                                        int64_t row_begin, int64_t row_end) const {
    DI_CHECK(br > 0 && bc > 0);
    {
        std::lock_guard<std::mutex> lock(place_mu_);
        if (auto it = requantized_.find(prefix); it != requantized_.end()) return it->second;
    }
    DI_ASSIGN_OR_RETURN(core::Weight src, mapped_weight(prefix, rows, cols, q));
    if (src.format != core::WeightFormat::kF32 && src.format != core::WeightFormat::kBF16 &&
        src.format != core::WeightFormat::kF16)
        return weight(prefix, rows, cols, q);
    if (row_end < 0) row_end = rows;
    DI_CHECK(0 <= row_begin && row_begin <= row_end && row_end <= rows) << row_begin << " " << row_end;
    core::Weight w;
    w.format = core::WeightFormat::kFp8Block;
    w.rows = rows;
    w.cols = cols;
    w.block_rows = br;
    w.block_cols = bc;
    const size_t q_bytes = static_cast<size_t>(rows * cols);
    const size_t s_bytes = static_cast<size_t>(w.scale_rows() * w.scale_cols());
    uint8_t* codes = nullptr;
    uint8_t* scales = nullptr;
    {
        std::lock_guard<std::mutex> lock(place_mu_);
        if (HugePageArena* arena = arena_locked(); arena != nullptr) {
            codes = arena->allocate(q_bytes);
            scales = codes != nullptr ? arena->allocate(s_bytes) : nullptr;
        }
    }
    if (scales == nullptr) {
        DI_LOG(Warn) << dir_ << ": tensor '" << prefix << ".weight': no memory to hold it as FP8 blocks; "
                     << "it stays in its stored format";
        return weight(prefix, rows, cols, q);
    }
    const TensorInfo& t = *find(std::string(prefix) + ".weight");
    const SafetensorsFile* file = &file_of(t);
    const int64_t row_bytes = static_cast<int64_t>(t.nbytes) / rows;
    const int threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    // Each band's stored pages are released once quantized, so the stored tensor never becomes resident
    // whole beside its FP8 copy (pages straddling two bands go with the final release below).
    quantize_weight_fp8_block(src, br, bc, row_begin, row_end, threads, codes, scales,
                              [&](int64_t r0, int64_t r1) {
                                  file->release(static_cast<const uint8_t*>(t.data) + r0 * row_bytes,
                                                static_cast<size_t>((r1 - r0) * row_bytes));
                              });
    file->release(t.data, t.nbytes);
    w.data = codes;
    w.scale = scales;
    std::lock_guard<std::mutex> lock(place_mu_);
    requantized_.emplace(std::string(prefix), w);
    return w;
}

uint8_t* Checkpoint::derived_copy(std::string_view prefix, std::string_view tag, int64_t rows, int64_t cols,
                                  const QuantizationConfig& q, core::WeightFormat format, size_t bytes,
                                  const DeriveFn& fill) const {
    DI_CHECK(format == core::WeightFormat::kF32 || format == core::WeightFormat::kBF16 ||
             format == core::WeightFormat::kF16);
    auto src = mapped_weight(prefix, rows, cols, q);
    if (!src.ok() || src->format != format) return nullptr;
    return derived_bytes(prefix, tag, bytes, [&](uint8_t* dst) {
        fill(*src, dst);
        const TensorInfo& t = *find(std::string(prefix) + ".weight");
        file_of(t).release(t.data, t.nbytes);
    });
}

uint8_t* Checkpoint::derived_bytes(std::string_view prefix, std::string_view tag, size_t bytes,
                                   const std::function<void(uint8_t* dst)>& fill) const {
    const std::string key = std::string(prefix) + "/" + std::string(tag);
    {
        std::lock_guard<std::mutex> lock(place_mu_);
        if (auto it = derived_.find(key); it != derived_.end()) return it->second;
    }
    uint8_t* dst = nullptr;
    {
        std::lock_guard<std::mutex> lock(place_mu_);
        if (HugePageArena* arena = arena_locked(); arena != nullptr) dst = arena->allocate(bytes);
    }
    if (dst == nullptr) {
        DI_LOG(Warn) << dir_ << ": tensor '" << prefix << ".weight': no memory for its " << tag << " copy";
        return nullptr;
    }
    fill(dst);
    std::lock_guard<std::mutex> lock(place_mu_);
    derived_.emplace(key, dst);
    return dst;
}

size_t Checkpoint::requantized_bytes() const {
    std::lock_guard<std::mutex> lock(place_mu_);
    size_t n = 0;
    for (const auto& [name, w] : requantized_) n += static_cast<size_t>(w.stored_bytes());
    return n;
}

size_t Checkpoint::placed_bytes() const {
    std::lock_guard<std::mutex> lock(place_mu_);
    size_t n = 0;
    for (const auto& [t, p] : placed_) n += t->nbytes;
    return n;
}

int64_t Checkpoint::placed_huge_bytes() const {
    std::lock_guard<std::mutex> lock(place_mu_);
    return arena_ ? arena_->huge_bytes() : 0;
}

core::Result<core::Weight> Checkpoint::mapped_weight(std::string_view prefix, int64_t rows, int64_t cols,
                                                     const QuantizationConfig& q) const {
    const std::string wname = std::string(prefix) + ".weight";
    const std::string sname = std::string(prefix) + ".scale";
    const TensorInfo* t = find(wname);
    if (t == nullptr) return core::not_found(dir_ + ": tensor '" + wname + "' not found");
    core::Weight w;
    w.rows = rows;
    w.cols = cols;
    w.data = t->data;
    const core::Shape full{rows, cols};
    switch (t->dtype) {
    case core::DType::kF32:
    case core::DType::kBF16:
    case core::DType::kF16:
        if (t->shape != full) return shape_error(*t, "shape", full);
        w.format = t->dtype == core::DType::kF32    ? core::WeightFormat::kF32
                   : t->dtype == core::DType::kBF16 ? core::WeightFormat::kBF16
                                                    : core::WeightFormat::kF16;
        return w;
    case core::DType::kF8E4M3: {
        if (t->shape != full) return shape_error(*t, "shape", full);
        if (q.block_rows <= 0 || q.block_cols <= 0)
            return core::invalid_argument(t->file + ": tensor '" + wname +
                                          "': fp8 block size must be positive");
        w.format = core::WeightFormat::kFp8Block;
        w.block_rows = q.block_rows;
        w.block_cols = q.block_cols;
        DI_ASSIGN_OR_RETURN(auto s,
                            tensor(sname, core::DType::kF8E8M0, core::Shape{w.scale_rows(), w.scale_cols()}));
        w.scale = s.as<uint8_t>();
        return w;
    }
    case core::DType::kI8: {
        if (cols % 2 != 0)
            return core::invalid_argument(t->file + ": tensor '" + wname +
                                          "': packed fp4 needs an even column count, got " +
                                          std::to_string(cols));
        if (q.fp4_group <= 0)
            return core::invalid_argument(t->file + ": tensor '" + wname +
                                          "': fp4 group size must be positive");
        const core::Shape packed{rows, cols / 2};
        if (t->shape != packed) return shape_error(*t, "packed fp4 shape", packed);
        w.format = core::WeightFormat::kFp4Group;
        w.block_rows = 1;
        w.block_cols = q.fp4_group;
        DI_ASSIGN_OR_RETURN(auto s, tensor(sname, core::DType::kF8E8M0, core::Shape{rows, w.scale_cols()}));
        w.scale = s.as<uint8_t>();
        return w;
    }
    case core::DType::kF8E8M0:
    case core::DType::kU8:
    case core::DType::kI32:
    case core::DType::kI64:
    case core::DType::kBool:
        break;
    }
    return core::invalid_argument(
        t->file + ": tensor '" + wname + "': dtype " + std::string(core::dtype_name(t->dtype)) +
        " is not a linear weight format (F32, BF16, F16, F8_E4M3 + scale, I8 fp4 + scale)");
}

size_t Checkpoint::mapped_bytes() const {
    size_t total = 0;
    for (const auto& f : files_) total += f->file_size();
    return total;
}

std::vector<float> dequantize(const core::Weight& w) {
    std::vector<float> out(static_cast<size_t>(w.rows * w.cols));
    const int64_t sc = w.scale_cols();
    for (int64_t r = 0; r < w.rows; ++r) {
        float* row = out.data() + r * w.cols;
        switch (w.format) {
        case core::WeightFormat::kF32: {
            const float* src = static_cast<const float*>(w.data) + r * w.cols;
            std::copy(src, src + w.cols, row);
            break;
        }
        case core::WeightFormat::kBF16:
        case core::WeightFormat::kF16: {
            const uint16_t* src = static_cast<const uint16_t*>(w.data) + r * w.cols;
            for (int64_t c = 0; c < w.cols; ++c)
                row[c] = w.format == core::WeightFormat::kBF16 ? core::bf16_to_f32(src[c])
                                                               : core::f16_to_f32(src[c]);
            break;
        }
        case core::WeightFormat::kFp8Block: {
            const uint8_t* src = static_cast<const uint8_t*>(w.data) + r * w.cols;
            const uint8_t* srow = w.scale + (r / w.block_rows) * sc;
            const float* lut = core::fp8_e4m3_table();
            for (int64_t c = 0; c < w.cols; ++c)
                row[c] = lut[src[c]] * core::e8m0_to_f32(srow[c / w.block_cols]);
            break;
        }
        case core::WeightFormat::kFp4Group: {
            const uint8_t* src = static_cast<const uint8_t*>(w.data) + r * (w.cols / 2);
            const uint8_t* srow = w.scale + r * sc;
            const float* lut = core::fp4_e2m1_table();
            for (int64_t c = 0; c < w.cols; ++c) {
                uint8_t byte = src[c / 2];
                uint8_t code = (c & 1) ? (byte >> 4) : (byte & 0xf);
                row[c] = lut[code] * core::e8m0_to_f32(srow[c / w.block_cols]);
            }
            break;
        }
        }
    }
    return out;
}

} // namespace deepinfer::weights
