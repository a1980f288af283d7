// Interposes glibc's allocator in the test binary to count what one thread allocates and
// frees: the proof that the audio thread does neither in the steady state. Every call is
// forwarded to glibc's own (__libc_*); the counting is two relaxed atomics and a
// thread-local id, no lock, no allocation. Left out under a sanitizer (it has its own).
#define _GNU_SOURCE
#include "malloccount.h"
#include <errno.h>
#include <stddef.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <execinfo.h>
#include <stdlib.h>

#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void *__libc_memalign(size_t, size_t);
extern void __libc_free(void *);

static int counted;
static long allocations, frees;
static __thread int my_tid;

static int is_counted(void) {
    int c = __atomic_load_n(&counted, __ATOMIC_RELAXED);
    if (c == 0) return 0;
    if (my_tid == 0) my_tid = (int)syscall(SYS_gettid);
    return my_tid == c;
}
// CUED_TRACE_ALLOCATIONS=N: the stacks of the first N counted allocations, to stderr
// (addresses: `addr2line -f -e` the test binary to name them).
static int traceLimit;
static __thread int tracing;
static int traced;
static void allocated(void) {
    if (!is_counted()) return;
    __atomic_fetch_add(&allocations, 1, __ATOMIC_RELAXED);
    if (tracing || __atomic_fetch_add(&traced, 1, __ATOMIC_RELAXED) >= traceLimit) return;
    tracing = 1;
    void *frames[24];
    int k = backtrace(frames, 24);
    write(2, "ALLOC\n", 6);
    backtrace_symbols_fd(frames, k, 2);
    tracing = 0;
}

void cued_count_allocations_of(int tid) {
    __atomic_store_n(&counted, 0, __ATOMIC_SEQ_CST);
    const char *limit = getenv("CUED_TRACE_ALLOCATIONS");
    traceLimit = limit ? atoi(limit) : 0;
    traced = 0;
    __atomic_store_n(&allocations, 0, __ATOMIC_SEQ_CST);
    __atomic_store_n(&frees, 0, __ATOMIC_SEQ_CST);
    __atomic_store_n(&counted, tid, __ATOMIC_SEQ_CST);
}
long cued_allocations(void) { return __atomic_load_n(&allocations, __ATOMIC_SEQ_CST); }
long cued_frees(void) { return __atomic_load_n(&frees, __ATOMIC_SEQ_CST); }

void *malloc(size_t n) { allocated(); return __libc_malloc(n); }
void *calloc(size_t n, size_t size) { allocated(); return __libc_calloc(n, size); }
void *realloc(void *p, size_t n) { allocated(); return __libc_realloc(p, n); }
void *memalign(size_t alignment, size_t n) { allocated(); return __libc_memalign(alignment, n); }
void *aligned_alloc(size_t alignment, size_t n) { allocated(); return __libc_memalign(alignment, n); }
void *valloc(size_t n) { allocated(); return __libc_memalign((size_t)sysconf(_SC_PAGESIZE), n); }
int posix_memalign(void **out, size_t alignment, size_t n) {
    if (alignment < sizeof(void *) || (alignment & (alignment - 1)) != 0) return EINVAL;
    allocated();
    void *p = __libc_memalign(alignment, n);
    if (p == NULL && n != 0) return ENOMEM;
    *out = p;
    return 0;
}
void free(void *p) {
    if (p != NULL && is_counted()) __atomic_fetch_add(&frees, 1, __ATOMIC_RELAXED);
    __libc_free(p);
}
#else
void cued_count_allocations_of(int tid) { (void)tid; }
long cued_allocations(void) { return -1; }
long cued_frees(void) { return -1; }
#endif
