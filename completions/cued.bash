# bash completion for cued(1).

_cued() {
    local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]}
    case $prev in
        --socket|--config|--check-config) COMPREPLY=($(compgen -f -- "$cur")); return ;;
        --sounds) COMPREPLY=($(compgen -d -- "$cur")); return ;;
        --sink) COMPREPLY=($(compgen -W "auto alsa alsa:default pipewire null wav:" -- "$cur")); return ;;
        --log-level) COMPREPLY=($(compgen -W "trace debug info notice warning error critical" -- "$cur")); return ;;
        --latency-ms|--voices|--idle-close-s|--session-ttl-s|--rate-limit|--max-clients|--sound-budget-mb) return ;;
    esac
    COMPREPLY=($(compgen -W "--socket --config --check-config --sink --latency-ms --voices --idle-close-s
        --session-ttl-s --rate-limit --max-clients --sounds --sound-budget-mb --force --muted --unmuted --log-level --help --version" -- "$cur"))
}

complete -F _cued cued
