/// `cuectl shell-init SHELL`: a snippet for an interactive shell that plays
/// `pop` after a command that ran at least $CUED_LONG_SECONDS (default 10)
/// seconds and exited 0, `fail` after one that did not. cuectl runs in the
/// background with its output discarded: the prompt never waits for it and a
/// missing daemon shows nothing.
public enum ShellInit {
    public static let defaultSeconds = 10

    /// `cuectl`: the absolute path of the cuectl that printed the snippet.
    /// `socket` (absolute) and `app`, when the command line gave them
    /// (`cuectl --socket PATH --app NAME shell-init bash`), are written into
    /// the snippet's calls; without them the calls follow $CUED_SOCKET and
    /// the default socket, and the app is the shell's name.
    public static func snippet(_ shell: Shell, cuectl: String, socket: String? = nil, app: String? = nil) -> String {
        let quote = shell == .fish ? quotedFish : quotedPOSIX
        var exe = quote(cuectl)
        if let socket { exe += " --socket " + quote(socket) }
        exe += " --app " + quote(app ?? shell.rawValue)
        switch shell {
        case .bash: return bash(exe)
        case .zsh: return zsh(exe)
        case .fish: return fish(exe)
        }
    }

    /// Single-quoted for sh, bash and zsh.
    static func quotedPOSIX(_ s: String) -> String {
        "'" + s.split(separator: "'", omittingEmptySubsequences: false).joined(separator: "'\\''") + "'"
    }

    static func quotedFish(_ s: String) -> String {
        var out = "'"
        for c in s {
            if c == "'" || c == "\\" { out.append("\\") }
            out.append(c)
        }
        return out + "'"
    }

    // PS0 is expanded (in the shell itself, not a subshell) once a command line
    // has been read and before it runs; an empty line does not expand it. The
    // array subscript is an arithmetic expression whose assignment records the
    // start in µs, and the expansion itself is empty (`-}`: even under set -u).
    static func bash(_ exe: String) -> String {
        """
        # cued: pop (exit 0) or fail after a command that ran ≥ $CUED_LONG_SECONDS s (default \(defaultSeconds)).
        # From `cuectl shell-init bash`; in ~/.bashrc: eval "$(cuectl shell-init bash)"
        __cued_precmd() {
            local s=$? t0=${__cued_t0-} limit=${CUED_LONG_SECONDS-\(defaultSeconds)} cue=pop
            __cued_t0=
            if [[ -n $t0 ]]; then
                [[ $limit =~ ^[0-9]+$ ]] || limit=\(defaultSeconds)
                if (( ${EPOCHREALTIME/[.,]/} - t0 >= limit * 1000000 )); then
                    (( s == 0 )) || cue=fail
                    (\(exe) play "$cue" >/dev/null 2>&1 &)
                fi
            fi
            return $s
        }
        if [[ ${PS0-} != *__cued_t0* ]]; then
            PS0=${PS0-}'${__cued_ps0[__cued_t0=${EPOCHREALTIME/[.,]/}]-}'
        fi
        if [[ $(declare -p PROMPT_COMMAND 2>/dev/null) == "declare -a"* ]]; then
            [[ " ${PROMPT_COMMAND[*]} " == *" __cued_precmd "* ]] || PROMPT_COMMAND=(__cued_precmd "${PROMPT_COMMAND[@]}")
        elif [[ ${PROMPT_COMMAND-} != *__cued_precmd* ]]; then
            PROMPT_COMMAND="__cued_precmd${PROMPT_COMMAND:+;$PROMPT_COMMAND}"
        fi

        """
    }

    static func zsh(_ exe: String) -> String {
        """
        # cued: pop (exit 0) or fail after a command that ran ≥ $CUED_LONG_SECONDS s (default \(defaultSeconds)).
        # From `cuectl shell-init zsh`; in ~/.zshrc: eval "$(cuectl shell-init zsh)"
        zmodload zsh/datetime
        typeset -g __cued_t0=
        __cued_preexec() { __cued_t0=$EPOCHREALTIME }
        __cued_precmd() {
            local s=$? t0=$__cued_t0 limit=${CUED_LONG_SECONDS-\(defaultSeconds)} cue=pop
            __cued_t0=
            if [[ -n $t0 ]]; then
                [[ $limit == <-> ]] || limit=\(defaultSeconds)
                if (( EPOCHREALTIME - t0 >= limit )); then
                    (( s == 0 )) || cue=fail
                    \(exe) play $cue >/dev/null 2>&1 &!
                fi
            fi
            return $s
        }
        autoload -Uz add-zsh-hook
        add-zsh-hook preexec __cued_preexec
        add-zsh-hook precmd __cued_precmd

        """
    }

    static func fish(_ exe: String) -> String {
        """
        # cued: pop (exit 0) or fail after a command that ran ≥ $CUED_LONG_SECONDS s (default \(defaultSeconds)).
        # From `cuectl shell-init fish`; in ~/.config/fish/config.fish: cuectl shell-init fish | source
        function __cued_postexec --on-event fish_postexec
            set -l s $status
            set -l limit \(defaultSeconds)
            if set -q CUED_LONG_SECONDS; and string match -qr '^[0-9]+$' -- $CUED_LONG_SECONDS
                set limit $CUED_LONG_SECONDS
            end
            if test -n "$CMD_DURATION"; and test $CMD_DURATION -ge (math $limit \\* 1000)
                set -l cue pop
                test $s -eq 0; or set cue fail
                # A job of fish's own would be announced, and `disown` loses the race
                # against a cuectl that has already exited: sh starts it and returns.
                command /bin/sh -c '"$@" </dev/null >/dev/null 2>&1 &' __cued_play \(exe) play $cue
            end
        end

        """
    }
}
