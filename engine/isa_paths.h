/* isa_paths.h — stamps a kernel source once per instruction-set path (isa.c): define
 * ISA_PATHS_INC as the source's quoted name, then include this header. The source is
 * included with W, the path's native vector width in floats, set to 4 (generic: SSE2, the
 * x86-64 baseline, or NEON), and on x86-64 also to 8 (avx2) and 16 (avx512); it derives
 * its name suffix and target attribute from W (gradient_kernels.inc, conv_direct.inc).
 * No include guard: each kernel source includes it once with its own ISA_PATHS_INC. Private
 * to engine/. */
#ifndef ISA_PATHS_INC
#error "define ISA_PATHS_INC before including isa_paths.h"
#endif
#define W 4
#include ISA_PATHS_INC
#undef W
#if ENG_ISA_X86
#define W 8
#include ISA_PATHS_INC
#undef W
#define W 16
#include ISA_PATHS_INC
#undef W
#endif
#undef ISA_PATHS_INC
