"""Quantizers of the oracle: DeepSeek's FP8 e4m3 blocks and packed FP4 e2m1 groups, both with ue8m0
(power-of-two) scales, plus an independent FP4 decoder used to self-check the packer."""

from __future__ import annotations

import torch

FP8_BLOCK = (32, 32)
FP4_BLOCK = 32
E4M3_MAX = 448.0
E2M1_MAX = 6.0


def pow2_ceil(x: torch.Tensor) -> torch.Tensor:
    """Smallest power of two >= x (x > 0, fp32), exact, via the fp32 bit pattern."""
    bits = x.to(torch.float32).contiguous().view(torch.int32)
    exp = ((bits >> 23) & 0xFF) - 127
    exp = exp + ((bits & 0x7FFFFF) != 0).to(torch.int32)
    return torch.ldexp(torch.ones_like(x, dtype=torch.float32), exp.to(torch.float32))


def e8m0_from_pow2(s: torch.Tensor) -> torch.Tensor:
    """Power-of-two fp32 -> float8_e8m0fnu (byte = exponent + 127). Checked exact."""
    exp = torch.frexp(s).exponent - 1
    assert bool(((exp >= -127) & (exp <= 127)).all())
    out = (exp + 127).to(torch.uint8).view(torch.float8_e8m0fnu)
    assert torch.equal(out.to(torch.float32), s)
    return out


def quant_fp8(w: torch.Tensor, block: tuple[int, int] = FP8_BLOCK) -> tuple[torch.Tensor, torch.Tensor,
                                                                          torch.Tensor]:
    """Block [32,32] e4m3 with ue8m0 scale = pow2_ceil(amax/448). Returns (q, scale_e8m0, dequant f32).
    block=(1, 32) gives the V4.1 Engram table layout: one scale per row and 32 columns."""
    out_f, in_f = w.shape
    bo, bi = block
    assert out_f % bo == 0 and in_f % bi == 0, (w.shape, "tiny dims are block-aligned")
    blocks = w.float().reshape(out_f // bo, bo, in_f // bi, bi)
    amax = blocks.abs().amax(dim=(1, 3)).clamp_min(1e-4)
    s = pow2_ceil(amax / E4M3_MAX)                                   # [out/32, in/32]
    scaled = (blocks / s[:, None, :, None]).clamp(-E4M3_MAX, E4M3_MAX)
    q = scaled.to(torch.float8_e4m3fn)                              # RNE
    deq = (q.to(torch.float32) * s[:, None, :, None]).reshape(out_f, in_f)
    return q.reshape(out_f, in_f), e8m0_from_pow2(s), deq


E2M1_GRID = torch.tensor([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0])


def quant_fp4(w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Per row, blocks of 32 along the input dim; ue8m0 scale = pow2_ceil(amax/6); e2m1 round to
    nearest, ties to the even code. Packed: element 2k -> low nibble of byte k, 2k+1 -> high nibble.
    Returns (packed int8 [out, in/2], scale e8m0 [out, in/32], dequant f32 [out, in])."""
    out_f, in_f = w.shape
    assert in_f % FP4_BLOCK == 0
    blocks = w.float().reshape(out_f, in_f // FP4_BLOCK, FP4_BLOCK)
    amax = blocks.abs().amax(dim=2).clamp_min(E2M1_MAX * 2.0 ** -126)
    s = pow2_ceil(amax / E2M1_MAX)                                   # [out, in/32]
    x = (blocks / s[:, :, None]).clamp(-E2M1_MAX, E2M1_MAX)
    mag = x.abs()
    dist = (mag[..., None] - E2M1_GRID).abs()                        # [..., 8]
    best = dist.min(dim=-1, keepdim=True).values
    cand = dist == best
    # among equidistant codes prefer the even one (RNE on the e2m1 grid)
    idx = torch.arange(8)
    even_pref = torch.where(cand & (idx % 2 == 0), idx, torch.full_like(idx, 99)).amin(dim=-1)
    any_pref = torch.where(cand, idx, torch.full_like(idx, 99)).amin(dim=-1)
    code = torch.where(even_pref < 99, even_pref, any_pref)
    assert int(code.max()) < 8
    code = code | ((x < 0).to(torch.int64) << 3)                      # sign bit
    deq_mag = E2M1_GRID[code & 7]
    deq = torch.where((code & 8) != 0, -deq_mag, deq_mag) * s[:, :, None]
    codes = code.reshape(out_f, in_f).to(torch.uint8)
    packed = (codes[:, 0::2] | (codes[:, 1::2] << 4)).to(torch.uint8).view(torch.int8)
    return packed.contiguous(), e8m0_from_pow2(s), deq.reshape(out_f, in_f)


def unpack_fp4(packed: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    """Independent decoder (used to self-check the packer)."""
    u = packed.view(torch.uint8).to(torch.int64)
    codes = torch.stack([u & 0xF, u >> 4], dim=-1).reshape(u.shape[0], -1)
    table = torch.tensor([0, .5, 1, 1.5, 2, 3, 4, 6, -0.0, -.5, -1, -1.5, -2, -3, -4, -6])
    vals = table[codes]
    s = scale.to(torch.float32).repeat_interleave(FP4_BLOCK, dim=1)
    return vals * s
