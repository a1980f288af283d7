import CuedProtocol

/// cuectl's help: the one list of its commands and options (the man page,
/// the completions and the tests are checked against it).
public enum CuectlHelp {
    /// cued's and cuectl's one version.
    public static var version: String { CuedVersion.string }

    public static let text = """
        usage: cuectl [--socket PATH] [--session NAME] [--app NAME] COMMAND [ARGS]
        commands:
          ping                      check that cued answers
          play CUE [--gain DB] [--wait] [--id] [--loop[=N|=SECONDSs]] [--priority P] [--important]
               [--rate R] [--pitch CENTS] [--theme=NAME[:PROFILE]]
                                    play a cue, else a sound of the desktop's sound theme (bell,
                                    message-new-instant…); gain -60…12 dB; --wait: return only once
                                    it has sounded (exit 1 if it could not); --id: print the voice's
                                    id; --loop: until stopped, N times or for SECONDS (it goes
                                    on after cuectl exits, but with --wait); --priority:
                                    -100…100, the lowest is taken first when all voices are busy;
                                    --important: through the quiet and silent profiles, for the
                                    apps the config's [profiles] important_apps lists; --rate:
                                    speed and pitch 0.5…2; --pitch: -1200…1200 cents; --theme:
                                    that sound theme (and output profile) instead of the config's
          play-file PATH [--gain DB] [--wait] [--id] [--loop[=…]] [--priority P] [--important] [--rate R]
               [--pitch CENTS]
                                    play a sound file (relative to the current directory)
          preload CUE [--theme=NAME[:PROFILE]]
                                    decode a theme sound ahead, so its first play is as quick as
                                    the next (returns once it is ready)
          stop [CUE|all|id ID]      fade out what this app started (only CUE, or everything, or
                                    the voice ID); prints how many voices stopped
          state pull|release|loading|idle [--quiet]
                                    drive the refresh state; prints the cue that sounded or -
                                    (--quiet: set it without any cue)
          drag POINTS               report the pull distance; prints the cue or -
          drop                      the finger lifted; prints the cue or -
          threshold POINTS          the session's release threshold (default 65)
          detent [POINTS|off|config]
                                    a soft tick every POINTS of pull below the threshold, for this
                                    session (config: the config's [pull] detent_points again)
          session [NAME]            show (or bind to) a named session: NAME STATE THRESHOLD
          mute [app NAME]           silence all cues, or one app's (persists across restarts)
          unmute [app NAME]         undo mute
          profile [full|quiet|silent]
                                    show or set the profile: quiet plays every cue softer, silent
                                    none (persists across restarts; mute still wins)
          profile app NAME [full|quiet|silent|default]
                                    show (the profile its cues get) or set one app's profile;
                                    default: the config's again
          reload                    re-read the config and cues (all or nothing)
          cues [--theme|--variants] the loaded cues (--theme: the sound theme's names; --variants:
                                    each cue with how many variants it plays in turn)
          status [--json]           daemon, device and latency figures
          config check [PATH]       validate a config file without a daemon (exit 78 if bad)
          canberra [on|off]         libcanberra's event sounds (GNOME Shell, KDE and GTK apps,
                                    feedbackd) through cued, or back; alone: whether they are, and
                                    which apps play through it
          doctor                    a first-run check: is cued running, where its sound goes, the
                                    sound server, theme, config and units, a fix for each problem
                                    (exit 0 only if a cue would be heard or recorded)
          run [--session NAME] [--app NAME] -- COMMAND [ARGS…]
                                    run a command: psst2 as it starts, pop when it exits 0, fail
                                    otherwise; exits with its status (128+N for signal N)
          shell-init bash|zsh|fish  print a snippet for your shell's rc file: pop or fail after
                                    every command that ran at least $CUED_LONG_SECONDS (10)
        options:
          --socket PATH             cued's socket (default: $CUED_SOCKET, else
                                    $XDG_RUNTIME_DIR/cued/cued.sock)
          --session NAME            use the shared refresh session NAME (state carries over
                                    between cuectl calls)
          --app NAME                the app the cues are for (default: $CUED_APP, else the name
                                    of cuectl's parent process; for run, the command's name)
          -h, --help                this help
          --version                 cuectl's version
        exit: 0 ok, 1 error reply, 64 usage, 69 no daemon, 78 bad config; run: the command's status
        """

    /// Every command and option the help names, for checks of the man page and completions.
    public static let commands = ["ping", "play", "play-file", "stop", "state", "drag", "drop", "threshold", "detent",
                                  "session", "mute", "unmute", "profile", "reload", "cues", "preload", "status", "config", "canberra", "doctor",
                                  "run", "shell-init"]
    public static let options = ["--socket", "--session", "--app", "--gain", "--wait", "--id", "--loop", "--priority", "--important",
                                 "--rate", "--pitch", "--quiet", "--theme", "--variants", "--json", "--help", "--version"]
}
