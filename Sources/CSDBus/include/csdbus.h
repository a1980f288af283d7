// sd-bus (libsystemd) for cued's D-Bus face: the vtable of org.sigxcpu.Feedback
// and the variadic calls (message reads, replies, signals), which Swift cannot
// call, wrapped as plain functions. Nothing here keeps state of its own but the
// object registration; every function runs on the bus thread.
#ifndef CUED_CSDBUS_H
#define CUED_CSDBUS_H

#include <stdint.h>
#include <systemd/sd-bus.h>

/* libsystemd is not linked: it is loaded (dlopen) the first time cued connects to a bus that
   is there (the session bus; the system bus to ask RTKit, realtime.h) (`cued_sd_load`), so that
   a cued on a machine without one does not load it, its six dependencies and their relocations
   at every start. Every sd-bus call goes through
   `cued_sd()`'s table, each typed from sd-bus.h's own prototype (the C files' calls by name, through
   macros: sdcalls.h, realtime.c; Swift's as `cued_sd().pointee.NAME!(...)`). */
#define CUED_SD_FUNCTIONS(X) \
    X(sd_bus_add_match) X(sd_bus_add_object_vtable) X(sd_bus_call_async) X(sd_bus_call_method) \
    X(sd_bus_call_method_async) X(sd_bus_close_unref) X(sd_bus_emit_properties_changed) X(sd_bus_emit_signal) \
    X(sd_bus_error_free) X(sd_bus_error_get_errno) X(sd_bus_error_set) X(sd_bus_flush_close_unref) \
    X(sd_bus_get_address) X(sd_bus_get_events) X(sd_bus_get_fd) X(sd_bus_get_n_queued_write) \
    X(sd_bus_get_timeout) X(sd_bus_is_open) X(sd_bus_message_append) X(sd_bus_message_append_strv) \
    X(sd_bus_message_enter_container) X(sd_bus_message_exit_container) X(sd_bus_message_get_error) \
    X(sd_bus_message_get_path) X(sd_bus_message_get_sender) X(sd_bus_message_is_method_call) \
    X(sd_bus_message_is_method_error) X(sd_bus_message_is_signal) X(sd_bus_message_new_method_call) \
    X(sd_bus_message_peek_type) X(sd_bus_message_read) X(sd_bus_message_read_basic) X(sd_bus_message_ref) \
    X(sd_bus_message_rewind) X(sd_bus_message_set_auto_start) X(sd_bus_message_skip) X(sd_bus_message_unref) \
    X(sd_bus_new) X(sd_bus_open_system_with_description) X(sd_bus_open_user_with_description) \
    X(sd_bus_process) X(sd_bus_reply_method_errorf) X(sd_bus_reply_method_return) X(sd_bus_request_name) \
    X(sd_bus_set_address) X(sd_bus_set_bus_client) X(sd_bus_set_description) X(sd_bus_set_monitor) \
    X(sd_bus_slot_set_destroy_callback) X(sd_bus_slot_unref) X(sd_bus_start)

struct cued_sd_api {
#define CUED_SD_FIELD(name) __typeof__(name) *name;
    CUED_SD_FUNCTIONS(CUED_SD_FIELD)
#undef CUED_SD_FIELD
};

/* Loads libsystemd once (any thread); NULL, or why it cannot be used. */
const char *cued_sd_load(void);
/* The functions, once `cued_sd_load` returned NULL. */
const struct cued_sd_api *cued_sd(void);
/* libsystemd's vtable format marker (sd_bus_object_vtable_format), once loaded. */
const unsigned *cued_sd_vtable_format(void);

#define CUED_FB_PATH "/org/sigxcpu/Feedback"
#define CUED_FB_INTERFACE "org.sigxcpu.Feedback"

/// What TriggerFeedback carried. The strings point into the call message and
/// live as long as it; an absent hint is NULL (or 0).
typedef struct cued_fb_trigger {
    const char *app_id;
    const char *event;
    int32_t timeout;
    const char *profile;
    int important;
    const char *sound_file;
} cued_fb_trigger;

/// The Swift side of org.sigxcpu.Feedback. Each method handler replies itself
/// (at once or later, holding a reference to the call) and returns >= 0, or
/// returns a negative errno for sd-bus to answer with an error.
typedef struct cued_fb_handlers {
    int (*trigger)(void *userdata, sd_bus_message *call, const cued_fb_trigger *t);
    int (*end)(void *userdata, sd_bus_message *call, uint32_t id);
    /// The current profile (a static string).
    const char *(*get_profile)(void *userdata);
    /// Sets the profile for `sender` (the caller's unique name); 0, or -EINVAL with *error filled in.
    int (*set_profile)(void *userdata, const char *sender, const char *value, sd_bus_error *error);
} cued_fb_handlers;

