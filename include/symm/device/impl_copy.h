/*
 * device/impl_copy.h - the byte-copy engine under put and get, for one
 * thread, a warp or a block.
 *
 * A copy is split among `nlanes` cooperating threads (1, 32 or the block),
 * lane `lane` taking elements lane, lane + nlanes, ... so each warp access is
 * coalesced. The element width is the widest that both pointers share modulo
 * 16 (16, 8, 4, 2 or 1 bytes); the unaligned head and the tail are copied by
 * one lane each with the widest accesses the addresses allow (at most four).
 * Copies of whole 16-byte vectors between 16-byte-aligned addresses skip all
 * of that (and put/get in impl_rma.h test the alignment before computing the
 * peer address): a small block-scope copy leaves most warps with nothing to
 * move, and what they execute per call is what such a copy costs.
 * Each lane keeps SYMM_COPY_UNROLL independent loads in flight before it
 * stores them: the loads' latency is what limits a copy, the peer stores are
 * fire-and-forget.
 *
 * One side of every copy is the peer's memory (global, reached over NVLink);
 * the other is the caller's memory, which may be global or shared, so by
 * default it is accessed with generic ld/st. Compile-time variants, for the
 * benchmark to compare (define them before including symm_device.h):
 *   SYMM_COPY_UNROLL   loads in flight per lane (1..8; default 4).
 *   SYMM_COPY_VARIANT  0: generic local side, .global peer side (default).
 *                      1: .global on both sides with L1::no_allocate on loads
 *                         and L2::256B prefetch on the local loads; the local
 *                         buffer must then be global memory (not shared).
 */
#ifndef SYMM_DEVICE_IMPL_COPY_H
#define SYMM_DEVICE_IMPL_COPY_H

#ifndef SYMM_COPY_UNROLL
#  define SYMM_COPY_UNROLL 4
#endif
#if SYMM_COPY_UNROLL < 1 || SYMM_COPY_UNROLL > 8
#  error "SYMM_COPY_UNROLL must be 1..8"
#endif

#define SYMM__STR_(x) #x
#define SYMM__STR(x) SYMM__STR_(x)
#define SYMM__PRAGMA_UNROLL _Pragma(SYMM__STR(unroll SYMM_COPY_UNROLL))

typedef symm__v4_t symm__e16_t;
typedef uint64_t symm__e8_t;
typedef uint32_t symm__e4_t;
typedef uint32_t symm__e2_t;
typedef uint32_t symm__e1_t;

/* ---- the strided, unrolled loop for each width -------------------------------- */

/* Copy n elements of W bytes; this lane takes i = lane + k * nlanes. All
 * SYMM_COPY_UNROLL loads of a round are issued before its stores. A lane
 * with nothing to copy (most of a block when the copy is small) leaves after
 * one compare: every warp of the block runs this code, so each instruction it
 * executes per call costs the block's issue slots several times over. */
#define SYMM__DEFINE_COPY_LOOP(W)                                                           \
    SYMM__DEVICE_INTERNAL void symm__copy_loop##W(char *d, const char *s, size_t n,         \
                                                  size_t lane, size_t nlanes, int remote_dst) { \
        const size_t step = nlanes * (W);                                                   \
        size_t i = lane;                                                                    \
        if (i >= n)                                                                         \
            return;                                                                         \
        d += lane * (W);                                                                    \
        s += lane * (W);                                                                    \
        for (; i + (SYMM_COPY_UNROLL - 1) * nlanes < n; i += SYMM_COPY_UNROLL * nlanes) {   \
            symm__e##W##_t v[SYMM_COPY_UNROLL];                                             \
            SYMM__PRAGMA_UNROLL                                                             \
            for (int k = 0; k < SYMM_COPY_UNROLL; k++)                                      \
                v[k] = symm__cld##W(s + (size_t)k * step, !remote_dst);                     \
            SYMM__PRAGMA_UNROLL                                                             \
            for (int k = 0; k < SYMM_COPY_UNROLL; k++)                                      \
                symm__cst##W(d + (size_t)k * step, v[k], remote_dst);                       \
            d += SYMM_COPY_UNROLL * step;                                                   \
            s += SYMM_COPY_UNROLL * step;                                                   \
        }                                                                                   \
        for (; i < n; i += nlanes) {                                                        \
            symm__cst##W(d, symm__cld##W(s, !remote_dst), remote_dst);                      \
            d += step;                                                                      \
            s += step;                                                                      \
        }                                                                                   \
    }

