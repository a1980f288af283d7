// libFuzzer entry for the protocol parser: `make fuzz` builds it with
// swiftc -sanitize=fuzzer,address together with Sources/CuedProtocol.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    if let r = try? RequestParser.parse(bytes) { _ = r.line }
    return 0
}
