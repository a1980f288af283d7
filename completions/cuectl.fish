# fish completion for cuectl(1). Cue names come from the running cued
# (`cuectl cues`, at most half a second); without a daemon, none are offered.

set -l commands ping play play-file stop state drag drop threshold detent session mute unmute profile reload cues preload status why config canberra doctor run shell-init

function __cuectl_cues
    set -l socket
    set -l tokens (commandline -opc)
    if set -l i (contains -i -- --socket $tokens)
        set socket --socket $tokens[(math $i + 1)]
    end
    for w in (timeout 0.5 cuectl $socket cues 2>/dev/null | string split ' ')
        echo $w
    end
    if test "$argv[1]" = theme
        for w in (timeout 0.5 cuectl $socket cues --theme 2>/dev/null | string split ' ')
            echo $w
        end
    end
end

# True when the word being completed is the Nth after `profile` (0: the first),
# past `profile app NAME` for N = 2.
function __cuectl_profile_at
    set -l tokens (commandline -opc)
    set -l i (contains -i -- profile $tokens)
    set -l after (math (count $tokens) - $i)
    test $after -eq $argv[1]; or return 1
    set -l next (math $i + 1)
    test $argv[1] -eq 0; or test "$tokens[$next]" = app
end

complete -c cuectl -f
complete -c cuectl -l socket -r -F -d "cued's socket"
complete -c cuectl -l session -x -d 'use the shared refresh session NAME'
complete -c cuectl -l app -x -d 'the app the cues are for'
complete -c cuectl -s h -l help -d 'print the help'
complete -c cuectl -l version -d 'print the version'

for entry in \
    'ping:check that cued answers' \
    'play:play a cue or a sound of the sound theme' \
    'play-file:play a sound file' \
    'stop:fade out what this app started' \
    'state:drive the refresh state' \
    'drag:report the pull distance' \
    'drop:the finger lifted' \
    "threshold:the session's release threshold" \
    'detent:a soft tick every POINTS of pull (off, config)' \
    'session:show or bind to a named session' \
    "mute:silence all cues, or one app's" \
    'unmute:undo mute' \
    "profile:show or set the profile (full, quiet, silent), or one app's" \
    'reload:re-read the config and cues' \
    'cues:list the loaded cues' \
    'preload:decode a theme sound ahead of its first play' \
    'status:daemon, device and latency figures' \
    'why:every reason a cue would not be heard, with its fix' \
    'config:validate a config file' \
    "canberra:libcanberra's event sounds through cued (on, off), or whether they are" \
    'doctor:a first-run check, with a fix for each problem' \
    'run:run a command with psst2, then pop or fail' \
    "shell-init:print a snippet for your shell's rc file"
    set -l kv (string split -m 1 : -- $entry)
    complete -c cuectl -n "not __fish_seen_subcommand_from $commands" -a $kv[1] -d $kv[2]
end

complete -c cuectl -n "__fish_seen_subcommand_from play preload why" -a "(__cuectl_cues theme)" -d cue
complete -c cuectl -n "__fish_seen_subcommand_from play preload" -l theme -x -d 'that sound theme: NAME or NAME:PROFILE'
complete -c cuectl -n "__fish_seen_subcommand_from canberra" -a "on off"
complete -c cuectl -n "__fish_seen_subcommand_from play play-file" -l gain -x -d 'gain in dB, -60 to 12'
complete -c cuectl -n "__fish_seen_subcommand_from play play-file" -l wait -d 'return once it has sounded'
complete -c cuectl -n "__fish_seen_subcommand_from play play-file" -l id -d "print the voice's id"
complete -c cuectl -n "__fish_seen_subcommand_from play play-file" -l loop -d 'until stopped (--loop=N, --loop=2.5s)'
complete -c cuectl -n "__fish_seen_subcommand_from play play-file" -l priority -x -d '-100 to 100 (default 0)'
complete -c cuectl -n "__fish_seen_subcommand_from play play-file" -l important -d 'through quiet and silent, for an allowed app'
complete -c cuectl -n "__fish_seen_subcommand_from play play-file" -l rate -x -d 'speed and pitch, 0.5 to 2'
complete -c cuectl -n "__fish_seen_subcommand_from play play-file" -l pitch -x -d 'pitch in cents, -1200 to 1200'
complete -c cuectl -n "__fish_seen_subcommand_from play-file" -F
complete -c cuectl -n "__fish_seen_subcommand_from stop" -a "all (__cuectl_cues)"
complete -c cuectl -n "__fish_seen_subcommand_from state" -a "pull release loading idle"
complete -c cuectl -n "__fish_seen_subcommand_from state" -l quiet -d 'set the state without a cue'
complete -c cuectl -n "__fish_seen_subcommand_from mute unmute" -a app
complete -c cuectl -n "__fish_seen_subcommand_from profile; and __cuectl_profile_at 0" -a "full quiet silent app"
complete -c cuectl -n "__fish_seen_subcommand_from profile; and __cuectl_profile_at 2" -a "full quiet silent default"
complete -c cuectl -n "__fish_seen_subcommand_from cues" -l theme -d "the sound theme's names"
complete -c cuectl -n "__fish_seen_subcommand_from cues" -l variants -d "each cue's variants"
complete -c cuectl -n "__fish_seen_subcommand_from detent" -a "off config"
complete -c cuectl -n "__fish_seen_subcommand_from status" -l json -d "cued's JSON"
complete -c cuectl -n "__fish_seen_subcommand_from config" -a check -F
complete -c cuectl -n "__fish_seen_subcommand_from shell-init" -a "bash zsh fish"
complete -c cuectl -n "__fish_seen_subcommand_from run" -a "(__fish_complete_subcommand -- run)"
