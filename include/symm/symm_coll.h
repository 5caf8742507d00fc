/*
 * symm_coll.h - stream collectives (host API). Included by symm.h.
 */
#ifndef SYMM_COLL_H
#define SYMM_COLL_H
#endif /* SYMM_COLL_H */
