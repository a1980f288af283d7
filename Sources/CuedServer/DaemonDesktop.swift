import CuedProtocol

/// What the D-Bus face needs of the daemon's profiles.
extension Daemon {
    /// The bus's `Profile` property follows the daemon's profile, whoever changes it.
    func connectProfile(to bus: DesktopBus) {
        bus.setInitialProfile(switches.profile.rawValue)
        let previous = switches.onProfileChange
        switches.onProfileChange = { [unowned self] p in
            previous?(p)
            desktop?.profileChanged(p)
            bus.profileChanged(p.rawValue)
        }
    }
}
