/*
 * symm_device_coll.h - collectives callable inside kernels. Included by
 * symm_device.h.
 */
#ifndef SYMM_DEVICE_COLL_H
#define SYMM_DEVICE_COLL_H
#endif /* SYMM_DEVICE_COLL_H */
