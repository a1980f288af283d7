import CuedClient
import CuedProtocol
import Foundation
import Testing
import TestSupport

/// cued's libcanberra plug-in (canberra/cued-driver.c) inside real libcanberra clients,
/// against the real daemon recording to a WAV: a long-lived context (libcanberra itself
/// through ctypes, as GNOME Shell and GSound hold one), GSound through python3-gi,
/// `canberra-gtk-play` under Xvfb, Debian's feedbackd, 100 contexts at once and hostile
/// properties. Each sound is found sample-exact in the capture. The fallback to
/// libcanberra's pulse driver and cued restarted under a live context are
/// `CanberraPipeWireTests` (a private PipeWire).
@Suite(.timeLimit(.minutes(3)), .enabled(if: CanberraSandbox.unavailableReason == nil, Comment(rawValue: CanberraSandbox.unavailableReason ?? "")))
struct CanberraTests {
    /// cued recording to a WAV, the fixture themes in its data directory.
    static func cued(config: String? = nil) throws -> DaemonHarness {
        let d = try DaemonHarness(args: ["--sink", "wav:%DIR%/capture.wav"], config: config)
        try CanberraFixture.install(dataHome: d.dir.file("data"))
        return d
    }

    static func left(_ d: DaemonHarness) -> [Int16] { (try? DesktopBusTests.left(d)) ?? [] }

    static func heard(_ d: DaemonHarness, _ sound: [Int16], count: Int = 1) -> Bool {
        eventually(timeout: 5) {
            let samples = left(d)
            var from = 0, found = 0
            while found < count, let at = DesktopBusTests.find(sound, in: samples, from: from) { found += 1; from = at + sound.count }
            return found >= count
        }
    }

    @Test func aLongLivedContextPlaysCallsBackOnceFromItsOwnThreadCancelsAndCaches() throws {
        let d = try Self.cued()
        let sandbox = try CanberraSandbox()
        let env = CanberraSandbox.environment(d.environment)
        let file = CanberraFixture.filePath(d.dir.file("data"))
        let run = try sandbox.client([
            ["props", ["application.name": "Canberra Test"]],
            ["play", 1, ["event.id": "cuedtest-bell"]],
            ["wait_callbacks", 1, 5],
            ["play", 2, ["event.id": "cuedtest-long"]],
            ["sleep", 0.2],
            ["playing", 2],
            ["cancel", 2],
            ["playing", 2],
            ["play", 3, ["event.id": "cuedtest-no-such-sound"]],
            ["sleep", 0.1],
            // Apart, so that each is heard alone (cued mixes sounds that overlap).
            ["play", 4, ["event.id": "cuedtest-bell", "canberra.volume": "-6"]],
            ["sleep", 0.1],
            ["play", 5, ["event.id": "cuedtest-bell", "canberra.enable": "0"]],
            ["cache", ["event.id": "cuedtest-other"]],
            ["play", 6, ["event.id": "cuedtest-bell", "canberra.xdg-theme.name": "cuedalt"]],
            ["sleep", 0.1],
            ["play", 7, ["event.id": "cuedtest-no-such-sound", "media.filename": file]],
            ["sleep", 0.1],
            ["play_nocb", 8, ["event.id": "cuedtest-bell"]],
            ["sleep", 0.1],
            ["play", 9, ["event.id": "cuedtest-other"]],
            ["wait_callbacks", 6, 10],
            ["sleep", 0.1],
        ], env: env)

        // Exactly one callback per accepted play, none for a refused one, none on the caller's thread.
        #expect(run.callbacks.allSatisfy { !$0.callerThread }, "\(run)")
        #expect(run.codes(1) == [CA.success] && run.codes(4) == [CA.success] && run.codes(6) == [CA.success]
                && run.codes(7) == [CA.success] && run.codes(9) == [CA.success], "\(run)")
        #expect(run.codes(2) == [CA.canceled], "\(run)")
        // A sound cued looks up first: refused at once if the reply came within the call, else by its callback.
        #expect((run.ret(3) == CA.notFound && run.codes(3).isEmpty) || (run.ret(3) == CA.success && run.codes(3) == [CA.notFound]), "\(run)")
        #expect(run.ret(5) == CA.disabled && run.codes(5).isEmpty, "\(run)")
        #expect(run.codes(8).isEmpty)
        #expect(run.callbacks.count == 6 + run.codes(3).count, "\(run)")
        let playing = run.calls.filter { $0.op == "playing" }.map(\.playing)
        #expect(playing == [1, 0], "\(run)")
        #expect(run.calls.first { $0.op == "cache" }?.ret == CA.success, "\(run)")
        // The caller waits on cued at most a few milliseconds (the first play also opens the driver).
        let slow = run.calls.dropFirst(2).filter { $0.op.hasPrefix("play") && $0.ms > 20 }
        #expect(slow.isEmpty, "calls that took over 20 ms: \(slow)")

