/* Loads libsystemd's sd-bus on first use: see csdbus.h. */
#include "csdbus.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>

static pthread_once_t once = PTHREAD_ONCE_INIT;
static struct cued_sd_api api;
static const unsigned *format;
static const char *error = "not loaded";
static char message[256];

static void load(void) {
    void *lib = dlopen("libsystemd.so.0", RTLD_NOW | RTLD_LOCAL);
    if (lib == NULL) {
        snprintf(message, sizeof message, "cannot load libsystemd (install libsystemd0): %s", dlerror());
        error = message;
        return;
    }
#define CUED_SD_LOOKUP(name) \
    if ((api.name = (__typeof__(name) *)dlsym(lib, #name)) == NULL) { \
        snprintf(message, sizeof message, "libsystemd has no %s: %s", #name, dlerror()); \
        error = message; \
        return; \
    }
    CUED_SD_FUNCTIONS(CUED_SD_LOOKUP)
#undef CUED_SD_LOOKUP
    if ((format = dlsym(lib, "sd_bus_object_vtable_format")) == NULL) {
        snprintf(message, sizeof message, "libsystemd has no sd_bus_object_vtable_format: %s", dlerror());
        error = message;
        return;
    }
    error = NULL;
}

const char *cued_sd_load(void) {
    pthread_once(&once, load);
    return error;
}

const struct cued_sd_api *cued_sd(void) { return &api; }
const unsigned *cued_sd_vtable_format(void) { return format; }
