#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// An RGB image that can be encoded as PNG without zlib (stored deflate
/// blocks), so the picture of the cues needs nothing beyond this repo.
public struct RGBImage: Sendable {
    public let width: Int, height: Int
    public private(set) var pixels: [UInt8]

    public init(width: Int, height: Int, fill: (UInt8, UInt8, UInt8) = (255, 255, 255)) {
        self.width = width; self.height = height
        pixels = [UInt8](repeating: 0, count: width * height * 3)
        for i in 0..<(width * height) { pixels[3 * i] = fill.0; pixels[3 * i + 1] = fill.1; pixels[3 * i + 2] = fill.2 }
    }

    public mutating func set(_ x: Int, _ y: Int, _ c: (UInt8, UInt8, UInt8)) {
        guard x >= 0, y >= 0, x < width, y < height else { return }
        let i = 3 * (y * width + x)
        pixels[i] = c.0; pixels[i + 1] = c.1; pixels[i + 2] = c.2
    }

    public func png() -> [UInt8] {
        var raw = [UInt8]()
        raw.reserveCapacity((width * 3 + 1) * height)
        for y in 0..<height {
            raw.append(0)  // filter: none
            raw.append(contentsOf: pixels[(y * width * 3)..<((y + 1) * width * 3)])
        }
        var z: [UInt8] = [0x78, 0x01]
        var offset = 0
        repeat {
            let n = min(65_535, raw.count - offset)
            z.append(offset + n == raw.count ? 1 : 0)
            z += [UInt8(n & 0xFF), UInt8(n >> 8), UInt8(~n & 0xFF), UInt8((~n >> 8) & 0xFF)]
            z += raw[offset..<(offset + n)]
            offset += n
        } while offset < raw.count
        z += be32(adler32(raw))
        var out: [UInt8] = [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]
        out += chunk("IHDR", be32(UInt32(width)) + be32(UInt32(height)) + [8, 2, 0, 0, 0])
        out += chunk("IDAT", z)
        out += chunk("IEND", [])
        return out
    }

    private func be32(_ v: UInt32) -> [UInt8] { [UInt8(v >> 24), UInt8((v >> 16) & 0xFF), UInt8((v >> 8) & 0xFF), UInt8(v & 0xFF)] }

    private func chunk(_ type: String, _ data: [UInt8]) -> [UInt8] {
        let body = Array(type.utf8) + data
        return be32(UInt32(data.count)) + body + be32(crc32(body))
    }

    private func adler32(_ d: [UInt8]) -> UInt32 {
        var a: UInt32 = 1, b: UInt32 = 0
        for x in d { a = (a + UInt32(x)) % 65_521; b = (b + a) % 65_521 }
        return (b << 16) | a
    }

    private func crc32(_ d: [UInt8]) -> UInt32 {
        var c: UInt32 = 0xFFFF_FFFF
        for x in d {
            c ^= UInt32(x)
            for _ in 0..<8 { c = (c & 1) != 0 ? 0xEDB8_8320 ^ (c >> 1) : c >> 1 }
        }
        return ~c
    }
}

/// Draws the cues side by side: name, waveform (top) and spectrogram
/// (0–16 kHz, bottom), all on one 0–400 ms time axis so lengths compare.
public enum CuePicture {
    static let glyphs: [Character: [String]] = [
        "p": ["     ", "#### ", "#   #", "#   #", "#### ", "#    ", "#    "],
        "s": ["     ", "     ", " ####", "#    ", " ### ", "    #", "#### "],
        "t": [" #   ", " #   ", "#### ", " #   ", " #   ", " #  #", "  ## "],
        "o": ["     ", "     ", " ### ", "#   #", "#   #", "#   #", " ### "],
        "1": ["  #  ", " ##  ", "  #  ", "  #  ", "  #  ", "  #  ", " ### "],
        "2": [" ### ", "#   #", "    #", "   # ", "  #  ", " #   ", "#####"],
        "f": ["  ## ", " #   ", "#### ", " #   ", " #   ", " #   ", " #   "],
        "a": ["     ", "     ", " ### ", "    #", " ####", "#   #", " ####"],
        "i": ["  #  ", "     ", " ##  ", "  #  ", "  #  ", "  #  ", " ### "],
        "l": [" ##  ", "  #  ", "  #  ", "  #  ", "  #  ", "  #  ", " ### "],
        "c": ["     ", "     ", " ####", "#    ", "#    ", "#    ", " ####"],
        "k": ["#    ", "#    ", "#  # ", "# #  ", "##   ", "# #  ", "#  # "],
    ]

