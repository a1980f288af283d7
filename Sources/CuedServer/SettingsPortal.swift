import CSDBus
import CuedCore
import CuedSystem
import Logging
#if canImport(Glibc)
import Glibc
#endif

/// The desktop's sound settings on the bus thread: the XDG Settings portal (ReadAll at each
/// connection and whenever the portal appears on the bus, then its SettingChanged signals), KDE's
/// KConfig change signal for kdeglobals (its portal backend does not signal the Sounds group), and
/// the notification server's Inhibited property (read without starting a server). Every call is
/// asynchronous: the bus thread, the event loop and the audio thread never wait on the desktop.
/// What it reads goes to the host whenever it changes (`desktopChanged`).
extension DesktopBus {
    /// How long a call to the portal or the notification server may take before it counts as unanswered.
    static let desktopCallTimeoutUs: UInt64 = 5_000_000

    /// On a new connection: the matches for the desktop's news, then a first read of everything.
    func followDesktop(_ c: BusConnection) {
        let owner = "type='signal',sender='org.freedesktop.DBus',interface='org.freedesktop.DBus',member='NameOwnerChanged'"
        let rules: [(String, (DesktopBus, OpaquePointer) -> Void)] = [
            ("type='signal',path='\(CUED_PORTAL_PATH)',interface='\(CUED_PORTAL_SETTINGS)',member='SettingChanged'", { bus, m in
                bus.portalSettingChanged(m)
            }),
            ("\(owner),arg0='\(CUED_PORTAL_NAME)'", { bus, m in
                var name: UnsafePointer<CChar>?, old: UnsafePointer<CChar>?, new: UnsafePointer<CChar>?
                guard cued_read_sss(m, &name, &old, &new) >= 0, let new else { return }
                bus.portalRetry = PortalRetry()  // a new portal (or none): asked afresh
                if new.pointee != 0 { bus.readPortal() } else { bus.portalGone("absent: the portal left the bus; the last values read stay") }
            }),
            // KDE's portal signals no change of kdeglobals' Sounds group: KConfig's own signal says one may have changed.
            ("type='signal',path='/kdeglobals',interface='org.kde.kconfig.notify',member='ConfigChanged'", { bus, _ in bus.readPortal() }),
            ("type='signal',path='/org/freedesktop/Notifications',interface='org.freedesktop.DBus.Properties',member='PropertiesChanged',arg0='\(PortalSettings.notificationServer)'", { bus, m in
                var value: Int32 = 0
                if cued_properties_changed_bool(m, PortalSettings.notificationServer, "Inhibited", &value) > 0 { bus.setInhibited(value != 0) }
            }),
            ("\(owner),arg0='\(PortalSettings.notificationServer)'", { bus, m in
                var name: UnsafePointer<CChar>?, old: UnsafePointer<CChar>?, new: UnsafePointer<CChar>?
                guard cued_read_sss(m, &name, &old, &new) >= 0, let new else { return }
                if new.pointee != 0 { bus.readInhibited() } else { bus.setInhibited(nil) }
            }),
        ]
        for (rule, handler) in rules {
            let r = c.addMatch(rule, owner: self, handler)
            if r < 0 { logger.warning("D-Bus: cannot add a match", metadata: ["rule": "\(rule)", "error": "\(errnoString(-r))"]) }
        }
        readPortal()
        readInhibited()
    }

    /// The bus went away: the values read stay (the desktop did not change them), the portal's status says so.
    func desktopLost() {
        portalCall = .idle
        portalRetry = PortalRetry()
        portalGone("absent: no session bus; the last values read stay")
    }

    /// ReadAll of the namespaces cued follows; one call at a time (a change signalled meanwhile reads again after it).
    func readPortal() {
        guard let c = link else { return }
        switch portalCall {
        case .reading, .again: portalCall = .again; return
        case .idle: break
        }
        var names = PortalSettings.namespaces.map { strdup($0) }
        names.append(nil)
        defer { for p in names { free(p) } }
        let r = names.withUnsafeMutableBufferPointer { buffer in
            buffer.baseAddress!.withMemoryRebound(to: UnsafePointer<CChar>?.self, capacity: buffer.count) { list in
                cued_portal_read_all(c.bus, nil, list, { m, ud, _ in
                    guard let m, let ud else { return 0 }
                    Unmanaged<DesktopBus>.fromOpaque(ud).takeUnretainedValue().portalReplied(m)
                    return 0
                }, Unmanaged.passUnretained(self).toOpaque(), Self.desktopCallTimeoutUs)
            }
        }
        guard r >= 0 else {
            portalGone("error: cannot call the portal: \(errnoString(-r))")
            return
        }
        portalCall = .reading
        if portal.portal != "following" { portal.portal = "reading"; sendDesktop() }
    }

