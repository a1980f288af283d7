// libFuzzer entry for cued's TOML parser (coverage-guided, with AddressSanitizer):
//   swiftc -sanitize=fuzzer,address -parse-as-library Sources/CuedConfig/TOML*.swift fuzz/toml_libfuzzer.swift
// Any crash, hang or sanitizer report is a bug; rejecting input is fine.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzTOML(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let text = String(decoding: UnsafeBufferPointer(start: data, count: size), as: UTF8.self)
    _ = try? TOMLParser.parse(text)
    return 0
}
