#pragma once
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <sndfile.h>

/* cued does not link libsndfile (and its codecs: FLAC, Vorbis, Opus, mpg123, LAME, ~1.1 MB
   resident with their relocations): it loads it while it decodes (a bank of cues, a theme
   sound, a file to play) or records (wav:PATH), and unloads it with the last of those, so that
   a daemon that has loaded its cues holds none of it. `cued_sf_acquire` loads it (or takes
   another reference) and returns its functions, each typed from sndfile.h's own prototype;
   `cued_sf_release` gives the reference back. cuesynth and the tests link it as usual. */

/* The name cued asks the dynamic loader for (the tests find the library file by it too). */
#define CUED_SF_SONAME "libsndfile.so.1"

#define CUED_SF_FUNCTIONS(X) \
    X(sf_open) X(sf_open_virtual) X(sf_close) X(sf_readf_float) X(sf_writef_short) X(sf_error) X(sf_strerror) X(sf_command)

struct cued_sf_api {
#define CUED_SF_FIELD(name) __typeof__(name) *name;
    CUED_SF_FUNCTIONS(CUED_SF_FIELD)
#undef CUED_SF_FIELD
};

struct cued_sf_loader {
    pthread_mutex_t lock;
    int holders;
    void *lib;
    struct cued_sf_api api;
    char message[256];
};

static inline struct cued_sf_loader *cued_sf_loader(void) {
    static struct cued_sf_loader loader = { PTHREAD_MUTEX_INITIALIZER, 0, NULL, { 0 }, { 0 } };
    return &loader;
}

/* libsndfile's functions, loaded if need be (NULL: why, in *why, until the next call). */
static inline const struct cued_sf_api *cued_sf_acquire(const char **why) {
    struct cued_sf_loader *l = cued_sf_loader();
    pthread_mutex_lock(&l->lock);
    if (l->holders == 0) {
        l->lib = dlopen(CUED_SF_SONAME, RTLD_NOW | RTLD_LOCAL);
        if (l->lib == NULL) {
            snprintf(l->message, sizeof l->message, "cannot load libsndfile (install libsndfile1): %s", dlerror());
            goto fail;
        }
#define CUED_SF_LOOKUP(name) \
        if ((l->api.name = (__typeof__(name) *)dlsym(l->lib, #name)) == NULL) { \
            snprintf(l->message, sizeof l->message, "libsndfile has no %s", #name); \
            dlclose(l->lib); \
            l->lib = NULL; \
            goto fail; \
        }
        CUED_SF_FUNCTIONS(CUED_SF_LOOKUP)
#undef CUED_SF_LOOKUP
    }
    l->holders++;
    pthread_mutex_unlock(&l->lock);
    return &l->api;
fail:
    *why = l->message;
    pthread_mutex_unlock(&l->lock);
    return NULL;
}

/* One reference given back; the last unloads libsndfile. */
static inline void cued_sf_release(void) {
    struct cued_sf_loader *l = cued_sf_loader();
    pthread_mutex_lock(&l->lock);
    if (l->holders > 0 && --l->holders == 0) {
        dlclose(l->lib);
        l->lib = NULL;
    }
    pthread_mutex_unlock(&l->lock);
}
