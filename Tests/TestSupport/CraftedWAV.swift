import Foundation

/// Hand-made RIFF headers: a WAV or RF64 file claiming whatever the test
/// wants, followed by as many bytes as the test writes (sparse past that).
public enum CraftedWAV {
    public static func le16(_ v: Int) -> [UInt8] { [UInt8(v & 0xFF), UInt8((v >> 8) & 0xFF)] }
    public static func le32(_ v: Int) -> [UInt8] { (0..<4).map { UInt8((v >> (8 * $0)) & 0xFF) } }
    public static func le64(_ v: Int) -> [UInt8] { (0..<8).map { UInt8((v >> (8 * $0)) & 0xFF) } }

    public static func fmt(channels: Int, rate: Int, bits: Int) -> [UInt8] {
        let block = channels * bits / 8
        return Array("fmt ".utf8) + le32(16) + le16(1) + le16(channels) + le32(rate)
            + le32(Int(UInt32(truncatingIfNeeded: rate &* block))) + le16(block) + le16(bits)
    }

    /// A 16-bit PCM WAV header whose data chunk claims `dataBytes`.
    public static func wav(channels: Int, rate: Int, bits: Int = 16, dataBytes: Int) -> [UInt8] {
        Array("RIFF".utf8) + le32(min(36 + dataBytes, 0xFFFF_FFFF)) + Array("WAVE".utf8)
            + fmt(channels: channels, rate: rate, bits: bits) + Array("data".utf8) + le32(min(dataBytes, 0xFFFF_FFFF))
    }

    /// An RF64 header (64-bit sizes in ds64) whose data claims `dataBytes`.
    public static func rf64(channels: Int, rate: Int, bits: Int = 16, dataBytes: Int) -> [UInt8] {
        let frames = dataBytes / (channels * bits / 8)
        return Array("RF64".utf8) + le32(0xFFFF_FFFF) + Array("WAVE".utf8)
            + Array("ds64".utf8) + le32(28) + le64(dataBytes + 72) + le64(dataBytes) + le64(frames) + le32(0)
            + fmt(channels: channels, rate: rate, bits: bits) + Array("data".utf8) + le32(0xFFFF_FFFF)
    }

    /// Writes `header` + `body`, then extends the file (sparse) to `size` bytes if given.
    public static func write(_ path: String, _ header: [UInt8], body: [UInt8] = [], size: Int? = nil) throws {
        try Data(header + body).write(to: URL(fileURLWithPath: path))
        if let size, truncate(path, off_t(size)) != 0 { throw WAVError.open(path, "cannot extend to \(size) bytes") }
    }
}
