//go:build cgo

// Virtual KV memory (kvmem.go says why and how it is used).
//
// ggml's CPU buffer type allocates with posix_memalign and llama.cpp clears
// the KV buffer with memset right after, which commits every page of it. A
// buffer made here is an anonymous private mapping reserved without
// committing (MAP_NORESERVE), cleared with MADV_DONTNEED (which gives back
// zero pages, exactly what a memset to 0 leaves), and it records where
// ggml places each tensor in it (init_tensor), so the binding knows which
// pages hold which KV stream and can give them back when a stream empties.
//
// The hook replaces the CPU buffer type's alloc_buffer once, for the
// process. It makes a mapped buffer only while armed (the binding arms it
// around llama_init_from_model, one context at a time); otherwise, and
// when the mapping fails, it calls ggml's own allocator.

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "bridge.h"
#include "ggml-backend.h"
#include "ggml-cpu.h"
// Found through the ggml include directory on CGO_CPPFLAGS: the buffer
// interface is ggml's internal header, in the same module sources.
#include "../src/ggml-backend-impl.h"

struct kvmem_buffer {
    ggml_backend_buffer_t buf;
    void * base;
    size_t mapped;
    int64_t window;
    int n, cap;
    struct llmserve_kvmem_tensor * tensors;
    struct kvmem_buffer * next;
};

static pthread_mutex_t kvmem_mu = PTHREAD_MUTEX_INITIALIZER;
static struct kvmem_buffer * kvmem_list;  // guarded by kvmem_mu
static int64_t kvmem_armed;               // guarded by kvmem_mu; 0: not armed
static int kvmem_installed;               // guarded by kvmem_mu
static ggml_backend_buffer_t (*kvmem_orig_alloc)(ggml_backend_buffer_type_t, size_t);
static struct ggml_backend_buffer_i kvmem_iface;
static void (*kvmem_ptr_free)(ggml_backend_buffer_t);

static struct kvmem_buffer * kvmem_find_locked(ggml_backend_buffer_t buf) {
    for (struct kvmem_buffer * b = kvmem_list; b != NULL; b = b->next) {
        if (b->buf == buf) {
            return b;
        }
    }
    return NULL;
}

static void kvmem_free(ggml_backend_buffer_t buffer) {
    void * base = NULL;
    size_t mapped = 0;
    pthread_mutex_lock(&kvmem_mu);
    for (struct kvmem_buffer ** p = &kvmem_list; *p != NULL; p = &(*p)->next) {
        if ((*p)->buf == buffer) {
            struct kvmem_buffer * b = *p;
            *p = b->next;
            base = b->base;
            mapped = b->mapped;
            free(b->tensors);
            free(b);
            break;
        }
    }
    pthread_mutex_unlock(&kvmem_mu);
    if (base != NULL) {
        munmap(base, mapped);
    }
    kvmem_ptr_free(buffer);  // frees the buffer object itself
}

static enum ggml_status kvmem_init_tensor(ggml_backend_buffer_t buffer, struct ggml_tensor * t) {
    // Only the KV tensors are recorded; the graph allocator calls this for
    // every node of every step in the compute buffers made while armed.
    if (t->view_src != NULL || strncmp(t->name, "cache_", 6) != 0) {
        return GGML_STATUS_SUCCESS;
    }
    pthread_mutex_lock(&kvmem_mu);
    struct kvmem_buffer * b = kvmem_find_locked(buffer);
    if (b != NULL) {
        if (b->n == b->cap) {
            int cap = b->cap == 0 ? 64 : 2 * b->cap;
            void * p = realloc(b->tensors, (size_t) cap * sizeof(*b->tensors));
            if (p == NULL) {
                pthread_mutex_unlock(&kvmem_mu);
                return GGML_STATUS_ALLOC_FAILED;
            }
            b->tensors = p;
            b->cap = cap;
        }
        struct llmserve_kvmem_tensor * r = &b->tensors[b->n++];
        memset(r, 0, sizeof(*r));
        strncpy(r->name, t->name, sizeof(r->name) - 1);
        r->data = (uintptr_t) t->data;
        for (int i = 0; i < 4; i++) {
            r->ne[i] = t->ne[i];
            r->nb[i] = (int64_t) t->nb[i];
        }
        r->base = (uintptr_t) b->base;
        r->mapped = (int64_t) b->mapped;
    }
    pthread_mutex_unlock(&kvmem_mu);
    return GGML_STATUS_SUCCESS;
}

