# Included by _record.pyx after _crc32.pxi: zlib's CRC-32 by carry-less multiplication (PCLMULQDQ)
# on x86-64 CPUs that have it, about four times the table version's speed on 1 KiB bodies, which
# is most of a record's encoding cost. Elsewhere (another architecture, another compiler, a CPU
# without the instruction, fewer than 64 bytes) `_crc32_fast` is the table version.
#
# The method is the folding of Gopal et al. ("Fast CRC Computation for Generic Polynomials Using
# PCLMULQDQ", Intel, 2009) for the bit-reflected polynomial 0x104C11DB7: four 128-bit lanes are
# folded 64 bytes at a time (constants x^(4*128+32) and x^(4*128-32) mod P), the lanes folded into
# one (x^(128+32), x^(128-32)), then 128 -> 64 -> 32 bits and a Barrett reduction (mu and P').
# The constants are those of the paper for this polynomial; tests pin the result to zlib.crc32.

cdef extern from *:
    """
    #include <stdint.h>
    #include <stddef.h>
    #if defined(__x86_64__) && defined(__GNUC__)
    #include <immintrin.h>
    #define RL_HAVE_CLMUL_BUILD 1
    __attribute__((target("pclmul,sse4.1")))
    static uint32_t rl_crc32_clmul(uint32_t crc, const unsigned char *p, size_t n) {
        /* n >= 64 and a multiple of 16; crc is the register (already inverted) */
        const __m128i k1k2 = _mm_set_epi64x(0x1c6e41596LL, 0x154442bd4LL);
        const __m128i k3k4 = _mm_set_epi64x(0x0ccaa009eLL, 0x1751997d0LL);
        const __m128i k5 = _mm_set_epi64x(0, 0x163cd6124LL);
        const __m128i poly = _mm_set_epi64x(0x1F7011641LL, 0x1DB710641LL);
        const __m128i mask32 = _mm_set_epi32(0, 0, 0, -1);
        __m128i x1 = _mm_loadu_si128((const __m128i *)(p + 0));
        __m128i x2 = _mm_loadu_si128((const __m128i *)(p + 16));
        __m128i x3 = _mm_loadu_si128((const __m128i *)(p + 32));
        __m128i x4 = _mm_loadu_si128((const __m128i *)(p + 48));
        __m128i t1, t2, t3, t4;
        x1 = _mm_xor_si128(x1, _mm_cvtsi32_si128((int)crc));
        p += 64;
        n -= 64;
        while (n >= 64) {
            t1 = _mm_clmulepi64_si128(x1, k1k2, 0x11);
            t2 = _mm_clmulepi64_si128(x2, k1k2, 0x11);
            t3 = _mm_clmulepi64_si128(x3, k1k2, 0x11);
            t4 = _mm_clmulepi64_si128(x4, k1k2, 0x11);
            x1 = _mm_clmulepi64_si128(x1, k1k2, 0x00);
            x2 = _mm_clmulepi64_si128(x2, k1k2, 0x00);
            x3 = _mm_clmulepi64_si128(x3, k1k2, 0x00);
            x4 = _mm_clmulepi64_si128(x4, k1k2, 0x00);
            x1 = _mm_xor_si128(_mm_xor_si128(x1, t1), _mm_loadu_si128((const __m128i *)(p + 0)));
            x2 = _mm_xor_si128(_mm_xor_si128(x2, t2), _mm_loadu_si128((const __m128i *)(p + 16)));
            x3 = _mm_xor_si128(_mm_xor_si128(x3, t3), _mm_loadu_si128((const __m128i *)(p + 32)));
            x4 = _mm_xor_si128(_mm_xor_si128(x4, t4), _mm_loadu_si128((const __m128i *)(p + 48)));
            p += 64;
            n -= 64;
        }
        /* four lanes into one */
        t1 = _mm_clmulepi64_si128(x1, k3k4, 0x11);
        x1 = _mm_clmulepi64_si128(x1, k3k4, 0x00);
        x1 = _mm_xor_si128(_mm_xor_si128(x1, t1), x2);
        t1 = _mm_clmulepi64_si128(x1, k3k4, 0x11);
        x1 = _mm_clmulepi64_si128(x1, k3k4, 0x00);
        x1 = _mm_xor_si128(_mm_xor_si128(x1, t1), x3);
        t1 = _mm_clmulepi64_si128(x1, k3k4, 0x11);
        x1 = _mm_clmulepi64_si128(x1, k3k4, 0x00);
        x1 = _mm_xor_si128(_mm_xor_si128(x1, t1), x4);
        while (n >= 16) {
            t1 = _mm_clmulepi64_si128(x1, k3k4, 0x11);
            x1 = _mm_clmulepi64_si128(x1, k3k4, 0x00);
            x1 = _mm_xor_si128(_mm_xor_si128(x1, t1), _mm_loadu_si128((const __m128i *)p));
            p += 16;
            n -= 16;
        }
        /* 128 -> 64 bits */
        t1 = _mm_clmulepi64_si128(x1, k3k4, 0x10);
        x1 = _mm_xor_si128(_mm_srli_si128(x1, 8), t1);
        /* 64 -> 32 bits */
        t1 = _mm_clmulepi64_si128(_mm_and_si128(x1, mask32), k5, 0x00);
        x1 = _mm_xor_si128(_mm_srli_si128(x1, 4), t1);
        /* Barrett reduction */
        t1 = _mm_clmulepi64_si128(_mm_and_si128(x1, mask32), poly, 0x10);
        t1 = _mm_clmulepi64_si128(_mm_and_si128(t1, mask32), poly, 0x00);
        x1 = _mm_xor_si128(x1, t1);
        return (uint32_t)_mm_extract_epi32(x1, 1);
    }
    static int rl_clmul_usable(void) {
        __builtin_cpu_init();
        return __builtin_cpu_supports("pclmul") && __builtin_cpu_supports("sse4.1");
    }
    #else
    #define RL_HAVE_CLMUL_BUILD 0
    static uint32_t rl_crc32_clmul(uint32_t crc, const unsigned char *p, size_t n) { (void)p; (void)n; return crc; }
    static int rl_clmul_usable(void) { return 0; }
    #endif
    """
    uint32_t rl_crc32_clmul(uint32_t crc, const unsigned char* p, size_t n) noexcept nogil
    int rl_clmul_usable() noexcept nogil


cdef bint _HAVE_CLMUL = rl_clmul_usable() != 0


cdef uint32_t _crc32_fast(const unsigned char* p, Py_ssize_t n) noexcept nogil:
    """`zlib.crc32(p[:n])`, by carry-less multiplication where the CPU has it."""
    cdef uint32_t crc
    cdef Py_ssize_t bulk
    if not _HAVE_CLMUL or n < 64:
        return _crc32(p, n)
    bulk = n & ~(<Py_ssize_t>15)
    crc = rl_crc32_clmul(0xFFFFFFFFU, p, <size_t>bulk)
    p += bulk
    n -= bulk
    while n > 0:
        crc = _crc_table[0][(crc ^ p[0]) & 0xFF] ^ (crc >> 8)
        p += 1
        n -= 1
    return crc ^ 0xFFFFFFFFU
