// swift-tools-version:6.0
import PackageDescription

let package = Package(
    name: "cued",
    platforms: [.macOS(.v15)],
    products: [
        .executable(name: "cued", targets: ["cued"]),
        .executable(name: "cuectl", targets: ["cuectl"]),
        .executable(name: "cuesynth", targets: ["cuesynth"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.101.2"),
        .package(url: "https://github.com/apple/swift-log.git", from: "1.16.2"),
    ],
    targets: [
        // C imports only.
        .systemLibrary(name: "CALSA", pkgConfig: "alsa", providers: [.apt(["libasound2-dev"])]),
        .systemLibrary(name: "CSndFile", pkgConfig: "sndfile", providers: [.apt(["libsndfile1-dev"])]),
        .systemLibrary(name: "CSampleRate", pkgConfig: "samplerate", providers: [.apt(["libsamplerate0-dev"])]),
        .systemLibrary(name: "CPipeWire", pkgConfig: "libpipewire-0.3", providers: [.apt(["libpipewire-0.3-dev"])]),
        // sd-bus's vtable macros and variadic calls, as plain C functions; libsystemd loaded when a bus is there.
        .target(name: "CSDBus"),

        // Pure: no audio, no sockets, no NIO.
        .target(name: "CuedProtocol", linkerSettings: [.linkedLibrary("m")]),
        // Glibc helpers in place of Foundation: untrusted-file opening, paths, environment.
        .target(name: "CuedSystem"),
        .target(name: "CuedCore", dependencies: ["CuedProtocol", "CuedSystem"]),
        .target(name: "CueDSP"),

        // The config file: TOML (our own parser) → a validated `Config`, errors with file, line and key.
        .target(name: "CuedConfig", dependencies: ["CuedProtocol", "CuedSystem"]),

        // C edge.
        .target(name: "CuedAudio", dependencies: ["CuedCore", "CuedProtocol", "CuedSystem", "CALSA", "CSndFile", "CSampleRate", "CPipeWire"]),

        // I/O edge.
        .target(name: "CuedServer", dependencies: [
            "CuedProtocol", "CuedCore", "CuedAudio", "CuedConfig", "CuedClient", "CuedSystem", "CSDBus",
            .product(name: "NIOCore", package: "swift-nio"),
            .product(name: "NIOPosix", package: "swift-nio"),
            .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
            .product(name: "Logging", package: "swift-log"),
        ]),
        .target(name: "CuedClient", dependencies: ["CuedProtocol"]),
        // What cuectl's command line means (requests, replies, status table, shell
        // snippets), without I/O: tested without a daemon.
        .target(name: "CuectlCommands", dependencies: ["CuedProtocol"]),

        // Executables: argument parsing and wiring only.
        // Linked with lld: only what the runtime needs is exported (10,000 → 400 dynamic
        // symbols) and the 33,000 relative relocations of a position-independent
        // executable are packed (DT_RELR, glibc ≥ 2.36): less to load and to keep resident.
        .executableTarget(name: "cued", dependencies: [
            "CuedServer", "CuedCore", "CuedConfig", "CuedProtocol", "CuedSystem",
            .product(name: "Logging", package: "swift-log"),
        ], linkerSettings: [.unsafeFlags(["-use-ld=lld", "-Xlinker", "--no-export-dynamic",
                                          "-Xlinker", "-z", "-Xlinker", "pack-relative-relocs"])]),
        // Statically linked Swift runtime: no dynamic loading and relocation of
        // libswiftCore at every start (cuectl runs on a tool's critical path).
        .executableTarget(name: "cuectl", dependencies: ["CuedClient", "CuedProtocol", "CuectlCommands"],
                          linkerSettings: [.unsafeFlags(["-static-executable", "-use-ld=lld", "-Xlinker", "--no-warnings"])]),
        // cued loads libsndfile while it decodes (CSndFile/shim.h); these link it.
        .executableTarget(name: "cuesynth", dependencies: ["CueDSP", "CSndFile"], linkerSettings: [.linkedLibrary("sndfile")]),
        // Seeded random-input driver for the protocol and config parsers (`make fuzz`).
        .executableTarget(name: "cuedfuzz", dependencies: ["CuedProtocol", "CuedConfig"]),
        // The wire's words as the plug-in's C header and bench's Python module (`make wire`).
        .executableTarget(name: "cuedwire", dependencies: ["CuedProtocol"]),

        // Helpers shared by the test targets: paths to built binaries, temp dirs, WAV I/O.
        .target(name: "TestSupport", dependencies: ["CSndFile"], path: "Tests/TestSupport", linkerSettings: [.linkedLibrary("sndfile")]),
        .testTarget(name: "CuedProtocolTests", dependencies: ["CuedProtocol"]),
        .testTarget(name: "CuedSystemTests", dependencies: ["CuedSystem"]),
        .testTarget(name: "CuectlCommandsTests", dependencies: ["CuectlCommands", "CuedProtocol"]),
        // Counts one thread's allocations (the audio thread's: none in the steady state).
        .target(name: "CMallocCount", path: "Tests/CMallocCount"),
        .testTarget(name: "CuedCoreTests", dependencies: ["CuedCore", "TestSupport", "CMallocCount"]),
        .testTarget(name: "CuedServerTests", dependencies: [
            "CuedServer", "TestSupport", "CuedProtocol", "CuedCore", "CuedConfig", "CuedAudio",
            .product(name: "Logging", package: "swift-log"),
            .product(name: "NIOCore", package: "swift-nio"),
            .product(name: "NIOPosix", package: "swift-nio"),
            .product(name: "NIOEmbedded", package: "swift-nio"),
        ]),
        .testTarget(name: "CuedConfigTests", dependencies: ["CuedConfig", "TestSupport"]),
        .testTarget(name: "CuedAudioTests", dependencies: ["CuedAudio", "CPipeWire", "CuedCore", "CuedSystem", "CueDSP", "TestSupport"]),
        .testTarget(name: "CueSoundsTests", dependencies: ["CueDSP", "TestSupport"]),
        .testTarget(name: "IntegrationTests", dependencies: ["CuedClient", "CuedProtocol", "CuedConfig", "CuectlCommands", "TestSupport"]),
    ],
    swiftLanguageModes: [.v6]
)

// The daemon's own modules do without the regex library (_StringProcessing),
// which the compiler imports implicitly and which would add ≈ 1 MB to every
// statically linked binary.
for target in package.targets where ["CuedProtocol", "CuedSystem", "CuedCore", "CuedConfig", "CuedAudio", "CuedServer",
                                      "CuedClient", "CuectlCommands", "cued", "cuectl"].contains(target.name) {
    target.swiftSettings = (target.swiftSettings ?? []) + [
        .unsafeFlags(["-Xfrontend", "-disable-implicit-string-processing-module-import"]),
    ]
}
