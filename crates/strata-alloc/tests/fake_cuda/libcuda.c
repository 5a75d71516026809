/*
 * A fake libcuda.so.1 for exercising strata's CUDA driver on a machine without a
 * GPU. It implements the ~45 driver-API entry points strata calls, on host
 * memory, and checks their use strictly:
 *
 *  - every call but cuInit and cuGetErrorName/String needs cuInit first, and the
 *    memory, stream and event calls need a current context on the calling thread
 *    (CUDA_ERROR_INVALID_CONTEXT otherwise), which tests the per-thread binding;
 *  - device "memory" is host memory; copies and memsets check that the range lies
 *    inside a live cuMemAlloc segment or a mapped range whose access was granted
 *    with cuMemSetAccess (CUDA_ERROR_INVALID_VALUE otherwise). Reserved but
 *    unmapped or not-yet-accessible pages are PROT_NONE, so a stray access
 *    through another path crashes;
 *  - cuMemMap/cuMemUnmap/cuMemRelease/cuMemAddressFree follow the driver's rules
 *    (whole handles, exact unmaps, no release while mapped, no free while mapped);
 *    a handle may be mapped at several addresses, all showing the same bytes
 *    (each handle's memory is a memfd);
 *  - capacity is FAKE_CUDA_TOTAL bytes (default 8 GiB): cuMemAlloc and cuMemCreate
 *    beyond it fail with CUDA_ERROR_OUT_OF_MEMORY;
 *  - work queued on a stream (async copies, memsets) "runs" only when someone
 *    synchronises (stream, event or context): until then events recorded after
 *    it report CUDA_ERROR_NOT_READY. This makes deferred reuse deterministic.
 *    Async work is executed at enqueue time (the data is there at once); only
 *    the completion is deferred.
 *
 * Environment: FAKE_CUDA_NO_DEVICE=1 makes cuInit fail with CUDA_ERROR_NO_DEVICE;
 * FAKE_CUDA_NO_VMM=1 reports no virtual memory management; FAKE_CUDA_TOTAL sets
 * the capacity. Memsets larger than 64 MiB fill only their first MiB (to keep
 * tests fast); everything else is exact.
 *
 * Build: cc -shared -fPIC -O1 -o libcuda.so.1 libcuda.c -lpthread
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

typedef int CUresult;
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;
typedef unsigned long long CUmemGenericAllocationHandle;

enum {
    OK = 0,
    INVALID_VALUE = 1,
    OUT_OF_MEMORY = 2,
    NOT_INITIALIZED = 3,
    NO_DEVICE = 100,
    INVALID_DEVICE = 101,
    INVALID_CONTEXT = 201,
    INVALID_HANDLE = 400,
    NOT_READY = 600,
};

#define GRAN (2ull << 20)
#define MAX_OBJ 65536
#define MAX_OBJ_STREAMS 4096

typedef struct { int type; int id; } CUmemLocation;
typedef struct {
    int type;
    int requestedHandleTypes;
    CUmemLocation location;
    void *win32HandleMetaData;
    unsigned char allocFlags[8];
} CUmemAllocationProp;
typedef struct { CUmemLocation location; int flags; } CUmemAccessDesc;

struct ctx { int magic; };
static struct ctx the_ctx = {0x600d};
static __thread struct ctx *current;

#define MAX_DEPS 64
struct stream {
    int magic;
    unsigned long long queued, done;
    /* Work of other streams this stream waits for: completed with it. */
    int ndeps;
    struct { struct stream *s; unsigned long long mark; } deps[MAX_DEPS];
};
struct event { int magic; struct stream *s; unsigned long long mark; int recorded; };
static struct stream null_stream = {0x5eed, 0, 0};
static struct stream *streams[MAX_OBJ_STREAMS];
static int nstreams;

