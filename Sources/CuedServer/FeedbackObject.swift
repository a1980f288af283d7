import CSDBus
import CuedProtocol
import CuedSystem
#if canImport(Glibc)
import Glibc
#endif

/// org.sigxcpu.Feedback's methods and property, and the Notify calls the monitor sees: what
/// the bus thread does with each message (from sd_bus_process), handed to the host.
extension DesktopBus {
    // MARK: - org.sigxcpu.Feedback (bus thread, from sd_bus_process)

    func onTrigger(_ call: OpaquePointer?, _ t: cued_fb_trigger) -> Int32 {
        guard let call else { return -EINVAL }
        let app = t.app_id.map { String(cString: $0) } ?? ""
        let event = t.event.map { String(cString: $0) } ?? ""
        if app.isEmpty { return cued_reply_error(call, "org.freedesktop.DBus.Error.InvalidArgs", "Invalid app id: it is empty") }
        if event.isEmpty { return cued_reply_error(call, "org.freedesktop.DBus.Error.InvalidArgs", "Invalid event: it is empty") }
        let hintProfile = t.profile.map { String(cString: $0) }
        if let p = hintProfile, Profile(rawValue: p) == nil {
            return cued_reply_error(call, "org.freedesktop.DBus.Error.InvalidArgs",
                                    "Invalid hints: profile '\(p)' is not one of full, quiet, silent")
        }
        let id = nextID
        nextID = nextID == UInt32.max ? 1 : nextID + 1
        let r = cued_reply_u(call, id)
        if r < 0 { return r }
        let sender = sd.sd_bus_message_get_sender!(call).map { String(cString: $0) } ?? ""
        host.trigger(FeedbackTrigger(id: id, sender: sender, appID: app, event: event, timeout: max(t.timeout, -1),
                                     profile: hintProfile, important: t.important != 0,
                                     soundFile: t.sound_file.map { String(cString: $0) }))
        return 1
    }

    func onEnd(_ call: OpaquePointer?, _ id: UInt32) -> Int32 {
        guard let call else { return -EINVAL }
        // As feedbackd: ending an id that has ended (or never was) is not an error.
        let r = cued_reply_empty(call)
        if r < 0 { return r }
        host.end(id)
        return 1
    }

    func profileCString() -> UnsafePointer<CChar>? {
        let p = profile.withLock { $0 }
        return FeedbackProfiles.cString(Profile(rawValue: p) ?? .full)
    }

    func onSetProfile(_ value: String, sender: String, _ error: UnsafeMutablePointer<sd_bus_error>?) -> Int32 {
        guard Profile(rawValue: value) != nil else {
            cued_error_set(error, "org.freedesktop.DBus.Error.InvalidArgs", "Profile '\(value)' is not one of full, quiet, silent")
            return -EINVAL
        }
        host.setProfile(value, sender: sender)
        return 0
    }

    // MARK: - Notifications (bus thread)

    func seen(_ message: OpaquePointer) {
        var n = cued_notify()
        let r = cued_parse_notify(message, &n)
        if r < 0 {
            logger.debug("D-Bus: a malformed Notify call ignored", metadata: ["error": "\(errnoString(-r))"])
            return
        }
        guard r > 0 else { return }
        func s(_ p: UnsafePointer<CChar>?) -> String? { p.map { String(cString: $0) } }
        host.notified(NotificationSeen(appName: s(n.app_name) ?? "", soundFile: s(n.sound_file), soundName: s(n.sound_name),
                                       desktopEntry: s(n.desktop_entry), category: s(n.category),
                                       suppressSound: n.suppress_sound != 0, urgency: n.urgency >= 0 ? Int(n.urgency) : nil))
    }
}
