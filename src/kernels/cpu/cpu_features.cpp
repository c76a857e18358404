// What this CPU has and the process-wide choices made from it: the ISA matmul dispatches to
// (DEEPINFER_ISA), the default numerics, the instruction sets the fast kernels need (VNNI, VBMI, BF16, AMX),
// and the loop shapes picked by CPU vendor. Compiled without ISA flags (cpuid through the compiler's
// builtins, so it runs on any x86-64 CPU). The dispatcher itself is linear.cpp.

#include <atomic>
#include <cstdlib>
#include <string_view>

#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "core/check.h"
#include "core/logging.h"
#include "kernels/cpu/linear.h"
#include "kernels/cpu/linear_kernels.h"

namespace deepinfer::kernels::cpu {
namespace {

constexpr int kNoIsa = -1;
std::atomic<int> g_forced{kNoIsa};
std::atomic<Numerics> g_numerics{Numerics::kExact};
std::atomic<int> g_rows_in_l1{-1};  // force_gemv_rows_in_l1's mode
std::atomic<int> g_row_streams{-1}; // force_row_streams's mode
std::atomic<int> g_amx_bf16{-1};    // force_amx_bf16_off's mode

// Whether the environment variable is set to "0" (a switch turned off).
bool env_off(const char* name) {
    const char* env = std::getenv(name);
    return env != nullptr && std::string_view(env) == "0";
}

// CPUID leaf 7, sub-leaf 0, EDX (the AMX bits); 0 where the leaf is missing.
unsigned cpuid7_edx() {
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    return __get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx) != 0 ? edx : 0;
}

Isa initial_isa() {
    const char* env = std::getenv("DEEPINFER_ISA");
    if (env != nullptr && *env != '\0') {
        Isa isa;
        if (!parse_isa(env, &isa)) {
            DI_LOG(Warn) << "DEEPINFER_ISA=" << env << " is not one of avx512|avx2|ref; using "
                         << isa_name(best_isa());
        } else if (!isa_supported(isa)) {
            DI_LOG(Warn) << "DEEPINFER_ISA=" << env << " is not supported by this CPU; using "
                         << isa_name(best_isa());
        } else {
            return isa;
        }
    }
    return best_isa();
}

// A two-way switch read from the environment: `yes` or `no`, else (unset, empty or another value, which is
// logged and ignored) `fallback`.
bool env_choice(const char* name, std::string_view yes, std::string_view no, bool fallback) {
    const char* env = std::getenv(name);
    if (env == nullptr || *env == '\0') return fallback;
    if (env == yes) return true;
    if (env == no) return false;
    DI_LOG(Warn) << name << "=" << env << " is not one of " << yes << "|" << no << "; ignored";
    return fallback;
}

} // namespace

const char* isa_name(Isa isa) {
    switch (isa) {
    case Isa::kRef:
        return "ref";
    case Isa::kAvx2:
        return "avx2";
    case Isa::kAvx512:
        return "avx512";
    }
    return "?";
}

bool parse_isa(std::string_view name, Isa* isa) {
    for (Isa i : {Isa::kRef, Isa::kAvx2, Isa::kAvx512}) {
        if (name == isa_name(i)) {
            *isa = i;
            return true;
        }
    }
    return false;
}

bool isa_supported(Isa isa) {
    switch (isa) {
    case Isa::kRef:
        return true;
    case Isa::kAvx2:
        return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
               __builtin_cpu_supports("f16c");
    case Isa::kAvx512:
        return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
               __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
    }
    return false;
}

Isa best_isa() {
    if (isa_supported(Isa::kAvx512)) return Isa::kAvx512;
    if (isa_supported(Isa::kAvx2)) return Isa::kAvx2;
    return Isa::kRef;
}

Isa active_isa() {
    const int forced = g_forced.load(std::memory_order_relaxed);
    if (forced != kNoIsa) return static_cast<Isa>(forced);
    static const Isa initial = initial_isa();
    return initial;
}