struct seg { uint64_t ptr, size; int kind; int access; uint64_t handle; };
/* kind: 1 segment (cuMemAlloc), 2 reservation, 3 mapping, 4 host alloc */
static struct seg objs[MAX_OBJ];
struct phys { uint64_t size; int mapped; int live; int fd; };
/* mapped: how many mappings the handle has (like cuMemMap, one handle may be
 * mapped at several addresses; its bytes live in a memfd, so every mapping
 * shows the same bytes). */
static struct phys handles[MAX_OBJ];
static uint64_t next_handle = 1;

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static int initialised, retained;
static uint64_t used;

static uint64_t total(void) {
    const char *t = getenv("FAKE_CUDA_TOTAL");
    return t ? strtoull(t, NULL, 0) : (8ull << 30);
}

#define LOCK pthread_mutex_lock(&mu)
#define UNLOCK pthread_mutex_unlock(&mu)
#define RET(x) do { CUresult r_ = (x); UNLOCK; return r_; } while (0)
#define NEED_INIT if (!initialised) RET(NOT_INITIALIZED)
#define NEED_CTX NEED_INIT; if (current != &the_ctx) RET(INVALID_CONTEXT)

static struct seg *add(uint64_t ptr, uint64_t size, int kind) {
    for (int i = 0; i < MAX_OBJ; i++)
        if (!objs[i].kind) {
            objs[i] = (struct seg){ptr, size, kind, kind != 3, 0};
            return &objs[i];
        }
    abort();
}

static struct seg *find(uint64_t ptr, int kind) {
    for (int i = 0; i < MAX_OBJ; i++)
        if (objs[i].kind == kind && objs[i].ptr == ptr) return &objs[i];
    return NULL;
}

/* Whether [p, p+n) is device memory the device may access. */
static int accessible(uint64_t p, uint64_t n) {
    for (int i = 0; i < MAX_OBJ; i++) {
        struct seg *s = &objs[i];
        if (s->kind == 1 && p >= s->ptr && p + n <= s->ptr + s->size) return 1;
    }
    /* A run of contiguous accessible mappings. */
    uint64_t at = p;
    while (at < p + n) {
        int found = 0;
        for (int i = 0; i < MAX_OBJ; i++) {
            struct seg *s = &objs[i];
            if (s->kind == 3 && s->access && at >= s->ptr && at < s->ptr + s->size) {
                at = s->ptr + s->size;
                found = 1;
                break;
            }
        }
        if (!found) return 0;
    }
    return 1;
}

static int is_host(uint64_t p) {
    for (int i = 0; i < MAX_OBJ; i++)
        if (objs[i].kind == 4 && p >= objs[i].ptr && p < objs[i].ptr + objs[i].size) return 1;
    return 0;
}

static struct stream *stream_of(void *h) {
    struct stream *s = h ? (struct stream *)h : &null_stream;
    return s->magic == 0x5eed ? s : NULL;
}

static void complete(struct stream *s, unsigned long long upto);

/* Queue one piece of work on a stream. */
static void enqueue(struct stream *s) { s->queued++; }

static const char *names[][2] = {
    {"CUDA_SUCCESS", "no error"},
    {"CUDA_ERROR_INVALID_VALUE", "invalid argument"},
    {"CUDA_ERROR_OUT_OF_MEMORY", "out of memory"},
    {"CUDA_ERROR_NOT_INITIALIZED", "initialization error"},
};

CUresult cuGetErrorName(CUresult e, const char **p) {
    switch (e) {
    case 0: case 1: case 2: case 3: *p = names[e][0]; return OK;
    case NO_DEVICE: *p = "CUDA_ERROR_NO_DEVICE"; return OK;
    case INVALID_DEVICE: *p = "CUDA_ERROR_INVALID_DEVICE"; return OK;
    case INVALID_CONTEXT: *p = "CUDA_ERROR_INVALID_CONTEXT"; return OK;
    case INVALID_HANDLE: *p = "CUDA_ERROR_INVALID_HANDLE"; return OK;
    case NOT_READY: *p = "CUDA_ERROR_NOT_READY"; return OK;
    default: *p = NULL; return INVALID_VALUE;
    }
}

