#include "model/deepseek_v4/probes.h"

#include <cstdio>
#include <cstring>
#include <sstream>

namespace deepinfer::model::deepseek_v4 {
namespace {

template <typename T> void append_to(std::vector<T>* dst, const std::vector<T>& src) {
    dst->insert(dst->end(), src.begin(), src.end());
}

struct Entry {
    std::string name;
    std::string dtype;
    std::vector<int64_t> shape;
    std::vector<uint8_t> bytes;
};

Entry f32(const std::string& name, std::vector<int64_t> shape, const std::vector<float>& v) {
    Entry e{name, "F32", std::move(shape), std::vector<uint8_t>(v.size() * 4)};
    if (!v.empty()) std::memcpy(e.bytes.data(), v.data(), v.size() * 4);
    return e;
}

Entry i64(const std::string& name, std::vector<int64_t> shape, const std::vector<int32_t>& v) {
    std::vector<int64_t> w(v.begin(), v.end());
    Entry e{name, "I64", std::move(shape), std::vector<uint8_t>(w.size() * 8)};
    if (!w.empty()) std::memcpy(e.bytes.data(), w.data(), w.size() * 8);
    return e;
}

} // namespace

void ProbeLog::append(const ForwardProbes& p, const std::vector<int32_t>& token_ids) {
    const size_t L = p.hidden.size();
    if (all_.hidden.empty()) {
        all_.hidden.resize(L);
        all_.router.resize(L);
        all_.router_weights.resize(L);
        all_.indexer_topk.resize(L);
    }
    for (size_t l = 0; l < L; ++l) {
        append_to(&all_.hidden[l], p.hidden[l]);
        append_to(&all_.router[l], p.router[l]);
        append_to(&all_.router_weights[l], p.router_weights[l]);
        append_to(&all_.indexer_topk[l], p.indexer_topk[l]);
    }
    append_to(&all_.final_hidden, p.final_hidden);
    append_to(&ids_, token_ids);
    all_.num_tokens += p.num_tokens;
}

core::Status ProbeLog::write_safetensors(const std::string& path, int64_t hc, int64_t D, int64_t K,
                                         int64_t topk) const {
    const int64_t N = rows();
    std::vector<Entry> entries;
    entries.push_back(i64("ids", {N}, ids_));
    entries.push_back(f32("final_hidden", {N, D}, all_.final_hidden));
    for (size_t l = 0; l < all_.hidden.size(); ++l) {
        const std::string s = std::to_string(l);
        entries.push_back(f32("hidden." + s, {N, hc, D}, all_.hidden[l]));
        entries.push_back(i64("router." + s, {N, K}, all_.router[l]));
        entries.push_back(f32("router_weights." + s, {N, K}, all_.router_weights[l]));
        if (!all_.indexer_topk[l].empty())
            entries.push_back(i64("indexer_topk." + s, {N, topk}, all_.indexer_topk[l]));
    }
    std::string header = "{";
    size_t offset = 0;
    for (size_t i = 0; i < entries.size(); ++i) {
        const Entry& e = entries[i];
        std::ostringstream os;
        os << (i ? "," : "") << '"' << e.name << "\":{\"dtype\":\"" << e.dtype << "\",\"shape\":[";
        for (size_t j = 0; j < e.shape.size(); ++j) os << (j ? "," : "") << e.shape[j];
        os << "],\"data_offsets\":[" << offset << "," << offset + e.bytes.size() << "]}";
        header += os.str();
        offset += e.bytes.size();
    }
    header += "}";
    while (header.size() % 8) header += ' ';
    std::FILE* f = std::fopen(path.c_str(), "wb");
    if (!f) return core::io_error("cannot write probes to '" + path + "'");
    const uint64_t n = header.size();
    bool ok = std::fwrite(&n, 8, 1, f) == 1 && std::fwrite(header.data(), 1, n, f) == n;
    for (const Entry& e : entries)
        if (!e.bytes.empty()) ok = ok && std::fwrite(e.bytes.data(), 1, e.bytes.size(), f) == e.bytes.size();
    ok = std::fclose(f) == 0 && ok;
    if (!ok) return core::io_error("short write to '" + path + "'");
    return core::Status();
}

} // namespace deepinfer::model::deepseek_v4