void set_active_isa(Isa isa) {
    DI_CHECK(isa_supported(isa)) << "ISA " << isa_name(isa) << " is not supported by this CPU";
    g_forced.store(static_cast<int>(isa), std::memory_order_relaxed);
}

void set_default_numerics(Numerics numerics) {
    g_numerics.store(numerics == Numerics::kDefault ? Numerics::kExact : numerics, std::memory_order_relaxed);
}

Numerics default_numerics() {
    return g_numerics.load(std::memory_order_relaxed);
}

const char* numerics_name(Numerics numerics) {
    switch (numerics) {
    case Numerics::kDefault:
        return "default";
    case Numerics::kExact:
        return "exact";
    case Numerics::kFast:
        return "fast";
    }
    return "?";
}

bool parse_numerics(std::string_view name, Numerics* numerics) {
    for (Numerics n : {Numerics::kExact, Numerics::kFast}) {
        if (name == numerics_name(n)) {
            *numerics = n;
            return true;
        }
    }
    return false;
}

bool int8_supported() {
    return isa_supported(Isa::kAvx512) && __builtin_cpu_supports("avx512vnni");
}

bool int8_gemv_supported() {
    return isa_supported(Isa::kAvx512);
}

bool fp8_int8_supported() {
    return int8_supported() && __builtin_cpu_supports("avx512vbmi");
}

bool amx_supported() {
    static const bool yes = [] {
        if (!fp8_int8_supported() || env_off("DEEPINFER_AMX")) return false;
        const unsigned edx = cpuid7_edx();
        if (((edx >> 24) & 1) == 0 || ((edx >> 25) & 1) == 0) return false; // AMX-TILE, AMX-INT8
        // Linux (5.16+) enables the 8 KiB tile state per process on request (ARCH_REQ_XCOMP_PERM for
        // XFEATURE_XTILEDATA); refused (an older kernel, a hypervisor without it) means no AMX.
        constexpr long kReqXcompPerm = 0x1023, kXtileData = 18;
        return syscall(SYS_arch_prctl, kReqXcompPerm, kXtileData) == 0;
    }();
    return yes;
}

bool amx_bf16_supported() {
    static const bool yes = [] {
        if (!amx_supported() || !bf16_supported() || env_off("DEEPINFER_AMX_BF16")) return false;
        return ((cpuid7_edx() >> 22) & 1) != 0; // AMX-BF16 (the tile state was granted by amx_supported())
    }();
    return yes;
}

bool detail::amx_bf16_enabled() {
    return g_amx_bf16.load(std::memory_order_relaxed) != 0 && amx_bf16_supported();
}

void detail::force_amx_bf16_off(int mode) {
    g_amx_bf16.store(mode, std::memory_order_relaxed);
}

void detail::force_gemv_rows_in_l1(int mode) {
    g_rows_in_l1.store(mode, std::memory_order_relaxed);
}

bool detail::gemv_rows_in_l1() {
    if (const int forced = g_rows_in_l1.load(std::memory_order_relaxed); forced >= 0) return forced == 1;
    static const bool yes = env_choice("DEEPINFER_GEMV_ACC", "l1", "registers", amd_cpu());
    return yes;
}

void detail::force_row_streams(int mode) {
    g_row_streams.store(mode, std::memory_order_relaxed);
}

bool detail::row_streams() {
    if (const int forced = g_row_streams.load(std::memory_order_relaxed); forced >= 0) return forced == 1;
    static const bool yes = env_choice("DEEPINFER_GEMV_ROWS", "streams", "tile", true);
    return yes;
}

bool detail::amd_cpu() {
    static const bool amd = __builtin_cpu_is("amd") != 0;
    return amd;
}

bool bf16_supported() {
    return isa_supported(Isa::kAvx512) && __builtin_cpu_supports("avx512bf16");
}

} // namespace deepinfer::kernels::cpu