CUresult cuGetErrorString(CUresult e, const char **p) {
    switch (e) {
    case 0: case 1: case 2: case 3: *p = names[e][1]; return OK;
    case NO_DEVICE: *p = "no CUDA-capable device is detected"; return OK;
    case INVALID_DEVICE: *p = "invalid device ordinal"; return OK;
    case INVALID_CONTEXT: *p = "invalid device context"; return OK;
    case INVALID_HANDLE: *p = "invalid resource handle"; return OK;
    case NOT_READY: *p = "device not ready"; return OK;
    default: *p = NULL; return INVALID_VALUE;
    }
}

CUresult cuInit(unsigned flags) {
    LOCK;
    if (flags) RET(INVALID_VALUE);
    const char *nd = getenv("FAKE_CUDA_NO_DEVICE");
    if (nd && *nd == '1') RET(NO_DEVICE);
    initialised = 1;
    RET(OK);
}

CUresult cuDriverGetVersion(int *v) { *v = 13000; return OK; }

CUresult cuDeviceGetCount(int *n) { LOCK; NEED_INIT; *n = 1; RET(OK); }

CUresult cuDeviceGet(CUdevice *d, int ordinal) {
    LOCK; NEED_INIT;
    if (ordinal != 0) RET(INVALID_DEVICE);
    *d = 0;
    RET(OK);
}

CUresult cuDeviceGetName(char *name, int len, CUdevice d) {
    LOCK; NEED_INIT;
    if (d != 0 || len <= 0) RET(INVALID_VALUE);
    snprintf(name, len, "Fake CUDA Device (strata tests)");
    RET(OK);
}

CUresult cuDeviceTotalMem_v2(size_t *b, CUdevice d) {
    LOCK; NEED_INIT;
    if (d != 0) RET(INVALID_DEVICE);
    *b = total();
    RET(OK);
}

CUresult cuDeviceGetAttribute(int *v, int attr, CUdevice d) {
    LOCK; NEED_INIT;
    if (d != 0) RET(INVALID_DEVICE);
    const char *nv = getenv("FAKE_CUDA_NO_VMM");
    switch (attr) {
    case 75: *v = 9; break;  /* compute capability major */
    case 76: *v = 0; break;  /* minor */
    case 102: *v = (nv && *nv == '1') ? 0 : 1; break; /* VMM */
    default: *v = 0;
    }
    RET(OK);
}

CUresult cuDevicePrimaryCtxRetain(void **ctx, CUdevice d) {
    LOCK; NEED_INIT;
    if (d != 0) RET(INVALID_DEVICE);
    retained++;
    *ctx = &the_ctx;
    RET(OK);
}

CUresult cuDevicePrimaryCtxRelease_v2(CUdevice d) {
    LOCK; NEED_INIT;
    if (d != 0 || retained <= 0) RET(INVALID_VALUE);
    retained--;
    RET(OK);
}

CUresult cuCtxGetCurrent(void **ctx) { LOCK; NEED_INIT; *ctx = current; RET(OK); }

CUresult cuCtxSetCurrent(void *ctx) {
    LOCK; NEED_INIT;
    if (ctx && (ctx != &the_ctx || retained <= 0)) RET(INVALID_CONTEXT);
    current = ctx;
    RET(OK);
}

CUresult cuCtxSynchronize(void) {
    LOCK; NEED_CTX;
    complete(&null_stream, null_stream.queued);
    for (int i = 0; i < nstreams; i++) complete(streams[i], streams[i]->queued);
    RET(OK);
}

CUresult cuMemGetInfo_v2(size_t *free_, size_t *total_) {
    LOCK; NEED_CTX;
    *free_ = total() - used;
    *total_ = total();
    RET(OK);
}

