/* The one definition of each element type's code. Kernels (their DTYPE constants and the
 * generic helpers of common.cuh), the host library, its C API (gemmtune.h) and the Python package
 * (which asks the library) all use these numbers; the tuning database stores the names. */
#ifndef GEMMTUNE_DATA_TYPES_H
#define GEMMTUNE_DATA_TYPES_H

#define GEMMTUNE_TYPE_F32 0
#define GEMMTUNE_TYPE_F16 1
#define GEMMTUNE_TYPE_BF16 2
#define GEMMTUNE_TYPE_E4M3 3 /* float8: 4 exponent bits, 3 mantissa bits */
#define GEMMTUNE_TYPE_E5M2 4 /* float8: 5 exponent bits, 2 mantissa bits */
#define GEMMTUNE_TYPE_COUNT 5

#endif /* GEMMTUNE_DATA_TYPES_H */