    public static func render(cues: [(name: String, samples: [Double])], sampleRate: Double) -> RGBImage {
        let col = 320, margin = 16, labelH = 36, waveH = 110, specH = 180, gap = 8
        let span = 0.400 * sampleRate
        var img = RGBImage(width: margin + cues.count * (col + margin), height: labelH + waveH + gap + specH + margin)
        for (ci, cue) in cues.enumerated() {
            let x0 = margin + ci * (col + margin)
            drawText(cue.name, into: &img, x: x0, y: 8, scale: 3)
            // Waveform: min/max per pixel column.
            let wy0 = labelH, mid = wy0 + waveH / 2
            for x in 0..<col { img.set(x0 + x, mid, (200, 200, 200)) }
            for x in 0..<col {
                let a = Int(Double(x) / Double(col) * span), b = Int(Double(x + 1) / Double(col) * span)
                guard a < cue.samples.count else { break }
                let seg = cue.samples[a..<min(b, cue.samples.count)]
                let lo = seg.min() ?? 0, hi = seg.max() ?? 0
                let y1 = mid - Int(hi * Double(waveH / 2)), y2 = mid - Int(lo * Double(waveH / 2))
                for y in min(y1, y2)...max(y1, y2) { img.set(x0 + x, y, (30, 80, 160)) }
            }
            // Spectrogram: 512-point Hann frames, dB mapped -60…-5 to a heat scale.
            let sy0 = labelH + waveH + gap, frame = 512, maxHz = 16_000.0
            for x in 0..<col {
                let centre = Int(Double(x) / Double(col) * span)
                var re = [Double](repeating: 0, count: frame), im = re
                for k in 0..<frame {
                    let idx = centre - frame / 2 + k
                    let w = 0.5 - 0.5 * cos(2 * Double.pi * Double(k) / Double(frame))
                    re[k] = (idx >= 0 && idx < cue.samples.count) ? cue.samples[idx] * w : 0
                }
                CueAnalysis.fft(&re, &im)
                for y in 0..<specH {
                    let hz = Double(specH - 1 - y) / Double(specH) * maxHz
                    let bin = Int(hz / sampleRate * Double(frame))
                    let p = (re[bin] * re[bin] + im[bin] * im[bin]) / Double(frame)
                    let db = 10 * log10(max(p, 1e-14))
                    img.set(x0 + x, sy0 + y, heat(min(max((db + 60) / 55, 0), 1)))
                }
            }
        }
        return img
    }

    static func heat(_ v: Double) -> (UInt8, UInt8, UInt8) {
        let r = min(1, v * 2), g = max(0, min(1, v * 2 - 0.6)), b = v < 0.5 ? v * 1.2 : max(0, 1.2 - v * 1.6)
        return (UInt8(r * 255), UInt8(g * 255), UInt8(max(0, b) * 255))
    }

    static func drawText(_ s: String, into img: inout RGBImage, x: Int, y: Int, scale: Int) {
        var cx = x
        for ch in s {
            if let g = glyphs[ch] {
                for (row, line) in g.enumerated() {
                    for (colI, c) in line.enumerated() where c == "#" {
                        for dy in 0..<scale { for dx in 0..<scale { img.set(cx + colI * scale + dx, y + row * scale + dy, (0, 0, 0)) } }
                    }
                }
            }
            cx += 6 * scale
        }
    }
}
