/*
 * device/coll_units.h - the data a block moves: words of 1-8 bytes and
 * 16-byte units at any alignment, how units split among a call's blocks,
 * and which peer a block serves at each step.
 * Part of the collectives' device code: included by coll_impl.h, in
 * order, after coll_layout.h and coll_reduce.h; never include it alone.
 */
#ifndef SYMM_DEVICE_COLL_UNITS_H
#define SYMM_DEVICE_COLL_UNITS_H

/* `nb` (1..8) bytes at p as a little-endian word, zero-extended. One 8-byte
 * load when it can; the unaligned or short case goes 4 or 1 bytes at a time. */
SYMM__DEVICE_INTERNAL uint64_t symm__c_ldw(const void *p, uint32_t nb) {
    const char *c = (const char *)p;
    uint64_t w = 0;
    uint32_t i = 0;
    if (nb == 8 && ((uintptr_t)p & 7u) == 0)
        return symm__c_ld8(p);
    if (((uintptr_t)p & 3u) == 0)
        for (; i + 4 <= nb; i += 4)
            w |= (uint64_t)symm__c_ld4(c + i) << (8 * i);
    for (; i < nb; i++)
        w |= (uint64_t)symm__c_ld1(c + i) << (8 * i);
    return w;
}

/* Bytes of word k (8 bytes each) of an nbytes buffer: 8, fewer for a short last one. */
SYMM__DEVICE_INTERNAL uint32_t symm__c_word_nb(uint64_t nbytes, uint64_t k) {
    return nbytes - 8 * k < 8 ? (uint32_t)(nbytes - 8 * k) : 8u;
}

SYMM__DEVICE_INTERNAL void symm__c_stw(void *p, uint64_t w, uint32_t nb) {
    char *c = (char *)p;
    uint32_t i = 0;
    if (nb == 8 && ((uintptr_t)p & 7u) == 0) {
        symm__c_st8(p, w);
        return;
    }
    if (((uintptr_t)p & 3u) == 0)
        for (; i + 4 <= nb; i += 4)
            symm__c_st4(c + i, (uint32_t)(w >> (8 * i)));
    for (; i < nb; i++)
        symm__c_st1(c + i, (uint32_t)(w >> (8 * i)) & 0xffu);
}

/* The 16-byte unit at p of which `rem` (>= 1) bytes exist, as two words: one
 * load when `wide` (p 16-byte aligned) and the unit whole, else word loads. */
SYMM__DEVICE_INTERNAL void symm__c_ld_unit(const char *p, uint64_t rem, int wide, uint64_t *w0, uint64_t *w1) {
    if (wide && rem >= 16) {
        symm__v4_t v = symm__c_ld16(p);
        *w0 = ((uint64_t)v.y << 32) | v.x;
        *w1 = ((uint64_t)v.w << 32) | v.z;
        return;
    }
    *w0 = symm__c_ldw(p, rem >= 8 ? 8u : (uint32_t)rem);
    *w1 = rem > 8 ? symm__c_ldw(p + 8, rem >= 16 ? 8u : (uint32_t)(rem - 8)) : 0;
}

/* Store the `rem` (>= 1) existing bytes of a unit; as symm__c_ld_unit. */
SYMM__DEVICE_INTERNAL void symm__c_st_unit(char *p, uint64_t rem, int wide, uint64_t w0, uint64_t w1) {
    if (wide && rem >= 16) {
        symm__v4_t v;
        v.x = (uint32_t)w0; v.y = (uint32_t)(w0 >> 32);
        v.z = (uint32_t)w1; v.w = (uint32_t)(w1 >> 32);
        symm__c_st16(p, v);
        return;
    }
    symm__c_stw(p, w0, rem >= 8 ? 8u : (uint32_t)rem);
    if (rem > 8)
        symm__c_stw(p + 8, w1, rem >= 16 ? 8u : (uint32_t)(rem - 8));
}

/* [lo, hi) of part `i` when `total` units are cut into `parts` near-equal
 * contiguous parts. */
SYMM__DEVICE_INTERNAL void symm__c_split(uint64_t total, uint32_t parts, uint32_t i, uint64_t *lo,
                                         uint64_t *hi) {
    uint64_t per = (total + parts - 1) / parts;
    uint64_t a = per * i;
    if (a > total) a = total;
    *lo = a;
    *hi = (a + per > total) ? total : a + per;
}

/*
 * Does slot `slot` of `nslots` get none of `units`? Such a slot takes no
 * part in a packet call and does not count it: a call that exchanges nothing
 * waits for nothing from the peers, so counting it would let a PE start the
 * next call of the same parity (and store into a peer's region of it) while
 * that peer still reads the previous one. The share depends only on
 * arguments every PE passes alike, so every PE skips the same slots and the
 * slot's count stays the same on all of them (coll_layout.h).
 */
SYMM__DEVICE_INTERNAL int symm__c_slot_idle(uint64_t units, uint32_t nslots, uint32_t slot) {
    uint64_t lo, hi;
    symm__c_split(units, nslots, slot, &lo, &hi);
    return hi <= lo;
}

/*
 * The peer that block `slot` of PE `me` serves at step i of a loop over the
 * n PEs. Every block starts at a different PE, so at any moment this PE's
 * blocks write to all peers at once (its egress is spread over every link,
 * and the PEs' blocks do not all aim at the same destination), and the
 * local copy of some blocks overlaps the remote traffic of the others.
 * Only the order changes: each block still visits every PE once.
 */
SYMM__DEVICE_INTERNAL int symm__c_step_pe(int me, int i, uint32_t slot, int n) {
    return (int)(((uint32_t)me + (uint32_t)i + slot) % (uint32_t)n);
}

SYMM__DEVICE_INTERNAL char *symm__c_peer(const symm_ctx_t *ctx, const void *p, int pe) {
    return (char *)symm__peer(ctx, p, pe);
}

#endif /* SYMM_DEVICE_COLL_UNITS_H */
