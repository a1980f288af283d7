#pragma once
#include <stdbool.h>
#include <spa/param/props.h>
#include <spa/pod/iter.h>

/* cued's stream's Props as the graph last set them (the session manager's restore, a mixer,
   wpctl): its volume, mute and channel volumes, linear. Read from the stream's param_changed
   for SPA_PARAM_Props (on the thread that runs the context's main loop: cued's audio thread)
   into fixed fields, without allocating; `seq` counts the Props seen. */
#define CUED_PW_PROPS_CHANNELS 8

struct cued_pw_props {
    unsigned seq;
    int has_volume, has_mute;
    float volume;
    int mute;
    unsigned channels;  /* the channel volumes the last Props carried (at most CUED_PW_PROPS_CHANNELS) */
    float channel_volumes[CUED_PW_PROPS_CHANNELS];
};

static inline void cued_pw_props_read(struct cued_pw_props *p, const struct spa_pod *param) {
    if (param == NULL || !spa_pod_is_object_type(param, SPA_TYPE_OBJECT_Props))
        return;
    struct spa_pod_object *obj = (struct spa_pod_object *)param;
    struct spa_pod_prop *prop;
    SPA_POD_OBJECT_FOREACH(obj, prop) {
        switch (prop->key) {
        case SPA_PROP_volume: {
            float v;
            if (spa_pod_get_float(&prop->value, &v) == 0) { p->volume = v; p->has_volume = 1; }
            break;
        }
        case SPA_PROP_mute: {
            bool m;
            if (spa_pod_get_bool(&prop->value, &m) == 0) { p->mute = m; p->has_mute = 1; }
            break;
        }
        case SPA_PROP_channelVolumes:
            p->channels = spa_pod_copy_array(&prop->value, SPA_TYPE_Float, p->channel_volumes, CUED_PW_PROPS_CHANNELS);
            break;
        default:
            break;
        }
    }
    p->seq++;
}
