// fa2_tc with SDPA flash's softmax arithmetic: the no-ftz build (research/csrc/fa2_tc_noftz.cu, whose binding it
// shares) with FA2TC_SPLIT_FMA too, so that each score is scaled and shifted by an FMUL then an FADD, as
// FlashAttention-2's compiled loop has it, where fa2_tc has one FFMA: each exponential then ends a chain of seven
// dependent FP32-class instructions, as flash's (research/notes/known-gaps-log.md, 2026-12-02). Timed by
// research/scripts/fa2_tc_flashexp.py; nothing else differs.
#define FA2TC_SPLIT_FMA 1
#include "fa2_tc_noftz.cu"