/// Registers the object (introspection and Properties come with it). The
/// handlers and userdata must outlive the slot.
int cued_fb_add_object(sd_bus *bus, sd_bus_slot **slot, const cued_fb_handlers *handlers, void *userdata);

int cued_reply_u(sd_bus_message *call, uint32_t value);
int cued_reply_empty(sd_bus_message *call);
int cued_reply_error(sd_bus_message *call, const char *name, const char *message);
void cued_error_set(sd_bus_error *error, const char *name, const char *message);

int cued_emit_feedback_ended(sd_bus *bus, uint32_t id, uint32_t reason);
int cued_emit_profile_changed(sd_bus *bus);

/// Reads a signal's first string argument (NameAcquired, NameLost), or its
/// three (NameOwnerChanged); the strings live as long as the message.
int cued_read_s(sd_bus_message *m, const char **a);
int cued_read_sss(sd_bus_message *m, const char **a, const char **b, const char **c);

/// A second connection to the bus at `address`, made a monitor of calls to
/// org.freedesktop.Notifications.Notify (BecomeMonitor): it receives copies
/// of those calls and can send nothing more.
int cued_monitor_open(const char *address, sd_bus **out, sd_bus_error *error);

/// What a Notify call carried that decides its sound. Strings point into the
/// message; absent ones are NULL; urgency is -1 when absent.
typedef struct cued_notify {
    const char *app_name;
    const char *sound_file;
    const char *sound_name;
    const char *desktop_entry;
    const char *category;
    int suppress_sound;
    int urgency;
} cued_notify;

/// 1 if `m` is a Notify call and was read into *out, 0 if it is another
/// message, negative errno if it is a malformed Notify.
int cued_parse_notify(sd_bus_message *m, cued_notify *out);

/* The XDG Settings portal (xdg-desktop-portal), and the notification server's Inhibited property. */
#define CUED_PORTAL_NAME "org.freedesktop.portal.Desktop"
#define CUED_PORTAL_PATH "/org/freedesktop/portal/desktop"
#define CUED_PORTAL_SETTINGS "org.freedesktop.portal.Settings"

/// One setting of the portal (a ReadAll reply's entry, a SettingChanged signal) whose value is a
/// string (`s`) or a boolean (`b`); settings of other types are skipped. The strings live as long
/// as the message.
typedef struct cued_setting {
    const char *ns;
    const char *key;
    char type;
    const char *s;
    int b;
} cued_setting;
typedef void (*cued_setting_fn)(void *userdata, const cued_setting *setting);

/// ReadAll(namespaces) without waiting (NULL-terminated list): `callback` gets the reply or the
/// error. An activatable portal is started, as GTK's own reads do.
int cued_portal_read_all(sd_bus *bus, sd_bus_slot **slot, const char *const *namespaces,
                         sd_bus_message_handler_t callback, void *userdata, uint64_t timeout_usec);
/// A ReadAll reply's settings (a{sa{sv}}), each to `fn`: how many, or a negative errno.
int cued_portal_settings(sd_bus_message *reply, cued_setting_fn fn, void *userdata);
/// A SettingChanged signal's setting to `fn`: 1, 0 if its value is of another type, or a negative errno.
int cued_portal_setting_changed(sd_bus_message *signal, cued_setting_fn fn, void *userdata);
/// Properties.Get of a boolean without starting the destination (no D-Bus activation).
int cued_get_bool_async(sd_bus *bus, sd_bus_slot **slot, const char *destination, const char *path,
                        const char *interface, const char *property, sd_bus_message_handler_t callback, void *userdata,
                        uint64_t timeout_usec);
/// A Get reply's boolean: 1 and *value, 0 if the value is of another type, or a negative errno.
int cued_read_bool_reply(sd_bus_message *reply, int *value);
/// PropertiesChanged(interface, changed, invalidated): 1 and *value if it changed `property` of
/// `interface` to a boolean, else 0; or a negative errno.
int cued_properties_changed_bool(sd_bus_message *m, const char *interface, const char *property, int *value);
/// A method reply's error name (and *message), or NULL if it is not an error.
const char *cued_reply_error_name(sd_bus_message *m, const char **message);

#endif
