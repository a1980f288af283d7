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

/* One of the stream's controls as libpipewire keeps them (`control_info`): its values, whether
   the last Props said them or not. PipeWire 1.x's first Props can carry only the channel volumes
   (the session manager's restore), its mute and volume then still at their defaults: the controls
   say those defaults, where the Props alone left them unknown. */
static inline void cued_pw_props_control(struct cued_pw_props *p, uint32_t id, const float *values, uint32_t n) {
    if (values == NULL || n == 0)
        return;
    switch (id) {
    case SPA_PROP_volume: p->volume = values[0]; p->has_volume = 1; break;
    case SPA_PROP_mute: p->mute = values[0] != 0.0f; p->has_mute = 1; break;
    case SPA_PROP_channelVolumes:
        p->channels = n < CUED_PW_PROPS_CHANNELS ? n : CUED_PW_PROPS_CHANNELS;
        for (uint32_t i = 0; i < p->channels; i++) p->channel_volumes[i] = values[i];
        break;
    default: return;
    }
    p->seq++;
}

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
