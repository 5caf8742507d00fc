/*
 * coll_ce.h - the copy-engine state of a team (coll_ce.cu makes it; the
 * all-gather / all-to-all path there and the pipelines of coll_ce_pipe.cu
 * use it). CUDA C++ only.
 */
#ifndef SYMM_COLL_CE_H
#define SYMM_COLL_CE_H

#include <cuda_runtime.h>

struct symm__coll_ce {
    cudaStream_t side;    /* this PE's own piece (all-gather), the root's own copy (broadcast) */
    cudaStream_t sig;     /* the pipelines' chunk signals, each after its chunk's copies */
    cudaStream_t red;     /* the reduce-scatter pipeline's reductions */
    cudaEvent_t fork, join, join_sig, join_red, step;
};

#endif /* SYMM_COLL_CE_H */
