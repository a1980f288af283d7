import CuedCore
import CuedProtocol
import Logging
import NIOCore

/// Who gets a voice. Admission first (`Admission.rules`: mute, profiles, the client's
/// rate limit, the cue's cooldown, SIGTERM), then the voice request the audio thread acts
/// on (its gain, priority, `important`, the cue's voice limit, its owner, by which the
/// mixer's ledger keeps each app to its share), then the audio queue; and each voice's
/// one end, mapped in this one place to its `wait` answer, its client's end report, a log
/// line and the counts per app and cue. Which sound a cue plays is the `CuePicker`'s.
/// Loop-confined (not Sendable): the daemon owns it and calls it on `loop`.
final class VoiceBroker {
    /// A voice's total gain in dB (request, cue, app), from the config in force when it is
    /// submitted: a sound decoded off the loop is submitted after a reload may have replaced it.
    typealias Gain = (_ requestDB: Double, _ cue: String, _ app: String?) -> Double

    let loop: any EventLoop
    let engine: AudioEngine
    let tickets: AudioTickets
    private let clients: ClientTable
    private let stopping: StopFlag
    private let logger: Logger

    /// Requests refused by a rate limit (cues and state changes), for `status`.
    private(set) var rateLimited = 0
    /// Cues played (queued, less those that never sounded), in all and per bank cue
    /// since the bank was loaded: counted on the loop only.
    private(set) var played = 0
    private(set) var playedByCue: [String: Int] = [:]
    private(set) var counts = AppCounts()
    private var nextVoiceID: UInt64 = 1
    /// How the output cued plays to now has done since a cue was last heard whole through it:
    /// `status`, `doctor` and `why` say it fails while it accepts cues and plays nothing.
    private(set) var health = OutputHealth()
    private var healthSpec: String?

    init(loop: any EventLoop, engine: AudioEngine, clients: ClientTable, stopping: StopFlag, logger: Logger) {
        self.loop = loop
        self.engine = engine
        self.clients = clients
        self.stopping = stopping
        self.logger = logger
        tickets = AudioTickets(loop: loop, engine: engine)
    }

    var isStopping: Bool { stopping.load(ordering: .relaxed) }

    // MARK: - Admission

    /// The first reason to hold the play back, or nil: then it takes one of the client's tokens.
    func admit(_ ask: PlayAsk, _ client: inout Client, _ view: AdmissionView) -> Hold? {
        if let hold = Admission.first(ask, client, view) {
            client.refused += 1
            if case .rateLimited = hold { rateLimited += 1 }
            return hold
        }
        _ = client.plays?.take(now: view.now)
        client.granted += 1
        return nil
    }

    /// A token for one more cue's worth of work that is not a play (`preload`): the limit, if refused.
    func allowWork(_ client: inout Client, _ now: UInt64) -> Hold? {
        guard let bucket = client.plays, !client.plays!.take(now: now) else { return nil }
        rateLimited += 1
        return .rateLimited(perSecond: bucket.rate)
    }

    /// A token for one more state change (mute, reload…): the limit a second, if refused.
    func allowChange(_ client: inout Client, _ now: UInt64) -> Double? {
        guard let bucket = client.changes, !client.changes!.take(now: now) else { return nil }
        rateLimited += 1
        return bucket.rate
    }

    // MARK: - Voices

    /// What a voice plays: the sound found for the request, as the picker chose it.
    struct Pick {
        var cue: Cue
        /// The name asked for (a bank cue's, a theme sound's, a file's path).
        var name: String
        /// The picker's (jitter); the request's `rate=` and `pitch=` multiply it.
        var rate = 1.0
        var limit: CueVoiceLimit?
        /// Counted per cue in `status` (a bank cue's variants together).
        var bankCue = false
    }