    private func portalReplied(_ m: OpaquePointer) {
        let again = portalCall == .again
        portalCall = .idle
        defer { if again { readPortal() } }
        var message: UnsafePointer<CChar>?
        if let name = cued_reply_error_name(m, &message).map({ String(cString: $0) }) {
            let why = message.map { String(cString: $0) } ?? name
            switch name {
            case "org.freedesktop.DBus.Error.ServiceUnknown", "org.freedesktop.DBus.Error.NameHasNoOwner":
                portalGone("absent: no \(CUED_PORTAL_NAME) on the session bus; cued's own settings apply (read again when it appears)")
            default:
                // It answers, and not with Settings (a portal started without its backend: UnknownMethod;
                // or no reply in time): asked again a few times, each later than the last.
                let again = portalRetry.next(now: MonotonicClock.now())
                portalGone("error: \(name): \(why)" + (again.map { "; asked again in \($0) s" } ?? "; asked again when the portal restarts"))
            }
            return
        }
        portalRetry = PortalRetry()
        let collected = SettingsCollector()
        let r = cued_portal_settings(m, { ud, s in
            guard let ud, let s else { return }
            Unmanaged<SettingsCollector>.fromOpaque(ud).takeUnretainedValue().take(s.pointee)
        }, Unmanaged.passUnretained(collected).toOpaque())
        guard r >= 0 else {
            portalGone("error: a ReadAll reply cued cannot read: \(errnoString(-r))")
            return
        }
        portal.replaceAll(collected.settings)
        portal.portal = "following"
        logger.info("D-Bus: following the desktop's sound settings through the Settings portal", metadata: ["settings": "\(collected.settings.count)"])
        sendDesktop()
    }

    private func portalSettingChanged(_ m: OpaquePointer) {
        let collected = SettingsCollector()
        let r = cued_portal_setting_changed(m, { ud, s in
            guard let ud, let s else { return }
            Unmanaged<SettingsCollector>.fromOpaque(ud).takeUnretainedValue().take(s.pointee)
        }, Unmanaged.passUnretained(collected).toOpaque())
        guard r > 0, let s = collected.settings.first else { return }
        portal.set(s.namespace, s.key, s.value)
        sendDesktop()
    }

    private func portalGone(_ why: String) {
        if portal.portal != why { logger.info("D-Bus: the desktop's settings: \(why)") }
        portal.portal = why
        sendDesktop()
    }

    /// The notification server's Inhibited (KDE's Do Not Disturb), if a server runs: none is started for it.
    func readInhibited() {
        guard let c = link else { return }
        let r = cued_get_bool_async(c.bus, nil, PortalSettings.notificationServer, "/org/freedesktop/Notifications",
                                    PortalSettings.notificationServer, "Inhibited", { m, ud, _ in
            guard let m, let ud else { return 0 }
            let bus = Unmanaged<DesktopBus>.fromOpaque(ud).takeUnretainedValue()
            var value: Int32 = 0
            // No server, or one without the property (GNOME Shell's, mako, dunst…): nothing said.
            bus.setInhibited(cued_reply_error_name(m, nil) == nil && cued_read_bool_reply(m, &value) > 0 ? value != 0 : nil)
            return 0
        }, Unmanaged.passUnretained(self).toOpaque(), Self.desktopCallTimeoutUs)
        if r < 0 { logger.debug("D-Bus: cannot ask the notification server for Inhibited", metadata: ["error": "\(errnoString(-r))"]) }
    }

    private func setInhibited(_ value: Bool?) {
        portal.inhibited = value
        sendDesktop()
    }

    /// Tells the host what the desktop says, if it changed.
    func sendDesktop() {
        let d = portal.sound
        guard d != sentDesktop else { return }
        sentDesktop = d
        host.desktopChanged(d)
    }
}

/// Where a read of the portal stands: at most one ReadAll is under way.
/// When a portal that answered without its Settings is asked again: 1, 2, 4 … 32 s after each
/// answer (about a minute in all: long enough for a backend that starts late), then only when the
/// portal's owner changes. Bounded, so that an idle cued does not keep waking for a portal that
/// will never have them.
struct PortalRetry: Equatable {
    static let tries = 6
    private(set) var count = 0
    /// The next ask (monotonic ns), nil: none due.
    var at: UInt64?

    /// Schedules the next ask after a failed one; its delay in seconds, nil once the tries are spent.
    mutating func next(now: UInt64) -> Int? {
        guard count < Self.tries else { at = nil; return nil }
        let seconds = 1 << count
        count += 1
        at = now + UInt64(seconds) * 1_000_000_000
        return seconds
    }
}

enum PortalCall: Equatable {
    case idle
    case reading
    /// Reading, and something changed meanwhile: read again once it answers.
    case again
}

/// The settings a portal message carried, copied off it (its strings live only as long as it).
private final class SettingsCollector {
    var settings: [(namespace: String, key: String, value: PortalSettings.Value)] = []
    func take(_ s: cued_setting) {
        guard let ns = s.ns, let key = s.key else { return }
        switch s.type {
        case CChar(UInt8(ascii: "s")): if let v = s.s { settings.append((String(cString: ns), String(cString: key), .string(String(cString: v)))) }
        case CChar(UInt8(ascii: "b")): settings.append((String(cString: ns), String(cString: key), .bool(s.b != 0)))
        default: break
        }
    }
}
