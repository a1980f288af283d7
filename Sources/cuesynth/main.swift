// cuesynth: writes cued's original cues (psst1, psst2, pop, fail), each with its
// variants (NAME-2.wav, NAME-3.wav), as 48 kHz 16-bit mono WAV through libsndfile, and optionally a picture of them. Deterministic:
// the same source gives the same bytes on every run.
import CSndFile
import CueDSP
#if canImport(Glibc)
import Glibc
#endif

func fail(_ message: String) -> Never {
    let line = "cuesynth: \(message)\n"
    _ = line.withCString { write(2, $0, strlen($0)) }
    exit(1)
}

func writeWAV(_ samples: [Int16], to path: String, sampleRate: Int) {
    var info = SF_INFO()
    info.samplerate = Int32(sampleRate)
    info.channels = 1
    info.format = Int32(SF_FORMAT_WAV | SF_FORMAT_PCM_16)
    guard let file = sf_open(path, Int32(SFM_WRITE), &info) else {
        fail("cannot write \(path): \(String(cString: sf_strerror(nil)))")
    }
    defer { sf_close(file) }
    let written = samples.withUnsafeBufferPointer { sf_writef_short(file, $0.baseAddress, sf_count_t($0.count)) }
    if written != samples.count { fail("short write to \(path): \(String(cString: sf_strerror(file)))") }
}

var outDir = "Sounds"
var picture: String?
var report = false
var args = CommandLine.arguments.dropFirst()
while let a = args.popFirst() {
    switch a {
    case "--out":
        guard let v = args.popFirst() else { fail("--out needs a directory") }
        outDir = v
    case "--picture":
        guard let v = args.popFirst() else { fail("--picture needs a path") }
        picture = v
    case "--report": report = true
    case "-h", "--help":
        print("usage: cuesynth [--out DIR] [--picture PNG] [--report]\n  writes DIR/psst1.wav, DIR/psst2.wav, DIR/pop.wav, DIR/fail.wav and their variants NAME-2.wav, NAME-3.wav (default DIR: Sounds)")
        exit(0)
    default: fail("unknown argument '\(a)' (try --help)")
    }
}

let rate = CueRecipes.sampleRate
var rendered: [(name: String, samples: [Double])] = []
for (name, variant, file) in CueRecipes.files {
    let pcm = CueRecipes.toInt16(CueRecipes.render(name, variant: variant)!)
    writeWAV(pcm, to: "\(outDir)/\(file)", sampleRate: Int(rate))
    // Measure what was written (the 16-bit samples), not the float source.
    let x = pcm.map { Double($0) / 32768 }
    if variant == 1 { rendered.append((name, x)) }  // the picture shows each cue once
    if report {
        let ms = Double(x.count) / rate * 1000
        func f(_ v: Double) -> String { String(Int((v * 10).rounded())) .replacingLastDecimal() }
        print("\(file.dropLast(4)): \(Int(ms)) ms, peak \(f(CueAnalysis.dBFS(CueAnalysis.peak(x)))) dBFS, "
              + "gated RMS \(f(CueAnalysis.dBFS(CueAnalysis.gatedRMS(x)))) dBFS, "
              + "centroid \(Int(CueAnalysis.spectralCentroid(x, sampleRate: rate))) Hz, "
              + "<2 kHz \(Int(CueAnalysis.energyFraction(below: 2000, x, sampleRate: rate) * 100)) %")
    }
}
if let picture {
    let png = CuePicture.render(cues: rendered, sampleRate: rate).png()
    guard let f = fopen(picture, "wb") else { fail("cannot write \(picture)") }
    _ = png.withUnsafeBufferPointer { fwrite($0.baseAddress, 1, $0.count, f) }
    fclose(f)
}

extension String {
    /// "123" → "12.3", "-5" → "-0.5": one decimal without Foundation.
    func replacingLastDecimal() -> String {
        var s = self, neg = false
        if s.hasPrefix("-") { neg = true; s.removeFirst() }
        while s.count < 2 { s = "0" + s }
        return (neg ? "-" : "") + s.dropLast() + "." + s.suffix(1)
    }
}
