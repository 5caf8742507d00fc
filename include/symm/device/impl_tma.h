/*
 * device/impl_tma.h - bulk-copy (TMA) engine for block-scope puts: not
 * written yet. SYMM_PUT_BLOCK_TMA is refused until it is.
 */
#ifndef SYMM_DEVICE_IMPL_TMA_H
#define SYMM_DEVICE_IMPL_TMA_H
#if defined(SYMM_PUT_BLOCK_TMA) && SYMM_PUT_BLOCK_TMA
#  error "SYMM_PUT_BLOCK_TMA: the bulk-copy put is not implemented yet"
#endif
#define SYMM__HAVE_TMA 0
#endif /* SYMM_DEVICE_IMPL_TMA_H */
