#ifndef CUED_MALLOCCOUNT_H
#define CUED_MALLOCCOUNT_H
/// Counts the allocations and frees one thread makes (tests only: the test binary's malloc,
/// calloc, realloc, memalign, posix_memalign, aligned_alloc, valloc and free are these, and
/// forward to glibc's). Which thread: its kernel id, 0 for none; setting it resets the counts.
void cued_count_allocations_of(int tid);
long cued_allocations(void);
long cued_frees(void);
#endif
