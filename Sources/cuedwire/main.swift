// cuedwire c|python: the wire's words (Sources/CuedProtocol/Wire.swift) as the C header of
// the libcanberra plug-in or bench's Python module; `make wire` writes both.
import CuedProtocol
#if canImport(Glibc)
import Glibc
#endif

switch CommandLine.arguments.dropFirst().first {
case "c": print(WireExport.cHeader, terminator: "")
case "python": print(WireExport.pythonModule, terminator: "")
default:
    print("usage: cuedwire c|python")
    exit(64)
}
