#pragma once
// The KV compressor state machine shared by CSA, HCA and the lightning indexer. Tokens are fed one at a
// time in position order; windows are aligned to absolute positions (window w = positions [w*m, (w+1)*m)).
// When a window closes, its entry is pooled (per-channel softmax of gate + position bias over the window's
// slots), RMS-normed, and rotated at position w*m on the compress RoPE table.
//  * HCA (coff 1): the m slots are the window's own rows.
//  * CSA (coff 2): rows are [Ca | Cb]; entry w pools 2m slots, the Ca half of window w-1 (the overlap state;
//    weight 0 for w = 0) and the Cb half of window w. After pooling, window w's Ca half becomes the overlap.

#include <cstdint>

#include "model/deepseek_v4/kv_cache.h"
#include "model/deepseek_v4/model_weights.h"
#include "model/deepseek_v4/rope.h"

namespace deepinfer::model::deepseek_v4 {

// Feeds the projections of the token at position p (kv, gate [coff * width], gate without position bias).
// Returns true when p closes a window; the entry (index p / m) is then written to entry_out [width].
bool compressor_push(const CompressorWeights& w, const RopeTable& rope, float eps,
                     const CompressorSlotView& s, int64_t p, const float* kv, const float* gate,
                     float* entry_out);

} // namespace deepinfer::model::deepseek_v4
