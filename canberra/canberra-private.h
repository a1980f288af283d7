/* What a libcanberra 0.30 driver reads of libcanberra's own structures.
 *
 * libcanberra installs only its public header (canberra.h, libcanberra-dev); a driver
 * also needs the context's layout (its private pointer, its properties, its lock) and
 * a few helpers libcanberra.so.0 exports without declaring them. Restated here from
 * libcanberra 0.30's src/common.h, src/proplist.h, src/mutex.h and
 * src/driver-order.h: this is 0.30's ABI (Debian 12 ships 0.30-10), field for field
 * up to `private`. */
#ifndef CUED_CANBERRA_PRIVATE_H
#define CUED_CANBERRA_PRIVATE_H

#include <canberra.h>

typedef int ca_bool_t;
typedef struct ca_mutex ca_mutex;

/* common.h: what ca_context_create() allocates. */
struct ca_context {
        ca_bool_t opened;
        ca_mutex *mutex;       /* held by libcanberra around every driver call but destroy */
        ca_proplist *props;    /* the context's properties (replaced, not edited, by change_props) */
        char *driver;          /* as set: "cued", or "cued,alsa" */
        char *device;
        void *private;         /* the driver's own state */
        void *private_dso;     /* dso.c's, when drivers are plug-ins */
};

/* proplist.h: only the lock, which comes first. */
struct ca_proplist {
        ca_mutex *mutex;
        /* the hash table and the item list follow */
};

/* Exported by libcanberra.so.0, declared only in its private headers. */
ca_mutex *ca_mutex_new(void);
void ca_mutex_free(ca_mutex *m);
void ca_mutex_lock(ca_mutex *m);
void ca_mutex_unlock(ca_mutex *m);
const char *ca_proplist_gets_unlocked(ca_proplist *p, const char *key);
int ca_proplist_merge(ca_proplist **result, ca_proplist *a, ca_proplist *b);
/* The drivers libcanberra tries when none is named, in order ("pulse", "alsa", …). */
extern const char *const ca_driver_order[];
ca_bool_t ca_debug(void);

#endif
