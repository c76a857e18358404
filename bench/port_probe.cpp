// port_probe: what one AVX-512 instruction costs beside a full-rate vpdpbusd or vfmadd231ps stream, in core
// cycles, on the machine it runs on (docs/kernels.md, "Session 26"). Each row times a hand-written loop of 8
// independent zmm vpdpbusd (or FMA) chains interleaved with 8 independent instances of the probed instruction
// (registers fixed by inline assembly, so the compiler adds no moves or spills), and prints the cycles per
// (chain op + probed op): 1.0 means the probed instruction issued for free beside the chain, 2.0 that it took
// the chain's own issue slot. The clock comes from a dependent chain of scalar adds (one per cycle). The int8
// GEMV / GEMM epilogues are written against this table: which of their per-block operations compete with
// vpdpbusd for an issue slot and which do not.
//
//   port_probe [--iters 20000000]
//
// x86-64 with AVX-512 VNNI and BF16 only; elsewhere it says so and exits 0.

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace {

#if defined(__x86_64__)
alignas(64) char g_buf[8192];

#define DI_STR(x) #x
#define DI_X8(op) op(8) op(9) op(10) op(11) op(12) op(13) op(14) op(15)
#define DI_VNNI8                                                                                             \
    "vpdpbusd %%zmm30, %%zmm31, %%zmm0\n vpdpbusd %%zmm30, %%zmm31, %%zmm1\n"                                \
    "vpdpbusd %%zmm30, %%zmm31, %%zmm2\n vpdpbusd %%zmm30, %%zmm31, %%zmm3\n"                                \
    "vpdpbusd %%zmm30, %%zmm31, %%zmm4\n vpdpbusd %%zmm30, %%zmm31, %%zmm5\n"                                \
    "vpdpbusd %%zmm30, %%zmm31, %%zmm6\n vpdpbusd %%zmm30, %%zmm31, %%zmm7\n"
#define DI_FMA8                                                                                              \
    "vfmadd231ps %%zmm30, %%zmm31, %%zmm0\n vfmadd231ps %%zmm30, %%zmm31, %%zmm1\n"                          \
    "vfmadd231ps %%zmm30, %%zmm31, %%zmm2\n vfmadd231ps %%zmm30, %%zmm31, %%zmm3\n"                          \
    "vfmadd231ps %%zmm30, %%zmm31, %%zmm4\n vfmadd231ps %%zmm30, %%zmm31, %%zmm5\n"                          \
    "vfmadd231ps %%zmm30, %%zmm31, %%zmm6\n vfmadd231ps %%zmm30, %%zmm31, %%zmm7\n"
#define DI_NONE(n)
#define DI_ADD(n) "vpaddd %%zmm29, %%zmm" DI_STR(n) ", %%zmm" DI_STR(n) "\n"
#define DI_AND(n) "vpandd %%zmm29, %%zmm" DI_STR(n) ", %%zmm" DI_STR(n) "\n"
#define DI_SRL(n) "vpsrlw $4, %%zmm" DI_STR(n) ", %%zmm" DI_STR(n) "\n"
#define DI_SHB(n) "vpshufb %%zmm29, %%zmm" DI_STR(n) ", %%zmm" DI_STR(n) "\n"
#define DI_PSD(n) "vpshufd $0x4e, %%zmm" DI_STR(n) ", %%zmm" DI_STR(n) "\n"
#define DI_UNP(n) "vpunpckldq %%zmm29, %%zmm" DI_STR(n) ", %%zmm" DI_STR(n) "\n"
#define DI_PT2(n) "vpermt2d %%zmm29, %%zmm28, %%zmm" DI_STR(n) "\n"
#define DI_SHI(n) "vshufi32x4 $0x44, %%zmm29, %%zmm" DI_STR(n) ", %%zmm" DI_STR(n) "\n"
#define DI_PMB(n) "vpermb %%zmm29, %%zmm28, %%zmm" DI_STR(n) "\n"
#define DI_PMW(n) "vpermw %%zmm29, %%zmm28, %%zmm" DI_STR(n) "\n"
#define DI_CVT(n) "vcvtdq2ps %%zmm" DI_STR(n) ", %%zmm" DI_STR(n) "\n"
#define DI_CPH(n) "vcvtph2ps %%ymm" DI_STR(n) ", %%zmm" DI_STR(n) "\n"
#define DI_PZX(n) "vpmovzxwd %%ymm" DI_STR(n) ", %%zmm" DI_STR(n) "\n"
#define DI_MUL(n) "vmulps %%zmm29, %%zmm" DI_STR(n) ", %%zmm" DI_STR(n) "\n"
#define DI_FMA(n) "vfmadd231ps %%zmm29, %%zmm28, %%zmm" DI_STR(n) "\n"
#define DI_DBF(n) "vdpbf16ps %%zmm29, %%zmm28, %%zmm" DI_STR(n) "\n"
#define DI_DPB(n) "vpdpbusd %%zmm29, %%zmm28, %%zmm" DI_STR(n) "\n"
#define DI_LDZ(n) "vmovdqu64 " DI_STR(n) "*64(%0), %%zmm" DI_STR(n) "\n"
#define DI_BCD(n) "vpbroadcastd " DI_STR(n) "*4(%0), %%zmm" DI_STR(n) "\n"
#define DI_BCQ(n) "vbroadcasti32x4 " DI_STR(n) "*16(%0), %%zmm" DI_STR(n) "\n"
// Two instructions per chain op: the ones that issue free beside the chain alone share the other pipes.
#define DI_ADD2(n) DI_ADD(n) DI_AND(n)
#define DI_ADDCVT(n) DI_ADD(n) DI_CVT(n)
#define DI_SHBADD(n) DI_SHB(n) DI_ADD(n)

#define DI_CLOBBERS                                                                                          \
    "memory", "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm10",       \
        "xmm11", "xmm12", "xmm13", "xmm14", "xmm15"

double ghz(long iters) {
    uint64_t a = 1;
    const auto t0 = std::chrono::steady_clock::now();
    for (long i = 0; i < iters; ++i)
        asm volatile("add $1, %0\n add $1, %0\n add $1, %0\n add $1, %0" : "+r"(a));
    const auto t1 = std::chrono::steady_clock::now();
    return iters * 4.0 / std::chrono::duration<double, std::nano>(t1 - t0).count();
}

struct Row {
    const char* name;
    double vnni, fma;
};

#define DI_ROW(NAME, OP)                                                                                     \
    [&] {                                                                                                    \
        Row r{NAME, 0, 0};                                                                                   \
        auto t0 = std::chrono::steady_clock::now();                                                          \
        for (long it = 0; it < iters; ++it) asm volatile(DI_VNNI8 DI_X8(OP) : : "r"(g_buf) : DI_CLOBBERS);   \
        auto t1 = std::chrono::steady_clock::now();                                                          \
        for (long it = 0; it < iters; ++it) asm volatile(DI_FMA8 DI_X8(OP) : : "r"(g_buf) : DI_CLOBBERS);    \
        auto t2 = std::chrono::steady_clock::now();                                                          \
        r.vnni = std::chrono::duration<double, std::nano>(t1 - t0).count() * clock / (iters * 8.0);          \
        r.fma = std::chrono::duration<double, std::nano>(t2 - t1).count() * clock / (iters * 8.0);           \
        return r;                                                                                            \
    }()

int run(long iters) {
    __builtin_cpu_init();
    if (!__builtin_cpu_supports("avx512vnni") || !__builtin_cpu_supports("avx512bf16") ||
        !__builtin_cpu_supports("avx512vbmi")) {
        std::printf("port_probe: needs AVX-512 VNNI, BF16 and VBMI; this CPU lacks one\n");
        return 0;
    }
    const double clock = ghz(200000000);
    std::printf(
        "clock %.2f GHz (dependent scalar adds); cycles per (chain op + probed op), 8 + 8 independent\n",
        clock);
    std::printf("%-26s %10s %10s\n", "probed instruction", "vpdpbusd", "vfmadd");
    const Row rows[] = {
        DI_ROW("(none)", DI_NONE),
        DI_ROW("vpaddd", DI_ADD),
        DI_ROW("vpandd", DI_AND),
        DI_ROW("vpsrlw", DI_SRL),
        DI_ROW("vpshufb", DI_SHB),
        DI_ROW("vpshufd", DI_PSD),
        DI_ROW("vpunpckldq", DI_UNP),
        DI_ROW("vpermt2d", DI_PT2),
        DI_ROW("vshufi32x4", DI_SHI),
        DI_ROW("vpermb", DI_PMB),
        DI_ROW("vpermw", DI_PMW),
        DI_ROW("vcvtdq2ps", DI_CVT),
        DI_ROW("vcvtph2ps ymm->zmm", DI_CPH),
        DI_ROW("vpmovzxwd ymm->zmm", DI_PZX),
        DI_ROW("vmulps", DI_MUL),
        DI_ROW("vfmadd231ps", DI_FMA),
        DI_ROW("vdpbf16ps", DI_DBF),
        DI_ROW("vpdpbusd", DI_DPB),
        DI_ROW("vmovdqu64 load", DI_LDZ),
        DI_ROW("vpbroadcastd load", DI_BCD),
        DI_ROW("vbroadcasti32x4 load", DI_BCQ),
        DI_ROW("vpaddd + vpandd", DI_ADD2),
        DI_ROW("vpaddd + vcvtdq2ps", DI_ADDCVT),
        DI_ROW("vpshufb + vpaddd", DI_SHBADD),
    };
    for (const Row& r : rows) std::printf("%-26s %10.2f %10.2f\n", r.name, r.vnni, r.fma);
    return 0;
}
#else
int run(long) {
    std::printf("port_probe: x86-64 only\n");
    return 0;
}
#endif

} // namespace

int main(int argc, char** argv) {
    long iters = 20000000;
    for (int i = 1; i < argc; ++i) {
        if (std::strcmp(argv[i], "--iters") == 0 && i + 1 < argc) {
            iters = std::atol(argv[++i]);
        } else {
            std::fprintf(stderr, "usage: port_probe [--iters N]\n");
            return 2;
        }
    }
    if (iters <= 0) {
        std::fprintf(stderr, "port_probe: --iters must be positive\n");
        return 2;
    }
    return run(iters);
}
