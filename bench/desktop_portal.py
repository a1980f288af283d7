#!/usr/bin/python3
"""A stand-in for the desktop's settings on a private session bus (DBUS_SESSION_BUS_ADDRESS), for
the tests and the bench: it behaves as xdg-desktop-portal does towards a client.

- Owns org.freedesktop.portal.Desktop and serves org.freedesktop.portal.Settings (version 2) at
  /org/freedesktop/portal/desktop: ReadAll(namespaces) with xdg-desktop-portal's matching (an empty
  list or an empty string matches all, a trailing `*` globs), Read (its value inside two variants,
  as the real one answers), ReadOne, and the SettingChanged signal when a value changes.
- With --notifications, also owns org.freedesktop.Notifications with a read-only `Inhibited`
  property and PropertiesChanged, as KDE Plasma's notification server does for Do Not Disturb.
- The test drives it on the bus as a desktop's settings backend would change its values:
  org.cued.test.Desktop.Set(namespace, key, value: v) (SettingChanged follows if the value changed),
  Unset(namespace, key), and SetInhibited(b).

Arguments: a JSON object of initial values {namespace: {key: value}} (strings and booleans), then
--notifications, and --without-settings N: the first N calls of ReadAll are answered as
xdg-desktop-portal 1.20 answers when it was started without a backend that has Settings
(UnknownMethod: No such interface). Prints "ready" once it owns its names; runs until killed."""
import json
import sys
from gi.repository import Gio, GLib

import notification_server

PORTAL = """
<node>
  <interface name="org.freedesktop.portal.Settings">
    <method name="ReadAll"><arg type="as" name="namespaces" direction="in"/><arg type="a{sa{sv}}" direction="out"/></method>
    <method name="Read"><arg type="s" direction="in"/><arg type="s" direction="in"/><arg type="v" direction="out"/></method>
    <method name="ReadOne"><arg type="s" direction="in"/><arg type="s" direction="in"/><arg type="v" direction="out"/></method>
    <signal name="SettingChanged"><arg type="s"/><arg type="s"/><arg type="v"/></signal>
    <property name="version" type="u" access="read"/>
  </interface>
  <interface name="org.cued.test.Desktop">
    <method name="Set"><arg type="s" direction="in"/><arg type="s" direction="in"/><arg type="v" direction="in"/></method>
    <method name="Unset"><arg type="s" direction="in"/><arg type="s" direction="in"/></method>
    <method name="SetInhibited"><arg type="b" direction="in"/></method>
  </interface>
</node>
"""
# The stand-in notification server's interface, with KDE's Inhibited property.
NOTIFICATIONS = notification_server.XML.replace("</interface>", '<property name="Inhibited" type="b" access="read"/></interface>')
PATH = "/org/freedesktop/portal/desktop"
portal = Gio.DBusNodeInfo.new_for_xml(PORTAL)
notifications = Gio.DBusNodeInfo.new_for_xml(NOTIFICATIONS)

values = {}  # namespace -> key -> GLib.Variant
for ns, keys in (json.loads(sys.argv[1]) if len(sys.argv) > 1 and sys.argv[1].startswith("{") else {}).items():
    for key, value in keys.items():
        values.setdefault(ns, {})[key] = GLib.Variant("b" if isinstance(value, bool) else "s", value)
with_notifications = "--notifications" in sys.argv
without = int(sys.argv[sys.argv.index("--without-settings") + 1]) if "--without-settings" in sys.argv else 0
state = {"inhibited": False, "conn": None, "owned": 0, "unanswered": without}


def matches(ns, patterns):
    if not patterns or "" in patterns:
        return True
    return any(p == ns or (p.endswith("*") and ns.startswith(p[:-1])) for p in patterns)


def not_found(invocation):
    invocation.return_dbus_error("org.freedesktop.portal.Error.NotFound", "Requested setting not found")


def portal_call(conn, sender, path, iface, method, params, invocation):
    if iface == "org.cued.test.Desktop":
        return control(conn, method, params, invocation)
    if method == "ReadAll" and state["unanswered"] > 0:
        state["unanswered"] -= 1
        return invocation.return_dbus_error("org.freedesktop.DBus.Error.UnknownMethod",
                                            "No such interface \u201corg.freedesktop.portal.Settings\u201d on object at path " + PATH)
    if method == "ReadAll":
        (patterns,) = params.unpack()
        out = {ns: keys for ns, keys in values.items() if matches(ns, patterns)}
        invocation.return_value(GLib.Variant.new_tuple(GLib.Variant("a{sa{sv}}", out)))
    elif method in ("Read", "ReadOne"):
        ns, key = params.unpack()
        if key not in values.get(ns, {}):
            return not_found(invocation)
        v = values[ns][key]
        invocation.return_value(GLib.Variant.new_tuple(GLib.Variant("v", GLib.Variant("v", v)) if method == "Read" else GLib.Variant("v", v)))


def control(conn, method, params, invocation):
    if method == "Set":
        ns, key, value = params.unpack()
        v = params.get_child_value(2).get_variant()
        changed = values.get(ns, {}).get(key) != v
        values.setdefault(ns, {})[key] = v
        if changed:
            conn.emit_signal(None, PATH, "org.freedesktop.portal.Settings", "SettingChanged", GLib.Variant("(ssv)", (ns, key, v)))
    elif method == "Unset":
        ns, key = params.unpack()
        values.get(ns, {}).pop(key, None)
    elif method == "SetInhibited":
        (b,) = params.unpack()
        if b != state["inhibited"]:
            state["inhibited"] = b
            conn.emit_signal(None, "/org/freedesktop/Notifications", "org.freedesktop.DBus.Properties", "PropertiesChanged",
                             GLib.Variant("(sa{sv}as)", ("org.freedesktop.Notifications", {"Inhibited": GLib.Variant("b", b)}, [])))
    invocation.return_value(None)


def portal_property(conn, sender, path, iface, name):
    return GLib.Variant("u", 2) if name == "version" else None



def notify_property(conn, sender, path, iface, name):
    return GLib.Variant("b", state["inhibited"]) if name == "Inhibited" else None


def acquired(conn, name):
    state["owned"] += 1
    if state["owned"] == (2 if with_notifications else 1):
        print("ready", flush=True)


def bus_acquired(conn, name):
    if state["conn"] is not None:
        return
    state["conn"] = conn
    conn.register_object(PATH, portal.interfaces[0], portal_call, portal_property, None)
    conn.register_object(PATH, portal.interfaces[1], portal_call, None, None)
    if with_notifications:
        conn.register_object("/org/freedesktop/Notifications", notifications.interfaces[0], notification_server.call, notify_property, None)
        Gio.bus_own_name_on_connection(conn, "org.freedesktop.Notifications", Gio.BusNameOwnerFlags.NONE,
                                       acquired, lambda *a: sys.exit(1))


Gio.bus_own_name(Gio.BusType.SESSION, "org.freedesktop.portal.Desktop", Gio.BusNameOwnerFlags.NONE,
                 bus_acquired, acquired, lambda *a: sys.exit(1))
GLib.MainLoop().run()
