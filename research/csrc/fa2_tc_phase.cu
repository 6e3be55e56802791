// fa2_tc with per-block tracing and per-phase cycle counts of each block's warp 0 (fa2_tc.cu, "Trace builds only"):
// the trace build (fa2_tc_trace.cu, its bindings included) compiled with FA2TC_PHASES, as its own extension module,
// built by research/scripts/trace_fa2_tc.py (TRACE_SET=phase).
#define FA2TC_PHASES 1
#include "fa2_tc_trace.cu"