static void kvmem_clear(ggml_backend_buffer_t buffer, uint8_t value) {
    pthread_mutex_lock(&kvmem_mu);
    struct kvmem_buffer * b = kvmem_find_locked(buffer);
    void * base = b ? b->base : NULL;
    size_t mapped = b ? b->mapped : 0;
    pthread_mutex_unlock(&kvmem_mu);
    if (value == 0 && base != NULL && madvise(base, mapped, MADV_DONTNEED) == 0) {
        return;
    }
    memset(buffer->context, value, buffer->size);
}

static ggml_backend_buffer_t kvmem_alloc(ggml_backend_buffer_type_t buft, size_t size) {
    pthread_mutex_lock(&kvmem_mu);
    int64_t window = kvmem_armed;
    pthread_mutex_unlock(&kvmem_mu);
    if (window == 0 || size == 0) {
        return kvmem_orig_alloc(buft, size);
    }
    size_t page = (size_t) sysconf(_SC_PAGESIZE);
    size_t mapped = (size + page - 1) / page * page;
    void * base = mmap(NULL, mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (base == MAP_FAILED) {
        return kvmem_orig_alloc(buft, size);
    }
#ifdef MADV_NOHUGEPAGE
    // A huge page would commit 2 MiB at the first token of a stream.
    madvise(base, mapped, MADV_NOHUGEPAGE);
#endif
    struct kvmem_buffer * b = calloc(1, sizeof(*b));
    if (b == NULL) {
        munmap(base, mapped);
        return kvmem_orig_alloc(buft, size);
    }
    ggml_backend_buffer_t buf = ggml_backend_buffer_init(buft, kvmem_iface, base, size);
    b->buf = buf;
    b->base = base;
    b->mapped = mapped;
    b->window = window;
    pthread_mutex_lock(&kvmem_mu);
    b->next = kvmem_list;
    kvmem_list = b;
    pthread_mutex_unlock(&kvmem_mu);
    return buf;
}

int llmserve_kvmem_install(void) {
    pthread_mutex_lock(&kvmem_mu);
    if (kvmem_installed) {
        pthread_mutex_unlock(&kvmem_mu);
        return 0;
    }
    // The pointer buffer's interface is the CPU buffer's, with a free that
    // only deletes the buffer object: ours adds the munmap before it.
    static char probe[64];
    ggml_backend_buffer_t b0 = ggml_backend_cpu_buffer_from_ptr(probe, sizeof(probe));
    if (b0 == NULL || b0->iface.free_buffer == NULL || b0->iface.get_base == NULL) {
        pthread_mutex_unlock(&kvmem_mu);
        return -1;
    }
    kvmem_iface = b0->iface;
    kvmem_ptr_free = b0->iface.free_buffer;
    ggml_backend_buffer_free(b0);
    kvmem_iface.free_buffer = kvmem_free;
    kvmem_iface.init_tensor = kvmem_init_tensor;
    kvmem_iface.clear = kvmem_clear;

    ggml_backend_buffer_type_t buft = ggml_backend_cpu_buffer_type();
    kvmem_orig_alloc = buft->iface.alloc_buffer;
    buft->iface.alloc_buffer = kvmem_alloc;
    kvmem_installed = 1;
    pthread_mutex_unlock(&kvmem_mu);
    return 0;
}

void llmserve_kvmem_arm(int64_t window) {
    pthread_mutex_lock(&kvmem_mu);
    kvmem_armed = window;
    pthread_mutex_unlock(&kvmem_mu);
}

int llmserve_kvmem_tensors(int64_t window, struct llmserve_kvmem_tensor * out, int max) {
    int n = 0;
    pthread_mutex_lock(&kvmem_mu);
    for (struct kvmem_buffer * b = kvmem_list; b != NULL; b = b->next) {
        if (b->window != window) {
            continue;
        }
        for (int i = 0; i < b->n; i++) {
            if (n < max) {
                out[n] = b->tensors[i];
            }
            n++;
        }
    }
    pthread_mutex_unlock(&kvmem_mu);
    return n;
}

int llmserve_kvmem_release(uintptr_t addr, int64_t len) {
    if (len <= 0) {
        return 0;
    }
    return madvise((void *) addr, (size_t) len, MADV_DONTNEED) == 0 ? 0 : errno;
}

int64_t llmserve_kvmem_resident(uintptr_t addr, int64_t len) {
    size_t page = (size_t) sysconf(_SC_PAGESIZE);
    uintptr_t start = addr / page * page;
    size_t n = ((size_t) (addr + (uintptr_t) len) - start + page - 1) / page;
    unsigned char * vec = malloc(n > 0 ? n : 1);
    if (vec == NULL) {
        return -1;
    }
    int64_t resident = -1;
    if (mincore((void *) start, n * page, vec) == 0) {
        resident = 0;
        for (size_t i = 0; i < n; i++) {
            resident += vec[i] & 1;
        }
    }
    free(vec);
    return resident;
}
