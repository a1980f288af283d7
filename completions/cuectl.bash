# bash completion for cuectl(1). Cue names come from the running cued
# (`cuectl cues`, at most half a second); without a daemon, none are offered.

# The cue names (and with `theme`, the sound theme's too), one a line.
_cuectl_cues() {
    local socket=$1
    { timeout 0.5 cuectl ${socket:+--socket "$socket"} cues
      [[ $2 == theme ]] && timeout 0.5 cuectl ${socket:+--socket "$socket"} cues --theme
    } 2>/dev/null | tr ' ' '\n' | sort -u
}

_cuectl() {
    local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]}
    local commands="ping play play-file stop state drag drop threshold detent session mute unmute profile reload cues preload status why config canberra doctor run shell-init"
    local i word verb= socket= operands=0
    for ((i = 1; i < COMP_CWORD; i++)); do
        word=${COMP_WORDS[i]}
        case $word in
            --socket) socket=${COMP_WORDS[i+1]}; ((i++)) ;;
            --socket=*) socket=${word#--socket=} ;;
            --session|--app|--gain|--priority|--rate|--pitch) ((i++)) ;;
            --) if [[ $verb == run ]]; then _cuectl_command $((i + 1)); return; fi ;;
            -*) ;;
            *)
                if [[ -z $verb ]]; then verb=$word
                elif [[ $verb == run ]]; then _cuectl_command $i; return
                else ((operands++)); fi ;;
        esac
    done
    case $prev in
        --socket) COMPREPLY=($(compgen -f -- "$cur")); return ;;
        --session|--app|--gain|--priority|--rate|--pitch) return ;;
    esac
    if [[ $cur == -* ]]; then
        local options="--socket --session --app --help --version"
        case $verb in
            play) options+=" --gain --wait --id --loop --priority --important --rate --pitch --theme=" ;;
            play-file) options+=" --gain --wait --id --loop --priority --important --rate --pitch" ;;
            preload) options+=" --theme=" ;;
            state) options+=" --quiet" ;;
            cues) options+=" --theme --variants" ;;
            status) options+=" --json" ;;
            run) options="--session --app --" ;;
        esac
        COMPREPLY=($(compgen -W "$options" -- "$cur"))
        return
    fi
    case $verb in
        "") COMPREPLY=($(compgen -W "$commands" -- "$cur")) ;;
        play|preload|why) ((operands == 0)) && COMPREPLY=($(compgen -W "$(_cuectl_cues "$socket" theme)" -- "$cur")) ;;
        play-file) ((operands == 0)) && COMPREPLY=($(compgen -f -- "$cur")) ;;
        stop) ((operands == 0)) && COMPREPLY=($(compgen -W "all $(_cuectl_cues "$socket")" -- "$cur")) ;;
        state) ((operands == 0)) && COMPREPLY=($(compgen -W "pull release loading idle" -- "$cur")) ;;
        mute|unmute) ((operands == 0)) && COMPREPLY=($(compgen -W "app" -- "$cur")) ;;
        profile)
            if ((operands == 0)); then COMPREPLY=($(compgen -W "full quiet silent app" -- "$cur"))
            elif ((operands == 2)) && [[ ${COMP_WORDS[COMP_CWORD-2]} == app ]]; then
                COMPREPLY=($(compgen -W "full quiet silent default" -- "$cur")); fi ;;
        config)
            if ((operands == 0)); then COMPREPLY=($(compgen -W "check" -- "$cur"))
            elif ((operands == 1)); then COMPREPLY=($(compgen -f -- "$cur")); fi ;;
        shell-init) ((operands == 0)) && COMPREPLY=($(compgen -W "bash zsh fish" -- "$cur")) ;;
        canberra) ((operands == 0)) && COMPREPLY=($(compgen -W "on off" -- "$cur")) ;;
        detent) ((operands == 0)) && COMPREPLY=($(compgen -W "off config" -- "$cur")) ;;
        run) COMPREPLY=($(compgen -c -- "$cur")) ;;
    esac
}

# The command after `run --`: bash-completion's own completion for it when
# available, else command names, then file names.
_cuectl_command() {
    local start=$1
    if declare -F _command_offset >/dev/null; then
        _command_offset "$start"
    elif ((COMP_CWORD == start)); then
        COMPREPLY=($(compgen -c -- "${COMP_WORDS[COMP_CWORD]}"))
    else
        COMPREPLY=($(compgen -f -- "${COMP_WORDS[COMP_CWORD]}"))
    fi
}

complete -F _cuectl cuectl
