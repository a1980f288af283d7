#!/usr/bin/python3
"""A minimal notification server for the tests: owns org.freedesktop.Notifications
on the session bus (DBUS_SESSION_BUS_ADDRESS) and answers Notify with an id, as
the user's real notification daemon would (cued only watches those calls).
Prints "ready" once it owns the name; runs until killed."""
import sys
from gi.repository import Gio, GLib

XML = """
<node>
  <interface name="org.freedesktop.Notifications">
    <method name="Notify">
      <arg type="s" direction="in"/><arg type="u" direction="in"/><arg type="s" direction="in"/>
      <arg type="s" direction="in"/><arg type="s" direction="in"/><arg type="as" direction="in"/>
      <arg type="a{sv}" direction="in"/><arg type="i" direction="in"/><arg type="u" direction="out"/>
    </method>
    <method name="GetCapabilities"><arg type="as" direction="out"/></method>
    <method name="GetServerInformation">
      <arg type="s" direction="out"/><arg type="s" direction="out"/><arg type="s" direction="out"/><arg type="s" direction="out"/>
    </method>
    <method name="CloseNotification"><arg type="u" direction="in"/></method>
  </interface>
</node>
"""
count = [0]

def call(conn, sender, path, iface, method, params, invocation):
    if method == "Notify":
        count[0] += 1
        invocation.return_value(GLib.Variant("(u)", (count[0],)))
    elif method == "GetCapabilities":
        invocation.return_value(GLib.Variant("(as)", (["body", "sound"],)))
    elif method == "GetServerInformation":
        invocation.return_value(GLib.Variant("(ssss)", ("test", "cued-tests", "1", "1.2")))
    else:
        invocation.return_value(None)

def acquired(conn, name):
    print("ready", flush=True)

def bus_acquired(conn, name):
    conn.register_object("/org/freedesktop/Notifications", node.interfaces[0], call, None, None)

if __name__ == "__main__":
    node = Gio.DBusNodeInfo.new_for_xml(XML)
    Gio.bus_own_name(Gio.BusType.SESSION, "org.freedesktop.Notifications", Gio.BusNameOwnerFlags.NONE,
                     bus_acquired, acquired, lambda *a: sys.exit(1))
    GLib.MainLoop().run()