        // Heard: the bell, the bell 6 dB down, the named theme's bell, the file.
        #expect(Self.heard(d, CanberraFixture.bell, count: 2))
        #expect(Self.heard(d, CanberraFixture.altBell))
        #expect(Self.heard(d, CanberraFixture.file))
        #expect(Self.heard(d, CanberraFixture.other))
        let half = CanberraFixture.bell.map { Int16((Double($0) * pow(10, -6.0 / 20)).rounded()) }
        let samples = Self.left(d)
        let quieter = (0...(samples.count - half.count)).contains { i in
            samples[i] != 0 && abs(Int(samples[i]) - Int(half[0])) <= 1
                && zip(samples[i..<(i + half.count)], half).allSatisfy { abs(Int($0) - Int($1)) <= 1 }
        }
        #expect(quieter, "the -6 dB bell is not in the capture")
        let status = try d.status()
        #expect(status.apps["Canberra-Test"]?.via == ["libcanberra"], "\(status.apps)")
        #expect(status.apps["Canberra-Test"]?.played == 7, "\(status.apps)")  // all but the one not found and the one disabled
        #expect(eventually { (try? d.status().clients) == 1 }, "the context's connection outlived it")  // 1: status's own
    }

    /// GSound (python3-gi) as feedbackd and GNOME apps use it, and canberra-gtk-play, a
    /// process per sound, under Xvfb.
    @Test(.enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/Xvfb") && FileManager.default.isExecutableFile(atPath: "/usr/bin/canberra-gtk-play")))
    func gsoundAndCanberraGtkPlaySoundThroughCued() throws {
        let d = try Self.cued()
        let sandbox = try CanberraSandbox()
        var env = CanberraSandbox.environment(d.environment)
        // GSound's own calls: play_full with its callback, a GCancellable cancelled, cache, volume,
        // and canberra.enable=0 (which libcanberra itself refuses).
        let gsound = """
            import gi, sys
            gi.require_version('GSound', '1.0')
            from gi.repository import GSound, Gio, GLib
            ctx = GSound.Context(); ctx.init()
            ctx.set_attributes({"application.name": "GSound Test"})
            loop = GLib.MainLoop(); out = []
            def done(c, res, name):
                try: c.play_full_finish(res); out.append(name + " ok")
                except GLib.Error as e: out.append(name + " " + e.message)
                if len(out) == 4: loop.quit()
            print("cache", ctx.cache({"event.id": "cuedtest-other"}))
            ctx.play_full({"event.id": "cuedtest-bell"}, None, done, "bell")
            ctx.play_full({"event.id": "cuedtest-missing"}, None, done, "missing")
            cancel = Gio.Cancellable()
            ctx.play_full({"event.id": "cuedtest-long"}, cancel, done, "long")
            GLib.timeout_add(200, cancel.cancel)
            GLib.timeout_add(400, lambda: ctx.play_full({"event.id": "cuedtest-other", "canberra.volume": "-6"}, None, done, "softer"))
            try: ctx.play_simple({"event.id": "cuedtest-bell", "canberra.enable": "0"}, None)
            except GLib.Error as e: print("enable=0", e.message)
            GLib.timeout_add(10000, loop.quit); loop.run()
            print(" | ".join(sorted(out)))
            """
        let g = try sandbox.run(["/usr/bin/python3", "-c", gsound], env: env)
        #expect(g.status == 0 && g.out == "cache True\nenable=0 Sound disabled\nbell ok | long Operation was cancelled | missing File or data not found | softer ok\n", "\(g)")

        let xvfb = try Subprocess("/usr/bin/Xvfb", ["-displayfd", "1", "-nolisten", "tcp", "-screen", "0", "320x240x24"],
                                  stdout: d.dir.file("xvfb.out"), stderr: d.dir.file("xvfb.err"))
        defer { xvfb.stop(grace: 2) }
        var display = ""
        #expect(eventually { display = ((try? String(contentsOfFile: d.dir.file("xvfb.out"), encoding: .utf8)) ?? "").trimmingCharacters(in: .whitespacesAndNewlines); return !display.isEmpty })
        env["DISPLAY"] = ":" + display
        env["GSETTINGS_BACKEND"] = "memory"
        let bell = try sandbox.run(["/usr/bin/canberra-gtk-play", "-i", "cuedtest-bell"], env: env, timeout: 20)
        #expect(bell.status == 0, "\(bell)")
        let file = try sandbox.run(["/usr/bin/canberra-gtk-play", "-f", CanberraFixture.filePath(d.dir.file("data"))], env: env, timeout: 20)
        #expect(file.status == 0, "\(file)")
        let none = try sandbox.run(["/usr/bin/canberra-gtk-play", "-i", "cuedtest-missing"], env: env, timeout: 20)
        #expect(none.status == 1 && none.err.contains("Failed to play sound"), "\(none)")
        #expect(Self.heard(d, CanberraFixture.bell))  // canberra-gtk-play's, alone (GSound's sounded with the long one)
        #expect(Self.heard(d, CanberraFixture.file))
        let status = try d.status()
        #expect(status.apps["GSound-Test"]?.via == ["libcanberra"] && status.apps["GSound-Test"]?.played == 3, "\(status.apps)")
        #expect(status.apps["canberra-gtk-play"]?.via == ["libcanberra"] && status.apps["canberra-gtk-play"]?.played == 2, "\(status.apps)")
    }

    /// feedbackd (Debian 12's 0.0.x, Debian 13's 0.8) plays its theme's sounds through GSound: started with
    /// CANBERRA_DRIVER=cued, fbcli's event sounds through cued.
    @Test(.enabled(if: PrivateBus.unavailableReason == nil))
    func feedbackdSoundsItsThemeThroughTheDriver() throws {
        let bus = try PrivateBus()
        let d = try Self.cued()
        let sandbox = try CanberraSandbox()
        let theme = """
            { "name": "cued-canberra", "profiles": [ { "name": "full", "feedbacks": [
              { "event-name": "message-new-instant", "type": "Sound", "effect": "cuedtest-bell" } ] } ] }
            """
        try theme.write(toFile: bus.dir.file("theme.json"), atomically: true, encoding: .utf8)
        var env = CanberraSandbox.environment(d.environment)
        env["FEEDBACK_THEME"] = bus.dir.file("theme.json")
        let (path, args) = sandbox.wrap(["/usr/libexec/feedbackd"])
        try bus.spawn(path, args, env: env, onStack: false)
        #expect(eventually { bus.owner() != nil }, "feedbackd did not take its name")
        // fbcli ends the feedback when its stdin closes: hold it open with a FIFO.
        let fifo = bus.dir.file("stdin")
        #expect(mkfifo(fifo, 0o600) == 0)
        let holder = open(fifo, O_RDWR)
        defer { close(holder) }
        let fbcli = try bus.spawn("/usr/bin/fbcli", ["-E", "message-new-instant"], stdin: fifo, stdout: bus.dir.file("fbcli.out"))
        #expect(fbcli.wait(timeout: 20) == 0)
        #expect(Self.heard(d, CanberraFixture.bell), "\(d.readStderr())")
        let all = try d.status().apps
        let apps = all.filter { $0.value.via == ["libcanberra"] }
        #expect(apps.count == 1 && apps.first?.value.played == 1, "\(all)")
    }

    /// 100 contexts at once, each with a play: one callback each, and nothing left behind
    /// (connections, threads, descriptors) once they are destroyed.
    @Test func aHundredContextsAtOnceGetOneCallbackEachAndLeaveNothingBehind() throws {
        let d = try Self.cued()
        let sandbox = try CanberraSandbox()
        let run = try sandbox.client([
            ["play", 1, ["event.id": "cuedtest-bell"]],
            ["wait_callbacks", 1, 5],
            ["fds"],
            ["contexts", 100, ["event.id": "cuedtest-bell"]],
            ["fds"],
        ], env: CanberraSandbox.environment(d.environment))
        // Each play goes to cued behind its context's greeting, none waits for it: all accepted.
        let rets = run.calls.first { $0.op == "contexts" }?.rets ?? []
        let accepted = Set(rets.indices.filter { rets[$0] == CA.success }.map { $0 + 1 })
        #expect(rets.count == 100 && accepted.count == 100, "returns: \(rets)")
        let perContext = Dictionary(grouping: run.callbacks.filter { $0.context > 0 }, by: \.context)
        #expect(Set(perContext.keys) == accepted && perContext.values.allSatisfy { $0.count == 1 },
                "callbacks per context: \(perContext.mapValues(\.count).filter { $0.value != 1 }), returns: \(rets)")
        #expect(try d.status().played == 1 + accepted.count)
        // 16 voices: the newer steal the older (canceled), the rest play.
        #expect(run.callbacks.allSatisfy { $0.code == CA.success || $0.code == CA.canceled } && run.callbacks.allSatisfy { !$0.callerThread })
        let fds = run.calls.filter { $0.op == "fds" }
        #expect(fds.count == 2 && fds[0].fds == fds[1].fds, "descriptors before and after: \(fds.map { $0.fds ?? -1 })")
        #expect(fds.count == 2 && fds[0].tasks == fds[1].tasks, "threads before and after: \(fds.map { $0.tasks ?? -1 })")
        #expect(eventually { (try? d.status().clients) == 1 })  // status's own connection
    }

    /// What an app may pass: huge, binary and non-UTF-8 properties, a FIFO as the file,
    /// a cued that stops answering. Each call returns at once with libcanberra's code; the
    /// host and cued go on.
    @Test func hostilePropertiesAndAFrozenCuedNeitherStallNorCrashTheHost() throws {
        let d = try Self.cued()
        let sandbox = try CanberraSandbox()
        let fifo = d.dir.file("fifo.wav")
        #expect(mkfifo(fifo, 0o600) == 0)
        let huge: [String: Any] = ["repeat": "a", "times": 1 << 20]
        let run = try sandbox.client([
            ["props", ["application.name": ["hex": "ff00fe"], "canberra.xdg-theme.name": "../../etc"]],
            ["play", 1, ["event.id": huge]],
            ["play", 2, ["event.id": ["hex": "ff fe 62 65 6c 6c 00".replacingOccurrences(of: " ", with: "")]]],
            ["play", 3, ["media.filename": fifo]],
            ["play", 4, ["event.id": "cuedtest-bell", "canberra.volume": "loud"]],
            ["play", 5, ["event.id": "cuedtest-bell", "canberra.volume": "99999"]],
            ["play", 8, ["event.id": "cuedtest-bell", "canberra.volume": String(repeating: "9", count: 5000)]],
            ["play", 6, ["event.id": "cuedtest-bell", "application.name": String(repeating: "é", count: 300)]],
            ["play", 7, ["event.id": ["hex": "62656c6c"]]],
            ["play", 10, ["media.filename": d.dir.file("no-such-file.wav")]],
            // An app that destroys a context from that context's callback (on the driver's thread).
            ["fds"],
            ["destroy_in_callback", 9, ["event.id": "cuedtest-bell"]],
            ["fds"],
            ["wait_callbacks", 3, 10],
            ["sleep", 0.2],
        ], env: CanberraSandbox.environment(d.environment))
        #expect(run.ret(1) == CA.notFound && run.ret(2) == CA.notFound, "\(run)")
        // A FIFO is refused by cued, never opened: at once, or by the callback.
        #expect((run.ret(3)! < 0 && run.codes(3).isEmpty) || (run.ret(3) == CA.success && run.codes(3).count == 1 && run.codes(3)[0] < 0),
                "a FIFO: \(run)")
        // A missing file is libcanberra's "not found" (cued's `err bad-file not-found`; the driver once read the
        // English prose, missed it, and said CA_ERROR_CORRUPT): at once, or by the callback.
        #expect((run.ret(10) == CA.notFound && run.codes(10).isEmpty) || (run.ret(10) == CA.success && run.codes(10) == [CA.notFound]),
                "a missing file: \(run)")
        #expect(run.ret(4) == CA.invalid, "\(run)")
        #expect(run.ret(5) == CA.success && run.codes(5) == [CA.success], "a huge volume is clamped to +12 dB: \(run)")
        #expect(run.ret(6) == CA.success && run.codes(6) == [CA.success], "\(run)")
        #expect(run.ret(7) == CA.invalid && run.ret(8) == CA.invalid, "an event id without its NUL is no string; 5,000 digits no volume: \(run)")
        #expect(run.calls.allSatisfy { $0.ms < 50 }, "\(run.calls.map { "\($0.op) \($0.id ?? 0): \($0.ms) ms" })")
        #expect(run.calls.first { $0.op == "destroy_in_callback" }?.ret == CA.success
                && run.callbacks.filter { $0.context == 99 }.map(\.code) == [CA.success], "\(run)")
        // …and its thread, connection and descriptors are gone once the callback returned.
        let around = run.calls.filter { $0.op == "fds" }
        #expect(around.count == 2 && around[0].tasks == around[1].tasks && around[0].fds == around[1].fds,
                "threads and descriptors before and after: \(around.map { ($0.tasks ?? -1, $0.fds ?? -1) })")
        #expect(try d.request("ping") == "ok pong")

        // A cued that stops answering (SIGSTOP): each call returns at once; the plug-in sees cued stopped
        // (a request unanswered 20 ms, its process stopped) and hands what it had sent, and what comes
        // after, to the fallback (none works here: no sound server, so its callback says why): each play
        // is called back once, long before the context goes (the old plug-in kept the first until destroy).
        d.process.signal(SIGSTOP)
        defer { d.process.signal(SIGCONT) }
        let frozen = try sandbox.client([["play", 1, ["event.id": "cuedtest-bell"]], ["wait_callbacks", 1, 3],
                                         ["play", 2, ["event.id": "cuedtest-bell"]], ["wait_callbacks", 2, 3], ["destroy"]],
                                        env: CanberraSandbox.environment(d.environment))
        #expect(frozen.ret(1) == CA.success && frozen.ret(2) == CA.success, "\(frozen)")
        #expect(frozen.codes(1).count == 1 && frozen.codes(2).count == 1 && !frozen.codes(1).contains(CA.destroyed)
                && !frozen.codes(2).contains(CA.destroyed), "\(frozen)")
        #expect(frozen.calls.allSatisfy { $0.ms < 50 }, "\(frozen)")
        d.process.signal(SIGCONT)
        #expect(try d.request("ping") == "ok pong")
    }

    /// `cuectl canberra on|off` and `doctor`, with the plug-in and the login hook where
    /// libcanberra and systemd look (in the sandbox), and without.
    @Test func cuectlTurnsItOnAndOffAndDoctorSaysWhichAppsPlayThroughIt() throws {
        let d = try Self.cued()
        let cuectl = TestPaths.binary("cuectl")
        var env = d.environment
        env.removeValue(forKey: "CANBERRA_DRIVER")
        env["CUED_SOCKET"] = d.socketPath
        let switchFile = d.dir.file("config/cued/libcanberra")

        // Without the plug-in where libcanberra looks, `on` would silence every libcanberra sound: refused.
        let bare = try CanberraSandbox(plugin: nil)
        let refused = try bare.run([cuectl, "canberra", "on"], env: env)
        #expect(refused.status == 1 && refused.err.contains("cued's plug-in is not in \(CanberraSandbox.systemDirectory!)"), "\(refused)")
        #expect(!FileManager.default.fileExists(atPath: switchFile))

        let sandbox = try CanberraSandbox(hook: true)
        let on = try sandbox.run([cuectl, "canberra", "on"], env: env)
        #expect(on.status == 0 && on.out.hasPrefix("on: libcanberra's sounds go through cued"), "\(on)")
        #expect(FileManager.default.fileExists(atPath: switchFile))
        // The login hook now says CANBERRA_DRIVER=cued for this user.
        #expect(try sandbox.run([sandbox.hook], env: env).out == "CANBERRA_DRIVER=cued\n")
        // An app plays through it; `canberra` and `doctor` name it.
        let run = try sandbox.client([["props", ["application.name": "Shell"]], ["play", 1, ["event.id": "cuedtest-bell"]], ["wait_callbacks", 1, 5]],
                                     env: CanberraSandbox.environment(env))
        #expect(run.codes(1) == [CA.success], "\(run)")
        let report = try sandbox.run([cuectl, "canberra"], env: env)
        #expect(report.status == 0 && report.out.hasPrefix("libcanberra through cued: on\nplug-in: \(CanberraSandbox.systemDirectory!)/libcanberra-cued.so installed\n"), "\(report)")
        #expect(report.out.contains("login hook: \(sandbox.hook)\n") && report.out.hasSuffix("apps through it: Shell\n"), "\(report)")
        let doctor = try sandbox.run([cuectl, "doctor"], env: env)
        #expect(doctor.out.contains("ok  libcanberra's sounds go through cued; apps through it: Shell\n"), "\(doctor)")

        let off = try sandbox.run([cuectl, "canberra", "off"], env: env)
        #expect(off.status == 0 && off.out.hasPrefix("off: "), "\(off)")
        #expect(!FileManager.default.fileExists(atPath: switchFile))
        #expect(try sandbox.run([sandbox.hook], env: env).out == "")
        let after = try sandbox.run([cuectl, "doctor"], env: env)
        #expect(after.out.contains("--  libcanberra's sounds (GNOME Shell, KDE and GTK apps, feedbackd) do not go through cued; to make them: cuectl canberra on"), "\(after)")
        // A session still naming cued's driver, and the plug-in gone: doctor says it is silent.
        env["CANBERRA_DRIVER"] = "cued"
        let silent = try bare.run([cuectl, "doctor"], env: env)
        #expect(silent.out.contains("!!  CANBERRA_DRIVER=cued but cued's plug-in is not in"), "\(silent)")
    }
}
