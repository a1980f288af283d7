/* The desktop's settings on the session bus: the XDG Settings portal's ReadAll and
   SettingChanged, and a boolean property read without starting its owner (KDE's
   notification server's Inhibited). Calls are asynchronous: the bus thread never waits. */
#include "csdbus.h"

#include <errno.h>
#include <string.h>

#include "sdcalls.h"

int cued_portal_read_all(sd_bus *bus, sd_bus_slot **slot, const char *const *namespaces,
                         sd_bus_message_handler_t callback, void *userdata, uint64_t timeout_usec) {
    sd_bus_message *m = NULL;
    int r = sd_bus_message_new_method_call(bus, &m, CUED_PORTAL_NAME, CUED_PORTAL_PATH, CUED_PORTAL_SETTINGS, "ReadAll");
    if (r < 0) return r;
    r = sd_bus_message_append_strv(m, (char **)namespaces);
    if (r >= 0) r = sd_bus_call_async(bus, slot, m, callback, userdata, timeout_usec);
    sd_bus_message_unref(m);
    return r;
}

/* The value of the variant the message is at, if a string or a boolean, into *out; 0 if of another
   type (skipped). */
static int read_setting_value(sd_bus_message *m, cued_setting *out) {
    char type = 0;
    const char *contents = NULL;
    int r = sd_bus_message_peek_type(m, &type, &contents);
    if (r < 0) return r;
    if (type == 'v' && contents != NULL && strcmp(contents, "s") == 0) {
        out->type = 's';
        return cued_read_variant(m, 's', &out->s);
    }
    if (type == 'v' && contents != NULL && strcmp(contents, "b") == 0) {
        out->type = 'b';
        return cued_read_variant(m, 'b', &out->b);
    }
    r = sd_bus_message_skip(m, "v");
    return r < 0 ? r : 0;
}

int cued_portal_settings(sd_bus_message *reply, cued_setting_fn fn, void *userdata) {
    int count = 0;
    int r = sd_bus_message_enter_container(reply, 'a', "{sa{sv}}");
    if (r < 0) return r;
    while ((r = sd_bus_message_enter_container(reply, 'e', "sa{sv}")) > 0) {
        cued_setting s;
        memset(&s, 0, sizeof s);
        if ((r = sd_bus_message_read_basic(reply, 's', &s.ns)) < 0) return r;
        if ((r = sd_bus_message_enter_container(reply, 'a', "{sv}")) < 0) return r;
        while ((r = sd_bus_message_enter_container(reply, 'e', "sv")) > 0) {
            s.type = 0;
            if ((r = sd_bus_message_read_basic(reply, 's', &s.key)) < 0) return r;
            if ((r = read_setting_value(reply, &s)) < 0) return r;
            if (r > 0) { fn(userdata, &s); count++; }
            if ((r = sd_bus_message_exit_container(reply)) < 0) return r;
        }
        if (r < 0) return r;
        if ((r = sd_bus_message_exit_container(reply)) < 0) return r;
        if ((r = sd_bus_message_exit_container(reply)) < 0) return r;
    }
    if (r < 0) return r;
    r = sd_bus_message_exit_container(reply);
    return r < 0 ? r : count;
}

int cued_portal_setting_changed(sd_bus_message *signal, cued_setting_fn fn, void *userdata) {
    cued_setting s;
    memset(&s, 0, sizeof s);
    int r = sd_bus_message_read(signal, "ss", &s.ns, &s.key);
    if (r < 0) return r;
    if ((r = read_setting_value(signal, &s)) <= 0) return r;
    fn(userdata, &s);
    return 1;
}

int cued_get_bool_async(sd_bus *bus, sd_bus_slot **slot, const char *destination, const char *path,
                        const char *interface, const char *property, sd_bus_message_handler_t callback, void *userdata,
                        uint64_t timeout_usec) {
    sd_bus_message *m = NULL;
    int r = sd_bus_message_new_method_call(bus, &m, destination, path, "org.freedesktop.DBus.Properties", "Get");
    if (r < 0) return r;
    /* Only a server that runs: asking must not start one (D-Bus activation). */
    r = sd_bus_message_set_auto_start(m, 0);
    if (r >= 0) r = sd_bus_message_append(m, "ss", interface, property);
    if (r >= 0) r = sd_bus_call_async(bus, slot, m, callback, userdata, timeout_usec);
    sd_bus_message_unref(m);
    return r;
}

int cued_read_bool_reply(sd_bus_message *reply, int *value) { return cued_read_variant(reply, 'b', value); }

int cued_properties_changed_bool(sd_bus_message *m, const char *interface, const char *property, int *value) {
    const char *iface = NULL;
    int r = sd_bus_message_read(m, "s", &iface);
    if (r < 0) return r;
    if (strcmp(iface, interface) != 0) return 0;
    int found = 0;
    if ((r = sd_bus_message_enter_container(m, 'a', "{sv}")) < 0) return r;
    while ((r = sd_bus_message_enter_container(m, 'e', "sv")) > 0) {
        const char *key = NULL;
        if ((r = sd_bus_message_read_basic(m, 's', &key)) < 0) return r;
        if (strcmp(key, property) == 0) {
            r = cued_read_variant(m, 'b', value);
            if (r < 0) return r;
            found = r;
        }
        if (r == 0 || strcmp(key, property) != 0) {
            if ((r = sd_bus_message_skip(m, "v")) < 0) return r;
        }
        if ((r = sd_bus_message_exit_container(m)) < 0) return r;
    }
    if (r < 0) return r;
    return found;
}

const char *cued_reply_error_name(sd_bus_message *m, const char **message) {
    const sd_bus_error *e = sd_bus_message_get_error(m);
    if (e == NULL || e->name == NULL) return NULL;
    if (message != NULL) *message = e->message;
    return e->name;
}