CUresult cuMemAlloc_v2(CUdeviceptr *p, size_t n) {
    LOCK; NEED_CTX;
    if (n == 0) RET(INVALID_VALUE);
    if (used + n > total()) RET(OUT_OF_MEMORY);
    void *m = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (m == MAP_FAILED) RET(OUT_OF_MEMORY);
    used += n;
    add((uint64_t)m, n, 1);
    *p = (uint64_t)m;
    RET(OK);
}

CUresult cuMemFree_v2(CUdeviceptr p) {
    LOCK; NEED_CTX;
    struct seg *s = find(p, 1);
    if (!s) RET(INVALID_VALUE);
    munmap((void *)p, s->size);
    used -= s->size;
    s->kind = 0;
    RET(OK);
}

CUresult cuMemGetAllocationGranularity(size_t *g, const CUmemAllocationProp *prop, int option) {
    LOCK; NEED_INIT;
    if (prop->type != 1 || prop->location.type != 1 || prop->location.id != 0 || option < 0 || option > 1)
        RET(INVALID_VALUE);
    *g = GRAN;
    RET(OK);
}

CUresult cuMemAddressReserve(CUdeviceptr *p, size_t n, size_t align, CUdeviceptr addr, unsigned long long flags) {
    LOCK; NEED_CTX;
    if (n == 0 || n % GRAN || addr || flags || (align && align % GRAN)) RET(INVALID_VALUE);
    /* Over-reserve to align to the granularity. */
    void *m = mmap(NULL, n + GRAN, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (m == MAP_FAILED) RET(OUT_OF_MEMORY);
    uint64_t base = ((uint64_t)m + GRAN - 1) & ~(GRAN - 1);
    struct seg *s = add(base, n, 2);
    s->handle = (uint64_t)m; /* the real mapping start, for munmap */
    *p = base;
    RET(OK);
}

CUresult cuMemAddressFree(CUdeviceptr p, size_t n) {
    LOCK; NEED_CTX;
    struct seg *s = find(p, 2);
    if (!s || s->size != n) RET(INVALID_VALUE);
    for (int i = 0; i < MAX_OBJ; i++)
        if (objs[i].kind == 3 && objs[i].ptr >= p && objs[i].ptr < p + n) RET(INVALID_VALUE);
    munmap((void *)s->handle, n + GRAN);
    s->kind = 0;
    RET(OK);
}

CUresult cuMemCreate(CUmemGenericAllocationHandle *h, size_t n, const CUmemAllocationProp *prop, unsigned long long flags) {
    LOCK; NEED_CTX;
    if (n == 0 || n % GRAN || flags || prop->type != 1 || prop->location.type != 1 || prop->location.id != 0 ||
        prop->requestedHandleTypes != 0)
        RET(INVALID_VALUE);
    if (used + n > total()) RET(OUT_OF_MEMORY);
    if (next_handle >= MAX_OBJ) abort();
    int fd = memfd_create("fake-cuda-page", 0);
    if (fd < 0 || ftruncate(fd, (off_t)n)) RET(OUT_OF_MEMORY);
    uint64_t id = next_handle++;
    handles[id] = (struct phys){n, 0, 1, fd};
    used += n;
    *h = id;
    RET(OK);
}

CUresult cuMemRelease(CUmemGenericAllocationHandle h) {
    LOCK; NEED_CTX;
    if (h == 0 || h >= MAX_OBJ || !handles[h].live || handles[h].mapped) RET(INVALID_VALUE);
    handles[h].live = 0;
    close(handles[h].fd);
    used -= handles[h].size;
    RET(OK);
}

CUresult cuMemMap(CUdeviceptr p, size_t n, size_t off, CUmemGenericAllocationHandle h, unsigned long long flags) {
    LOCK; NEED_CTX;
    if (off || flags || h == 0 || h >= MAX_OBJ || !handles[h].live || handles[h].size != n || p % GRAN)
        RET(INVALID_VALUE);
    int inside = 0;
    for (int i = 0; i < MAX_OBJ; i++)
        if (objs[i].kind == 2 && p >= objs[i].ptr && p + n <= objs[i].ptr + objs[i].size) inside = 1;
    if (!inside) RET(INVALID_VALUE);
    for (int i = 0; i < MAX_OBJ; i++)
        if (objs[i].kind == 3 && p < objs[i].ptr + objs[i].size && objs[i].ptr < p + n) RET(INVALID_VALUE);
    if (mmap((void *)p, n, PROT_NONE, MAP_SHARED | MAP_FIXED, handles[h].fd, 0) == MAP_FAILED) RET(OUT_OF_MEMORY);
    handles[h].mapped++;
    struct seg *s = add(p, n, 3);
    s->handle = h;
    s->access = 0;
    RET(OK);
}

CUresult cuMemSetAccess(CUdeviceptr p, size_t n, const CUmemAccessDesc *desc, size_t count) {
    LOCK; NEED_CTX;
    if (count != 1 || desc->location.type != 1 || desc->location.id != 0 || desc->flags != 3) RET(INVALID_VALUE);
    /* The range must be covered by mappings, without gaps. */
    uint64_t at = p;
    while (at < p + n) {
        struct seg *m = find(at, 3);
        if (!m) RET(INVALID_VALUE);
        at += m->size;
    }
    if (at != p + n) RET(INVALID_VALUE);
    for (at = p; at < p + n;) {
        struct seg *m = find(at, 3);
        m->access = 1;
        at += m->size;
    }
    if (mprotect((void *)p, n, PROT_READ | PROT_WRITE)) RET(INVALID_VALUE);
    RET(OK);
}

CUresult cuMemUnmap(CUdeviceptr p, size_t n) {
    LOCK; NEED_CTX;
    struct seg *m = find(p, 3);
    if (!m || m->size != n) RET(INVALID_VALUE);
    handles[m->handle].mapped--;
    m->kind = 0;
    /* Back to reserved, inaccessible address space. */
    mmap((void *)p, n, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0);
    RET(OK);
}

CUresult cuStreamCreate(void **s, unsigned flags) {
    LOCK; NEED_CTX;
    if (flags > 1) RET(INVALID_VALUE);
    struct stream *st = calloc(1, sizeof *st);
    st->magic = 0x5eed;
    if (nstreams == MAX_OBJ_STREAMS) abort();
    streams[nstreams++] = st;
    *s = st;
    RET(OK);
}

CUresult cuStreamDestroy_v2(void *h) {
    LOCK; NEED_CTX;
    struct stream *s = h;
    if (!s || s->magic != 0x5eed) RET(INVALID_HANDLE);
    s->magic = 0; /* leaked on purpose: events may still point at it */
    RET(OK);
}

/* Completes a stream's queued work and the work it waited for. */
static void complete(struct stream *s, unsigned long long upto) {
    if (s->done >= upto) return;
    s->done = upto;
    for (int i = 0; i < s->ndeps; i++)
        complete(s->deps[i].s, s->deps[i].mark);
}

CUresult cuStreamSynchronize(void *h) {
    LOCK; NEED_CTX;
    struct stream *s = stream_of(h);
    if (!s) RET(INVALID_HANDLE);
    complete(s, s->queued);
    RET(OK);
}

CUresult cuStreamWaitEvent(void *h, void *eh, unsigned flags) {
    LOCK; NEED_CTX;
    struct stream *s = stream_of(h);
    struct event *e = eh;
    if (!s || !e || e->magic != 0xe7e7) RET(INVALID_HANDLE);
    if (flags) RET(INVALID_VALUE);
    if (e->recorded && s->ndeps < MAX_DEPS) {
        s->deps[s->ndeps].s = e->s;
        s->deps[s->ndeps].mark = e->mark;
        s->ndeps++;
        enqueue(s);
    }
    RET(OK);
}

CUresult cuEventCreate(void **e, unsigned flags) {
    LOCK; NEED_CTX;
    if (flags != 2) RET(INVALID_VALUE); /* strata always disables timing */
    struct event *ev = calloc(1, sizeof *ev);
    ev->magic = 0xe7e7;
    *e = ev;
    RET(OK);
}

CUresult cuEventDestroy_v2(void *h) {
    LOCK; NEED_CTX;
    struct event *e = h;
    if (!e || e->magic != 0xe7e7) RET(INVALID_HANDLE);
    e->magic = 0;
    free(e);
    RET(OK);
}

CUresult cuEventRecord(void *h, void *sh) {
    LOCK; NEED_CTX;
    struct event *e = h;
    struct stream *s = stream_of(sh);
    if (!e || e->magic != 0xe7e7 || !s) RET(INVALID_HANDLE);
    e->s = s;
    e->mark = s->queued;
    e->recorded = 1;
    RET(OK);
}

static int event_complete(struct event *e) { return !e->recorded || e->s->done >= e->mark; }

CUresult cuEventQuery(void *h) {
    LOCK; NEED_CTX;
    struct event *e = h;
    if (!e || e->magic != 0xe7e7) RET(INVALID_HANDLE);
    RET(event_complete(e) ? OK : NOT_READY);
}

CUresult cuEventSynchronize(void *h) {
    LOCK; NEED_CTX;
    struct event *e = h;
    if (!e || e->magic != 0xe7e7) RET(INVALID_HANDLE);
    if (e->recorded) complete(e->s, e->mark);
    RET(OK);
}

CUresult cuMemcpyHtoD_v2(CUdeviceptr d, const void *src, size_t n) {
    LOCK; NEED_CTX;
    if (!accessible(d, n)) RET(INVALID_VALUE);
    memcpy((void *)d, src, n);
    RET(OK);
}

CUresult cuMemcpyDtoH_v2(void *dst, CUdeviceptr s, size_t n) {
    LOCK; NEED_CTX;
    if (!accessible(s, n)) RET(INVALID_VALUE);
    memcpy(dst, (void *)s, n);
    RET(OK);
}

CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr d, const void *src, size_t n, void *sh) {
    LOCK; NEED_CTX;
    struct stream *s = stream_of(sh);
    if (!s) RET(INVALID_HANDLE);
    if (!accessible(d, n)) RET(INVALID_VALUE);
    memcpy((void *)d, src, n);
    enqueue(s);
    RET(OK);
}

