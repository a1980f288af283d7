// libFuzzer entry for cued's JSON parser (feedbackd themes, status): `make fuzz` builds it
// with swiftc -sanitize=fuzzer,address together with Sources/CuedProtocol. Any crash (a
// stack overflow on deep nesting among them) or sanitizer report is a bug.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzJSON(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let text = String(decoding: UnsafeBufferPointer(start: data, count: size), as: UTF8.self)
    if let v = try? JSON.parse(text) { _ = v.encoded }
    return 0
}
