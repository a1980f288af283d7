import CuedCore
import CuedProtocol
import NIOCore

/// Playing and stopping: the typed calls every client asks through.
extension Daemon {
    /// What a client asks to sound.
    enum Sound: Equatable, Sendable {
        /// A cue of the bank (its next variant), else a sound of the theme.
        case named(String)
        /// A sound file by absolute path.
        case file(String)

        /// Its name (nil for a file).
        var name: String? { if case .named(let n) = self { n } else { nil } }
    }

    /// What admission looks at now.
    func admissionView(now: UInt64) -> AdmissionView {
        AdmissionView(mutes: switches.mutes, profiles: switches.profiles, picker: picker.cooldowns, stopping: broker.isStopping, now: now,
                      desktop: desktopRules)
    }

    /// Plays `sound` for `client`: admission (mute, profiles, its rate limit, a cue's
    /// cooldown), the cue's pick, or the sound fetched from the theme or a file, then the
    /// audio queue. The one way into playing, for every client.
    func play(_ sound: Sound, _ options: PlayOptions, _ client: inout Client, at: UInt64) -> Play {
        if case .named(let name) = sound, let variants = current.bank.variants[name] {
            return playCue(name, variants, options, &client, at: at)
        }
        var options = options
        if options.theme == nil { options.theme = desktopTheme }
        let ask = PlayAsk(options, client: client, sound: sound.name)
        let view = admissionView(now: MonotonicClock.now())
        if let hold = broker.admit(ask, &client, view) { return .now(.held(hold)) }
        options.gainDB += Admission.gainDB(ask, view)
        options.important = Admission.passesProfiles(ask, view)
        switch sound {
        case .named(let name):
            if let cue = fetch.cached(name, theme: options.theme) {
                return broker.submit(.init(cue: cue, name: name), options, for: client, requestTime: view.now, gain: gain)
            }
            return whenFetched(fetch.themeSound(name, theme: options.theme, owner: client.owner, bankNames: current.bank.names),
                               name: name, options, client)
        case .file(let path):
            return whenFetched(fetch.file(path, owner: client.owner), name: path, options, client)
        }
    }

    /// A bank cue: admission, then its pick (variant, jitter, cooldown), then the queue.
    func playCue(_ name: String, _ variants: [Cue], _ options: PlayOptions, _ client: inout Client, at: UInt64) -> Play {
        let design = current.design(name)
        let ask = PlayAsk(options, client: client, cue: name, design: design)
        let view = admissionView(now: at)
        if let hold = broker.admit(ask, &client, view) { return .now(.held(hold)) }
        guard !variants.isEmpty else { return .now(.failed(.noSound(cue: name))) }
        let pick = picker.pick(name, variants, design, now: at)
        var options = options
        options.gainDB += Admission.gainDB(ask, view) + pick.gainDB
        options.important = Admission.passesProfiles(ask, view)
        return broker.submit(.init(cue: pick.cue, name: name, rate: pick.rate, limit: pick.limit, bankCue: true), options,
                             for: client, requestTime: at, gain: gain)
    }

    /// When a fetch finishes (back on the loop), plays what it found or says why not.
    private func whenFetched(_ fetched: EventLoopFuture<SoundFetch.Fetched>, name: String, _ options: PlayOptions,
                             _ client: Client) -> Play {
        .later(fetched.assumeIsolated().flatMap { result -> EventLoopFuture<PlayResult> in
            switch result {
            case .cue(let cue):
                // Timed from now: the decode is not the audio path's latency, and
                // the 250 ms start deadline must not drop a sound that just loaded.
                switch self.broker.submit(.init(cue: cue, name: name), options, for: client, requestTime: MonotonicClock.now(),
                                          gain: self.gain) {
                case .now(let r): return self.loop.makeSucceededFuture(r)
                case .later(let f): return f
                }
            case .disabled: return self.loop.makeSucceededFuture(.disabled)
            case .failed(let failure): return self.loop.makeSucceededFuture(.failed(failure))
            }
        }.nonisolated())
    }

    /// Every reason a play of `sound` by `client` would be held back now, in order (`why`):
    /// the same rules `play` stops at the first of.
    func holds(_ sound: Sound, _ options: PlayOptions, _ client: Client) -> [Hold] {
        var ask = PlayAsk(options, client: client, sound: sound.name)
        if case .named(let name) = sound, current.bank.variants[name] != nil {
            ask = PlayAsk(options, client: client, cue: name, design: current.design(name))
        }
        return Admission.all(ask, client, admissionView(now: MonotonicClock.now()))
    }

    /// The gain of a voice from the config in force when it is submitted.
    private var gain: VoiceBroker.Gain {
        { [self] request, cue, app in current.gainDB(request: request, cue: cue, app: app) }
    }

    /// What a `stop` made of its target.
    enum StopOutcome: Equatable, Sendable {
        /// How many voices faded out.
        case stopped(Int)
        /// `stop CUE` of a name neither the bank nor the theme has (with the bank's names).
        case unknownCue(String, bank: [String])
    }

    /// Fades out what `target` names, of `client`'s app (or its own). A cue is first known
    /// to be one (the bank's, else looked up in the theme as `why` does): a name nothing
    /// plays, a misspelt `all`, is refused rather than counted as stopping nothing. One the
    /// decoding lane could not look up is stopped as asked (stopping is never the harm).
    func stop(_ target: StopTarget, _ client: inout Client) -> EventLoopFuture<StopOutcome> {
        let owner = client.owner
        guard case .cue(let name) = target, current.bank.variants[name] == nil else {
            return broker.stop(target, owner: owner).map { .stopped($0) }
        }
        return fetch.known(name, theme: desktopTheme, owner: owner, bankNames: current.bank.names).assumeIsolated()
            .flatMap { failure -> EventLoopFuture<StopOutcome> in
                if case .unknownSound(_, let bank)? = failure { return self.loop.makeSucceededFuture(.unknownCue(name, bank: bank)) }
                return self.broker.stop(target, owner: owner).map { .stopped($0) }
            }.nonisolated()
    }

    /// Fades out one voice, whoever started it (the D-Bus face's EndFeedback).
    func stopVoice(_ voice: UInt64) { _ = broker.stop(.id(voice), owner: "") }

    /// Moves the client's refresh session and plays what that asks for.
    func refresh(_ client: inout Client, at: UInt64, _ event: (inout RefreshSession) -> RefreshSession.Outcome) -> RefreshPlay {
        switch desk.move(&client, now: at, runtime: current, event) {
        case .none:
            return .nothing
        case .prewarm:
            // The device is opened ahead of a cue only for a client whose cues would sound.
            if !switches.isMuted(app: client.app) && switches.effectiveProfile(app: client.app) != .silent { engine.submit(.prewarm) }
            return .nothing
        case .cue(let name, let options):
            guard let variants = current.bank.variants[name] else { return .played(name, .now(.failed(.transitionCueMissing(name)))) }
            return .played(name, playCue(name, variants, options, &client, at: at))
        }
    }

    /// What a move of a refresh session played.
    enum RefreshPlay {
        case nothing
        case played(String, Play)
    }
}