CUresult cuMemcpyDtoHAsync_v2(void *dst, CUdeviceptr src, size_t n, void *sh) {
    LOCK; NEED_CTX;
    struct stream *s = stream_of(sh);
    if (!s) RET(INVALID_HANDLE);
    if (!accessible(src, n)) RET(INVALID_VALUE);
    memcpy(dst, (void *)src, n);
    enqueue(s);
    RET(OK);
}

CUresult cuMemsetD8Async(CUdeviceptr d, unsigned char v, size_t n, void *sh) {
    LOCK; NEED_CTX;
    struct stream *s = stream_of(sh);
    if (!s) RET(INVALID_HANDLE);
    if (!accessible(d, n)) RET(INVALID_VALUE);
    memset((void *)d, v, n > (64u << 20) ? (1u << 20) : n);
    enqueue(s);
    RET(OK);
}

CUresult cuMemHostAlloc(void **p, size_t n, unsigned flags) {
    LOCK; NEED_CTX;
    if (n == 0) RET(INVALID_VALUE);
    void *m = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (m == MAP_FAILED) RET(OUT_OF_MEMORY);
    (void)flags;
    add((uint64_t)m, n, 4);
    *p = m;
    RET(OK);
}

CUresult cuMemFreeHost(void *p) {
    LOCK; NEED_CTX;
    struct seg *s = find((uint64_t)p, 4);
    if (!s) RET(INVALID_VALUE);
    munmap(p, s->size);
    s->kind = 0;
    RET(OK);
}

/* Used by the test harness only: bytes of device memory in use. */
uint64_t fake_cuda_used(void) { return used; }
int fake_cuda_is_host(uint64_t p) { return is_host(p); }
