import CuedCore
@testable import CuedServer
import Testing

/// WirePlumber 0.4's state files as cued reads them, and where cued's stream's volume comes from.
@Suite struct WirePlumberStateTests {
    static let restore = """
        [restore-stream]
        Audio/Sink:node.name:nul:channelMap=FL;FR;
        Audio/Sink:node.name:nul:channelVolumes=1.0;1.0;
        Audio/Sink:node.name:nul:mute=true
        Audio/Sink:node.name:nul:volume=1.0
        Audio/Sink:node.name:my\\ssink:volume=0.0
        Output/Audio:media.role:Notification:channelMap=FL;FR;
        Output/Audio:media.role:Notification:channelVolumes=0.125;0.125;
        Output/Audio:media.role:Notification:mute=false
        Output/Audio:media.role:Notification:volume=1.0
        Output/Audio:application.name:Firefox:volume=0.5
        """

    @Test func theNotificationRoleAndTheSinksAreRead() {
        let s = WirePlumberState.parse(restoreStream: Self.restore, defaultNodes: nil, directory: "/s/wireplumber")
        #expect(s.notificationRole == KeptVolume(volume: 1, mute: false, channelVolumes: [0.125, 0.125]))
        #expect(s.notificationRole?.silenced == false)
        #expect(s.sinks["nul"] == KeptVolume(volume: 1, mute: true, channelVolumes: [1, 1]) && s.sinks["nul"]!.silenced)
        #expect(s.sinks["my sink"]?.volume == 0, "WirePlumber's escapes undone")
        #expect(s.sink(target: nil) == nil, "two sinks kept, none chosen: cued cannot tell which")
        #expect(s.sink(target: "nul")?.name == "nul")
        let chosen = WirePlumberState.parse(restoreStream: Self.restore, defaultNodes: "[default-nodes]\ndefault.configured.audio.sink=nul\n",
                                            directory: "/s")
        #expect(chosen.defaultSink == "nul" && chosen.sink(target: nil)?.volume.mute == true)
    }

    /// WirePlumber 0.5 keeps the role in `stream-properties`, one JSON object a key, and wins over a
    /// 0.4 file left beside it (0.5 does not migrate it).
    @Test func wirePlumber05sStreamPropertiesAreReadAndWin() {
        let props = """
            [stream-properties]
            Output/Audio:media.role:Notification={"mute":true, "volume":0.2, "channelVolumes":[1.0, 1.0], "channelMap":["FL", "FR"]}
            Output/Audio:media.role:Music={"mute":false}
            Audio/Sink:node.name:nul={"volume":0.5}
            Audio/Sink:node.name:bad={"volume":[[[[[[1]]]]]]}
            """
        let s = WirePlumberState.parse(restoreStream: Self.restore, defaultNodes: nil, streamProperties: props, directory: "/s/wireplumber")
        #expect(s.notificationRole == KeptVolume(volume: 0.2, mute: true, channelVolumes: [1, 1]))
        #expect(s.notificationFile == "stream-properties")
        #expect(s.notificationWhere == "WirePlumber's stream-properties key Output/Audio:media.role:Notification, /s/wireplumber/stream-properties")
        #expect(s.sinks["nul"] == KeptVolume(volume: 0.5))
        #expect(s.sinks["bad"] == nil, "nested deeper than such an entry can be: not read")
        // Only 0.5's file: the role from it alone; only 0.4's: from restore-stream, as before.
        let only05 = WirePlumberState.parse(restoreStream: nil, defaultNodes: nil, streamProperties: props, directory: "/s")
        #expect(only05.notificationRole?.mute == true)
        let only04 = WirePlumberState.parse(restoreStream: Self.restore, defaultNodes: nil, directory: "/s")
        #expect(only04.notificationFile == "restore-stream" && only04.notificationRole?.mute == false)
        for bad in ["{", "[1]", "{\"mute\":\"yes\"}", "null", String(repeating: "[", count: 10_000)] {
            #expect(WirePlumberState.keptVolume(json: bad)?.mute == nil, "\(bad.prefix(20))")
        }
    }

    @Test func nothingKeptIsNothingSaidAndBadValuesAreDropped() {
        let none = WirePlumberState.parse(restoreStream: "[restore-stream]\nOutput/Audio:media.role:Music:mute=true\n", defaultNodes: nil, directory: "/s")
        #expect(none.notificationRole == nil && none.sinks.isEmpty)
        let bad = WirePlumberState.parse(restoreStream: "[other]\nOutput/Audio:media.role:Notification:mute=true\n[restore-stream]\n"
                                         + "Output/Audio:media.role:Notification:volume=-1\nOutput/Audio:media.role:Notification:channelVolumes=nan;0.5;\n",
                                         defaultNodes: nil, directory: "/s")
        #expect(bad.notificationRole == KeptVolume(volume: nil, mute: nil, channelVolumes: [0.5]))
        #expect(KeptVolume(channelVolumes: [0, 0]).silenced && KeptVolume(volume: 0).silenced && !KeptVolume(channelVolumes: [0, 0.1]).silenced)
        #expect(WirePlumberState.directory(environment: ["HOME": "/home/u"]) == "/home/u/.local/state/wireplumber")
        #expect(WirePlumberState.directory(environment: ["HOME": "/home/u", "XDG_STATE_HOME": "/x"]) == "/x/wireplumber")
    }

    @Test func whereCuedsStreamsVolumeComesFrom() {
        var p = StreamProps.Snapshot()
        #expect(StreamOrigin.describe(spec: "pipewire", props: p, kept: nil) == "not known until cued's stream first opens")
        #expect(StreamOrigin.describe(spec: "null", props: p, kept: nil) == nil)
        #expect(StreamOrigin.describe(spec: "alsa:pulse", props: p, kept: nil)?.hasPrefix("not readable through an ALSA plugin") == true)
        (p.open, p.changes, p.volume, p.mute, p.channelVolumes) = (true, 1, 1, false, [1, 1])
        #expect(StreamOrigin.describe(spec: "pipewire", props: p, kept: nil) == StreamOrigin.unset)
        let role = KeptVolume(volume: 1, mute: false, channelVolumes: [0.125, 0.125])
        #expect(StreamOrigin.describe(spec: "pipewire", props: p, kept: role) == StreamOrigin.graph)
        p.channelVolumes = [0.125, 0.125]
        #expect(StreamOrigin.describe(spec: "pipewire:nul", props: p, kept: role) == StreamOrigin.restored)
        p.mute = true
        #expect(StreamOrigin.describe(spec: "pipewire", props: p, kept: role) == StreamOrigin.graph && p.silenced)
    }

    @Test func theStreamsPropsAreHandedOverWhole() {
        let props = StreamProps()
        #expect(props.snapshot == StreamProps.Snapshot())
        props.setOpen(true, nodeID: 42)
        props.publish(volume: 0.5, mute: nil, channels: 2, 0.25, 0.125)
        var s = props.snapshot
        #expect(s.open && s.nodeID == 42 && s.volume == 0.5 && s.mute == nil && s.channelVolumes == [0.25, 0.125] && s.changes == 1)
        props.publish(volume: nil, mute: true, channels: 0, 0, 0)
        s = props.snapshot
        #expect(s.volume == 0.5 && s.mute == true && s.channelVolumes == [0.25, 0.125] && s.changes == 2 && s.silenced)
        props.setOpen(false)
        #expect(!props.snapshot.open && props.snapshot.nodeID == nil && props.snapshot.mute == true, "closed: as last seen")
    }
}
