#pragma once
// The AMX tile configuration both tile GEMMs use (gemm_int8_vnni.cpp, gemm_amx_bf16.cpp): palette 1, tiles
// 0-7 all 16 rows x 64 bytes. Per thread, before a thread's first tile instruction of a call; the callers
// release the tiles (_tile_release) when done.

#include <immintrin.h>

#include <cstdint>

namespace deepinfer::kernels::cpu::detail {

struct alignas(64) AmxTileConfig {
    uint8_t palette = 1, start_row = 0;
    uint8_t reserved[14] = {};
    uint16_t colsb[16] = {};
    uint8_t rows[16] = {};
};

// cols0 / cols1: the width in bytes of tiles 0, 4, 5 / 1, 6, 7 (the int8 GEMM's C and B tiles of its first /
// second group of 16 tokens: 32 for a group of 8); tiles 2, 3 are 64 wide.
__attribute__((target("amx-tile"))) inline void amx_configure_16x64(int cols0 = 64, int cols1 = 64) {
    AmxTileConfig c;
    for (int i = 0; i < 8; ++i) {
        c.colsb[i] = static_cast<uint16_t>(i == 0 || i == 4 || i == 5 ? cols0
                                           : i == 1 || i >= 6         ? cols1
                                                                      : 64);
        c.rows[i] = 16;
    }
    // GCC's _tile_loadconfig names only the first 8 bytes of the configuration as its memory operand, so
    // the stores to the rest could be dropped as dead (they were, once, in gemm_amx_bf16.cpp: ldtilecfg
    // then faulted on column widths of 0). The barrier keeps every store.
    asm volatile("" : : "r"(&c) : "memory");
    _tile_loadconfig(&c);
}

} // namespace deepinfer::kernels::cpu::detail