    /// Queues `pick` as a voice for `client`: one `VoiceRequest`, handed whole to the audio
    /// thread. With `wait`, the answer comes when it has sounded.
    func submit(_ pick: Pick, _ options: PlayOptions, for client: Client, requestTime: UInt64, gain: Gain) -> Play {
        let (cue, name) = (pick.cue, pick.name)
        // SIGTERM's grace is for cues already playing (checked again: a decode took time).
        if isStopping { return .now(.held(.stopping)) }
        let id = nextVoiceID
        nextVoiceID &+= 1
        var notify: VoiceNotify = []
        if options.wait { notify.insert(.wait) }
        if client.events { notify.insert(.events) }
        let loops: VoiceLoop = switch options.loop {
        case .once: .once
        case .times(let n): .times(n)
        case .forever: .forever
        case .seconds(let t): .seconds(t)
        }
        var request = VoiceRequest(id: id, cue: cue, gain: decibelsToGain(gain(options.gainDB, name, client.app)),
                                   requestTime: requestTime, owner: client.owner, connection: client.id,
                                   priority: options.priority, important: options.important, loop: loops,
                                   detached: options.detach, notify: notify)
        request.rate = pick.rate * options.rate * CueDesign.rate(cents: options.pitchCents)
        request.limit = pick.limit
        guard engine.submit(.play(request)) else { return .now(.failed(.queueFull)) }
        // Counted now, on the loop, so `status` right after the reply has it; taken off
        // again, here too, if the voice never sounds (`ended`). Only the loop counts.
        played += 1
        if pick.bankCue { playedByCue[name, default: 0] += 1 }
        if let app = client.app { counts.played(app, via: client.via) }
        // A socket's loops end when it closes (but those it detached).
        if loops != .once && !options.detach && client.kind == .socket { clients.startedLoop(client.id) }
        guard options.wait else { return .now(.started(voice: id)) }
        return .later(tickets.waitForVoice(id))
    }

    /// Fades out what `target` names (for `owner`); the future has how many voices
    /// stopped, or fails if the audio queue is full.
    func stop(_ target: StopTarget, owner: String) -> EventLoopFuture<Int> {
        let scope: StopScope = switch target {
        case .mine: .owner(owner)
        case .cue(let name): .cue(name: name, owner: owner)
        case .id(let voice): .id(voice)
        case .all: .all
        }
        return tickets.stop(scope)
    }

    /// A client that started loops left: they end (nobody waits for the answer; the ends
    /// are reported as usual, logged and counted).
    func stopLoops(of client: ClientID) {
        _ = engine.submit(.stop(.loopsOf(connection: client), ticket: tickets.ticket()))
    }

    /// A reload replaced the bank: the per-cue counts start again.
    func bankReplaced() { playedByCue = [:] }

    // MARK: - Audio thread events (hopped onto the loop)

    func handle(_ event: EngineEvent) {
        switch event {
        case .voiceEnded(let end): ended(end)
        case .stopped, .synced: tickets.handle(event)
        case .opened:
            // Another output (auto's next pick) starts with a clean record.
            if engine.sinkSpec != healthSpec { health = OutputHealth(); healthSpec = engine.sinkSpec }
        case .openFailed(let e), .writeFailed(let e): noteHealth(.failed(e))
        case .stalled: noteHealth(.failed(OutputHealth.stalled))
        case .lost: noteHealth(.failed(OutputHealth.lostDevice))
        case .streamStopped, .closed, .threadStarted:
            break  // the device's own news: DeviceLog's
        }
    }

    private func noteHealth(_ outcome: OutputHealth.Outcome) {
        if isStopping { return }
        health.note(outcome, now: MonotonicClock.now())
    }

    /// A voice's one end, mapped in this one place to all it means: a log line and
    /// the per-app counts for one that did not play, the `wait`er's answer, the
    /// client's end report.
    func ended(_ end: VoiceEnd) {
        let neverPlayed = end.reason == .late || end.reason == .cut || (end.reason == .shutdown && !end.started)
        if end.reason == .played { noteHealth(.heard) } else if end.reason == .late || end.reason == .cut { noteHealth(.lost) }
        if neverPlayed {
            if isStopping {
                logger.info("cue not played: cued is stopping", metadata: ["cue.name": "\(end.cue)"])
            } else if end.reason == .cut {
                logger.warning("cue cut off: the device failed while it played", metadata: ["cue.name": "\(end.cue)", "late_ms": "\(end.lateNs / 1_000_000)"])
            } else {
                logger.warning("cue dropped: could not start in time", metadata: ["cue.name": "\(end.cue)", "late_ms": "\(end.lateNs / 1_000_000)"])
            }
            if !end.owner.hasPrefix("#") { counts.dropped(end.owner) }
        }
        if !end.started {  // counted when it was queued
            played -= 1
            if let n = playedByCue[end.cue], n > 0 { playedByCue[end.cue] = n - 1 }
        }
        if end.notify.contains(.wait) {
            tickets.voiceEnded(end.id, .ended(end, EndContext(deviceError: engine.stats.sinkError, stopping: isStopping)))
        }
        if end.notify.contains(.events) { clients.deliver(end) }
    }
}
