#include "csdbus.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "sdcalls.h"

/* SD_BUS_VTABLE_START refers to libsystemd's format marker, not linked: a stand-in here, and
   the real one put in the vtable once loaded (cued_fb_add_object). */
static const unsigned vtable_format_stand_in = 0;
#define sd_bus_object_vtable_format vtable_format_stand_in

struct cued_fb_object {
    const cued_fb_handlers *handlers;
    void *userdata;
};

/* Reads an a{sv} of hints, calling `take` for each entry; `take` reads the
 * variant when it knows the key (returns 1) or leaves it (returns 0) to be
 * skipped. Unknown keys and values of another type are ignored, as GLib's
 * g_variant_dict_lookup does for feedbackd. */
typedef int (*hint_reader)(sd_bus_message *m, const char *key, void *out);

static int read_hints(sd_bus_message *m, hint_reader take, void *out) {
    int r = sd_bus_message_enter_container(m, 'a', "{sv}");
    if (r < 0) return r;
    while ((r = sd_bus_message_enter_container(m, 'e', "sv")) > 0) {
        const char *key = NULL;
        r = sd_bus_message_read_basic(m, 's', &key);
        if (r < 0) return r;
        r = take(m, key, out);
        if (r < 0) return r;
        if (r == 0) {
            r = sd_bus_message_skip(m, "v");
            if (r < 0) return r;
        }
        r = sd_bus_message_exit_container(m);
        if (r < 0) return r;
    }
    if (r < 0) return r;
    return sd_bus_message_exit_container(m);
}

/* The variant's value if it holds `type` (1), else 0 and nothing read. */
int cued_read_variant(sd_bus_message *m, char type, void *value) {
    char t = 0;
    const char *contents = NULL;
    int r = sd_bus_message_peek_type(m, &t, &contents);
    if (r < 0) return r;
    if (t != 'v' || contents == NULL || contents[0] != type || contents[1] != 0) return 0;
    r = sd_bus_message_enter_container(m, 'v', contents);
    if (r < 0) return r;
    r = sd_bus_message_read_basic(m, type, value);
    if (r < 0) return r;
    r = sd_bus_message_exit_container(m);
    return r < 0 ? r : 1;
}

static int take_feedback_hint(sd_bus_message *m, const char *key, void *out) {
    cued_fb_trigger *t = out;
    if (strcmp(key, "profile") == 0) return cued_read_variant(m, 's', &t->profile);
    if (strcmp(key, "sound-file") == 0) return cued_read_variant(m, 's', &t->sound_file);
    if (strcmp(key, "important") == 0) return cued_read_variant(m, 'b', &t->important);
    return 0;
}

static int method_trigger(sd_bus_message *m, void *userdata, sd_bus_error *error) {
    (void)error;
    struct cued_fb_object *o = userdata;
    cued_fb_trigger t;
    memset(&t, 0, sizeof t);
    int r = sd_bus_message_read(m, "ss", &t.app_id, &t.event);
    if (r < 0) return r;
    r = read_hints(m, take_feedback_hint, &t);
    if (r < 0) return r;
    r = sd_bus_message_read(m, "i", &t.timeout);
    if (r < 0) return r;
    return o->handlers->trigger(o->userdata, m, &t);
}

static int method_end(sd_bus_message *m, void *userdata, sd_bus_error *error) {
    (void)error;
    struct cued_fb_object *o = userdata;
    uint32_t id = 0;
    int r = sd_bus_message_read(m, "u", &id);
    if (r < 0) return r;
    return o->handlers->end(o->userdata, m, id);
}

static int get_profile(sd_bus *bus, const char *path, const char *interface, const char *property,
                       sd_bus_message *reply, void *userdata, sd_bus_error *error) {
    (void)bus; (void)path; (void)interface; (void)property; (void)error;
    struct cued_fb_object *o = userdata;
    return sd_bus_message_append(reply, "s", o->handlers->get_profile(o->userdata));
}

static int set_profile(sd_bus *bus, const char *path, const char *interface, const char *property,
                       sd_bus_message *value, void *userdata, sd_bus_error *error) {
    (void)bus; (void)path; (void)interface; (void)property;
    struct cued_fb_object *o = userdata;
    const char *s = NULL;
    int r = sd_bus_message_read(value, "s", &s);
    if (r < 0) return r;
    return o->handlers->set_profile(o->userdata, sd_bus_message_get_sender(value), s, error);
}

