import CuedProtocol

/// `cuectl canberra [on|off]`: libcanberra's event sounds (GNOME Shell, KDE, GTK's input
/// feedback, feedbackd…) through cued, by its plug-in `libcanberra-cued.so`, or back.
///
/// The switch is a file of the user's (`$XDG_CONFIG_HOME/cued/libcanberra`). At login
/// systemd's user manager runs the package's environment generator, which sets
/// `CANBERRA_DRIVER=cued` for everything the session starts only while the switch is on
/// *and* the plug-in is where libcanberra looks: libcanberra told to load a driver it
/// cannot find plays nothing, so a removed package must not leave the desktop silent.
/// Pure: the caller gathers the facts (files, environments, cued's status).
public enum CanberraRouting {
    public static let driverName = "cued"
    public static let pluginFile = "libcanberra-cued.so"
    /// The environment generator's file name (systemd.environment-generator(7)).
    public static let generatorName = "60-cued-canberra"
    /// Where systemd's user manager looks for environment generators, in its order.
    public static let generatorDirectories = ["/etc/systemd/user-environment-generators",
                                              "/usr/local/lib/systemd/user-environment-generators",
                                              "/usr/lib/systemd/user-environment-generators"]
    /// How a connection of the plug-in names itself (`app NAME via=libcanberra`).
    public static let via = "libcanberra"

    /// The switch file.
    public static func switchPath(environment: [String: String]) -> String {
        let configHome = environment["XDG_CONFIG_HOME"].flatMap { $0.hasPrefix("/") ? $0 : nil }
            ?? ((environment["HOME"] ?? "") + "/.config")
        return configHome + "/cued/libcanberra"
    }

    /// What the switch file says to a reader who finds it.
    public static let switchText = """
        # cued plays libcanberra's event sounds (CANBERRA_DRIVER=cued at login, while
        # cued's plug-in is installed). Turn off with: cuectl canberra off
        """

    /// libcanberra.so.0 where distributions put it, for a machine (`uname -m`).
    public static func libraryCandidates(machine: String) -> [String] {
        let triplets: [String: String] = ["x86_64": "x86_64-linux-gnu", "aarch64": "aarch64-linux-gnu", "armv7l": "arm-linux-gnueabihf",
                                          "i686": "i386-linux-gnu", "i386": "i386-linux-gnu", "ppc64le": "powerpc64le-linux-gnu",
                                          "s390x": "s390x-linux-gnu", "riscv64": "riscv64-linux-gnu"]
        var paths: [String] = []
        if let t = triplets[machine] { paths.append("/usr/lib/\(t)/libcanberra.so.0") }
        return paths + ["/usr/lib64/libcanberra.so.0", "/usr/lib/libcanberra.so.0"]
    }

    /// The plug-in directory compiled into libcanberra (`…/libcanberra-0.30`), read from
    /// the library's bytes: the absolute path its `…/libcanberra-%s` format string names.
    public static func pluginDirectory(inLibrary bytes: [UInt8]) -> String? {
        let marker = Array("/libcanberra-%s".utf8)
        guard bytes.count >= marker.count else { return nil }
        var i = 0
        while i + marker.count <= bytes.count {
            if bytes[i] == marker[0] && bytes[i..<(i + marker.count)].elementsEqual(marker) {
                var start = i
                while start > 0 && bytes[start - 1] != 0 && i - start < 4096 { start -= 1 }
                let dir = String(decoding: bytes[start..<i], as: UTF8.self)
                if dir.hasPrefix("/") { return dir }
            }
            i += 1
        }
        return nil
    }

    /// What `cuectl canberra` and `doctor` look at.
    public struct Facts: Equatable, Sendable {
        /// The switch file exists.
        public var on = false
        /// Where libcanberra looks for drivers; nil: no libcanberra on this machine.
        public var pluginDirectory: String?
        /// `libcanberra-cued.so` is there.
        public var pluginInstalled = false
        /// The generator that reads the switch at login, where it is installed.
        public var generator: String?
        /// `CANBERRA_DRIVER` in cuectl's own environment (the shell's session).
        public var shellValue: String?
        /// `CANBERRA_DRIVER` in the user manager's environment; nil when none answers.
        public var managerValue: String??
        /// Apps whose cues came through the plug-in (cued's status), nil without a cued.
        public var apps: [String]?
        public init() {}
    }

