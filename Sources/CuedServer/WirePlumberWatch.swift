import CuedSystem

/// WirePlumber's state on the bus thread: its files read at start and each time WirePlumber
/// replaces one (an inotify watch on its state directory; a second one on `$XDG_STATE_HOME`
/// while that directory does not exist yet: WirePlumber makes it when it first runs). No
/// timer: an idle cued does not wake for it. What it says goes to the host with the desktop's
/// other settings (`desktopChanged`).
extension DesktopBus {
    /// Arms the watches and reads the files once (the bus thread, at its start).
    func watchWirePlumber() {
        guard stateFiles.path != nil else { return }
        if !stateFiles.arm() { stateDirectory.arm() }
        readWirePlumber()
    }

    /// Something changed in a watched directory: a file again, or the state directory made.
    func wirePlumberEvent(files: Bool, directory: Bool) {
        if directory, stateDirectory.appeared() || stateFiles.fd < 0 {
            if stateFiles.arm() { stateDirectory.disarm() }
            readWirePlumber()
        }
        if files, stateFiles.appeared() { readWirePlumber() }
    }

    private func readWirePlumber() {
        guard let restore = stateFiles.path else { return }
        let dir = Path.directory(restore)
        func read(_ name: String) -> String? { try? UntrustedFile.readText(dir + "/" + name, maxBytes: WirePlumberState.maxBytes) }
        let restoreText = read("restore-stream"), nodes = read("default-nodes"), properties = read("stream-properties")
        let state = restoreText == nil && nodes == nil && properties == nil ? nil
            : WirePlumberState.parse(restoreStream: restoreText, defaultNodes: nodes, streamProperties: properties, directory: dir)
        guard state != portal.wirePlumber else { return }
        portal.wirePlumber = state
        sendDesktop()
    }
}