static sd_bus_vtable feedback_vtable[] = {
    SD_BUS_VTABLE_START(0),
    SD_BUS_WRITABLE_PROPERTY("Profile", "s", get_profile, set_profile, 0, SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
    SD_BUS_METHOD_WITH_NAMES("TriggerFeedback", "ssa{sv}i",
                             SD_BUS_PARAM(app_id) SD_BUS_PARAM(event) SD_BUS_PARAM(hints) SD_BUS_PARAM(timeout),
                             "u", SD_BUS_PARAM(id), method_trigger, SD_BUS_VTABLE_UNPRIVILEGED),
    SD_BUS_METHOD_WITH_NAMES("EndFeedback", "u", SD_BUS_PARAM(id), "", , method_end, SD_BUS_VTABLE_UNPRIVILEGED),
    SD_BUS_SIGNAL_WITH_NAMES("FeedbackEnded", "uu", SD_BUS_PARAM(id) SD_BUS_PARAM(reason), 0),
    SD_BUS_VTABLE_END
};

static void free_object(void *userdata) { free(userdata); }

int cued_fb_add_object(sd_bus *bus, sd_bus_slot **slot, const cued_fb_handlers *handlers, void *userdata) {
    struct cued_fb_object *o = calloc(1, sizeof *o);
    if (o == NULL) return -ENOMEM;
    o->handlers = handlers;
    o->userdata = userdata;
    feedback_vtable[0].x.start.vtable_format_reference = cued_sd_vtable_format();
    int r = sd_bus_add_object_vtable(bus, slot, CUED_FB_PATH, CUED_FB_INTERFACE, feedback_vtable, o);
    if (r < 0) { free(o); return r; }
    sd_bus_slot_set_destroy_callback(*slot, free_object);
    return r;
}

int cued_reply_u(sd_bus_message *call, uint32_t value) { return sd_bus_reply_method_return(call, "u", value); }
int cued_reply_empty(sd_bus_message *call) { return sd_bus_reply_method_return(call, ""); }
int cued_reply_error(sd_bus_message *call, const char *name, const char *message) {
    return sd_bus_reply_method_errorf(call, name, "%s", message);
}
void cued_error_set(sd_bus_error *error, const char *name, const char *message) {
    sd_bus_error_set(error, name, message);
}

int cued_emit_feedback_ended(sd_bus *bus, uint32_t id, uint32_t reason) {
    return sd_bus_emit_signal(bus, CUED_FB_PATH, CUED_FB_INTERFACE, "FeedbackEnded", "uu", id, reason);
}
int cued_emit_profile_changed(sd_bus *bus) {
    return sd_bus_emit_properties_changed(bus, CUED_FB_PATH, CUED_FB_INTERFACE, "Profile", NULL);
}

int cued_read_s(sd_bus_message *m, const char **a) { return sd_bus_message_read(m, "s", a); }
int cued_read_sss(sd_bus_message *m, const char **a, const char **b, const char **c) {
    return sd_bus_message_read(m, "sss", a, b, c);
}

int cued_monitor_open(const char *address, sd_bus **out, sd_bus_error *error) {
    sd_bus *bus = NULL;
    int r = sd_bus_new(&bus);
    if (r < 0) return r;
    (void)sd_bus_set_description(bus, "cued-notifications");
    if ((r = sd_bus_set_bus_client(bus, 1)) < 0) goto fail;
    if ((r = sd_bus_set_monitor(bus, 1)) < 0) goto fail;
    if ((r = sd_bus_set_address(bus, address)) < 0) goto fail;
    if ((r = sd_bus_start(bus)) < 0) goto fail;
    r = sd_bus_call_method(bus, "org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus.Monitoring",
                           "BecomeMonitor", error, NULL, "asu", 1,
                           "type='method_call',interface='org.freedesktop.Notifications',member='Notify'", (uint32_t)0);
    if (r < 0) goto fail;
    *out = bus;
    return 0;
fail:
    sd_bus_flush_close_unref(bus);
    return r;
}

static int take_notify_hint(sd_bus_message *m, const char *key, void *out) {
    cued_notify *n = out;
    if (strcmp(key, "sound-file") == 0) return cued_read_variant(m, 's', &n->sound_file);
    if (strcmp(key, "sound-name") == 0) return cued_read_variant(m, 's', &n->sound_name);
    if (strcmp(key, "desktop-entry") == 0) return cued_read_variant(m, 's', &n->desktop_entry);
    if (strcmp(key, "category") == 0) return cued_read_variant(m, 's', &n->category);
    if (strcmp(key, "suppress-sound") == 0) {
        int r = cued_read_variant(m, 'b', &n->suppress_sound);
        if (r != 0) return r;
        int32_t i = 0;  /* some senders use an int */
        r = cued_read_variant(m, 'i', &i);
        if (r > 0) n->suppress_sound = i != 0;
        return r;
    }
    if (strcmp(key, "urgency") == 0) {
        uint8_t y = 0;
        int r = cued_read_variant(m, 'y', &y);
        if (r > 0) n->urgency = y;
        if (r != 0) return r;
        uint32_t u = 0;
        r = cued_read_variant(m, 'u', &u);
        if (r > 0) n->urgency = (int)(u > 2 ? 2 : u);
        if (r != 0) return r;
        int32_t i = 0;
        r = cued_read_variant(m, 'i', &i);
        if (r > 0) n->urgency = i < 0 ? 0 : (i > 2 ? 2 : i);
        return r;
    }
    return 0;
}

int cued_parse_notify(sd_bus_message *m, cued_notify *out) {
    if (!sd_bus_message_is_method_call(m, "org.freedesktop.Notifications", "Notify")) return 0;
    memset(out, 0, sizeof *out);
    out->urgency = -1;
    int r = sd_bus_message_read(m, "s", &out->app_name);
    if (r < 0) return r;
    if ((r = sd_bus_message_skip(m, "usssas")) < 0) return r;
    if ((r = read_hints(m, take_notify_hint, out)) < 0) return r;
    return 1;
}
