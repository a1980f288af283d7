// sd-bus (libsystemd) for cued's D-Bus face: the vtable of org.sigxcpu.Feedback
// and the variadic calls (message reads, replies, signals), which Swift cannot
// call, wrapped as plain functions. Nothing here keeps state of its own but the
// object registration; every function runs on the bus thread.
#ifndef CUED_CSDBUS_H
#define CUED_CSDBUS_H

#include <stdint.h>
#include <systemd/sd-bus.h>

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

#endif