    public static func isCued(_ driver: String?) -> Bool {
        guard let d = driver else { return false }
        return d == driverName || d.hasPrefix(driverName + ",") || d.hasPrefix(driverName + ":")
    }

    /// The apps of a status whose cues came through the plug-in.
    public static func apps(_ status: Status) -> [String] {
        status.apps.keys.sorted().filter { status.apps[$0]!.via.contains(via) }
    }

    /// Why `on` cannot work here, with the fix; nil when it can.
    public static func missing(_ f: Facts) -> (problem: String, fix: String)? {
        guard let dir = f.pluginDirectory else {
            return ("libcanberra is not installed (no libcanberra.so.0): nothing plays through it on this machine",
                    "nothing to do; desktop apps that make event sounds bring it (libcanberra0)")
        }
        if !f.pluginInstalled {
            return ("cued's plug-in is not in \(dir), the one directory libcanberra loads drivers from",
                    "install the cued package, or run `sudo make install-canberra` in cued's checkout")
        }
        if f.generator == nil {
            return ("the login hook \(generatorName) is not in \(generatorDirectories.joined(separator: ", "))",
                    "install the cued package, or run `sudo make install-canberra` in cued's checkout")
        }
        return nil
    }

    /// The danger: this session names cued's driver and libcanberra cannot find it, so
    /// every libcanberra sound of the session is silent.
    public static func silencing(_ f: Facts) -> Bool {
        f.pluginDirectory != nil && !f.pluginInstalled && (isCued(f.shellValue) || isCued(f.managerValue ?? nil))
    }

    /// `cuectl canberra`: the switch, what it needs, and where it is in force.
    public static func report(_ f: Facts) -> [String] {
        var lines = ["libcanberra through cued: " + (f.on ? "on" : "off")]
        if let dir = f.pluginDirectory {
            lines.append("plug-in: \(dir)/\(pluginFile) " + (f.pluginInstalled ? "installed" : "missing"))
        } else {
            lines.append("plug-in: libcanberra is not installed")
        }
        lines.append("login hook: " + (f.generator ?? "missing (\(generatorName))"))
        lines.append("this shell: " + (f.shellValue.map { "CANBERRA_DRIVER=\($0)" } ?? "CANBERRA_DRIVER unset"))
        switch f.managerValue {
        case .none: lines.append("your session (systemd --user): no user manager answers")
        case .some(.none): lines.append("your session (systemd --user): CANBERRA_DRIVER unset")
        case .some(.some(let v)): lines.append("your session (systemd --user): CANBERRA_DRIVER=\(v)")
        }
        if let apps = f.apps {
            lines.append("apps through it: " + (apps.isEmpty ? "none yet" : apps.joined(separator: ", ")))
        }
        if silencing(f) {
            lines.append("warning: CANBERRA_DRIVER=cued without the plug-in: libcanberra's sounds are silent; cuectl canberra off, and unset CANBERRA_DRIVER")
        }
        return lines
    }

    /// What `on` and `off` say once done. `managerChanged`: the user manager took the change.
    public static func switched(_ on: Bool, managerChanged: Bool) -> [String] {
        if on {
            return ["on: libcanberra's sounds go through cued for what your session starts "
                        + (managerChanged ? "from now on; programs already running (GNOME Shell among them) change at your next login"
                                          : "after your next login, GNOME Shell among them"),
                    "in a terminal, for what you start there: export CANBERRA_DRIVER=cued"]
        }
        return ["off: libcanberra's sounds go their own way again for what your session starts "
                    + (managerChanged ? "from now on; programs already running change at your next login" : "after your next login"),
                "in a terminal that exported it: unset CANBERRA_DRIVER"]
    }
}
