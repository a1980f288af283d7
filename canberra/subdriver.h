/* A libcanberra driver loaded and called by the plug-in itself (subdriver.c). */
#ifndef CUED_SUBDRIVER_H
#define CUED_SUBDRIVER_H

#include "driver.h"

struct subdriver {
        void *dso;
        void *owner;            /* given back by subdriver_owner for this driver's context */
        struct ca_context *c;   /* NULL: not open */
        int (*open)(ca_context *c);
        int (*destroy)(ca_context *c);
        int (*change_device)(ca_context *c, const char *device);
        int (*change_props)(ca_context *c, ca_proplist *changed, ca_proplist *merged);
        int (*play)(ca_context *c, uint32_t id, ca_proplist *p, ca_finish_callback_t cb, void *userdata);
        int (*cancel)(ca_context *c, uint32_t id);
        int (*cache)(ca_context *c, ca_proplist *p);
};

/* libcanberra-NAME.so from this plug-in's directory, opened with `props` and `device` ("" none). */
int subdriver_open(struct subdriver *s, const char *name, ca_proplist *props, const char *device);
/* New properties (NULL: unchanged) or device (NULL: unchanged, "" none). */
void subdriver_change(struct subdriver *s, ca_proplist *props, const char *device);
void subdriver_close(struct subdriver *s);
/* The `owner` of the subdriver whose context `c` is (what its callbacks are given), or NULL if `c`
 * is not one of ours. */
void *subdriver_owner(ca_context *c);

#endif