SYMM__DEFINE_COPY_LOOP(16)
SYMM__DEFINE_COPY_LOOP(8)
SYMM__DEFINE_COPY_LOOP(4)
SYMM__DEFINE_COPY_LOOP(2)
SYMM__DEFINE_COPY_LOOP(1)
#undef SYMM__DEFINE_COPY_LOOP

/* ---- head and tail: one lane, widest access the addresses allow ---------------- */

/* Copy n (< 16 in practice) bytes whose addresses agree modulo 16 at least as
 * far as the chosen width: each step takes the widest of 8/4/2/1 that both
 * addresses are aligned to and that fits. */
SYMM__DEVICE_INTERNAL void symm__copy_small(char *d, const char *s, size_t n, int remote_dst) {
    while (n != 0) {
        uintptr_t a = (uintptr_t)d | (uintptr_t)s;
        if (n >= 8 && (a & 7) == 0) {
            symm__cst8(d, symm__cld8(s, !remote_dst), remote_dst);
            d += 8; s += 8; n -= 8;
        } else if (n >= 4 && (a & 3) == 0) {
            symm__cst4(d, symm__cld4(s, !remote_dst), remote_dst);
            d += 4; s += 4; n -= 4;
        } else if (n >= 2 && (a & 1) == 0) {
            symm__cst2(d, symm__cld2(s, !remote_dst), remote_dst);
            d += 2; s += 2; n -= 2;
        } else {
            symm__cst1(d, symm__cld1(s, !remote_dst), remote_dst);
            d += 1; s += 1; n -= 1;
        }
    }
}

/* ---- the copy ----------------------------------------------------------------- */

/* Widest element (16, 8, 4, 2, 1 bytes) both addresses can share once the
 * destination is aligned to it. */
SYMM__DEVICE_INTERNAL size_t symm__copy_width(const void *d, const void *s) {
    uintptr_t x = ((uintptr_t)d ^ (uintptr_t)s) | 16u;
    return (size_t)(x & (~x + 1u)); /* lowest set bit */
}

/* Copy n bytes from s to d, shared by nlanes threads (this is `lane`).
 * remote_dst != 0: d is the peer's memory (put); else s is (get). Returns
 * once this lane's part is stored (issued); the caller adds any barrier.
 * Both addresses and the size multiples of 16 (heap buffers of whole
 * vectors: the usual case) go straight to the 16-byte loop; everything else
 * takes the general path with its head and tail. */
SYMM__DEVICE_INTERNAL void symm__copy(void *dst, const void *src, size_t n, uint32_t lane,
                                      uint32_t nlanes, int remote_dst) {
    char *d = (char *)dst;
    const char *s = (const char *)src;
    size_t w, head, body, tail;
    if ((((uint32_t)(uintptr_t)d | (uint32_t)(uintptr_t)s | (uint32_t)n) & 15u) == 0) {
        symm__copy_loop16(d, s, n >> 4, lane, nlanes, remote_dst);
        return;
    }
    w = symm__copy_width(d, s);
    head = (size_t)(-(uintptr_t)d) & (w - 1);
    if (head > n)
        head = n;
    if (head != 0 && lane == 0)
        symm__copy_small(d, s, head, remote_dst);
    d += head;
    s += head;
    n -= head;
    /* w is a power of two: a mask and per-width shifts, not a 64-bit
     * division by a run-time value (a call on the critical path of every
     * small put). */
    tail = n & (w - 1);
    switch (w) {
    case 16: body = n >> 4; symm__copy_loop16(d, s, body, lane, nlanes, remote_dst); break;
    case 8: body = n >> 3; symm__copy_loop8(d, s, body, lane, nlanes, remote_dst); break;
    case 4: body = n >> 2; symm__copy_loop4(d, s, body, lane, nlanes, remote_dst); break;
    case 2: body = n >> 1; symm__copy_loop2(d, s, body, lane, nlanes, remote_dst); break;
    default: body = n; symm__copy_loop1(d, s, body, lane, nlanes, remote_dst); break;
    }
    /* The last lane takes the tail, so thread 0 is not loaded with both ends. */
    if (tail != 0 && lane == nlanes - 1)
        symm__copy_small(d + body * w, s + body * w, tail, remote_dst);
}

#endif /* SYMM_DEVICE_IMPL_COPY_H */
