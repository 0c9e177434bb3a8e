# SPDX-License-Identifier: GPL-2.0-only
# bash completion for busprof: subcommands, and each subcommand's options as
# its own --help lists them (so the completion never goes stale).
_busprof() {
    local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]} sub= i
    for ((i = 1; i < COMP_CWORD; i++)); do
        case ${COMP_WORDS[i]} in -*) ;; *) sub=${COMP_WORDS[i]}; break ;; esac
    done
    case $prev in
        --db|--output|-o|--symbols) COMPREPLY=($(compgen -f -- "$cur")); return ;;
        --socket|--sim-socket) COMPREPLY=($(compgen -f -- "$cur")); return ;;
        --format)
            if [[ $sub == export ]]; then
                COMPREPLY=($(compgen -W "chrome-trace csv" -- "$cur"))
            else
                COMPREPLY=($(compgen -W "table csv json" -- "$cur"))
            fi
            return ;;
        --by) COMPREPLY=($(compgen -W "port vcpu task rip" -- "$cur")); return ;;
        --table)
            COMPREPLY=($(compgen -W "transactions sessions markers events latency_totals
                latency_buckets" -- "$cur"))
            return ;;
        --backend) COMPREPLY=($(compgen -W "sim xen" -- "$cur")); return ;;
        --bus) COMPREPLY=($(compgen -W "sim port" -- "$cur")); return ;;
    esac
    if [[ -z $sub || ($sub == help && $cur != -*) ]]; then
        local subs
        subs=$("${COMP_WORDS[0]}" --help 2>/dev/null |
               sed -n '/^Subcommands:/,$s/^  \([a-z][a-z-]*\).*/\1/p')
        [[ -z $sub ]] && subs+=" --help --help-all -V --version"
        COMPREPLY=($(compgen -W "$subs" -- "$cur"))
    elif [[ $cur == -* ]]; then
        local opts
        opts=$("${COMP_WORDS[0]}" "$sub" --help 2>/dev/null |
               grep -o -- '--[a-z][a-z-]*' | sort -u)
        COMPREPLY=($(compgen -W "$opts" -- "$cur"))
    elif [[ $sub =~ ^(daemon|policy|trap|untrap)$ ]] && command -v xl >/dev/null; then
        COMPREPLY=($(compgen -W "$(xl list 2>/dev/null | awk 'NR > 2 {print $1}')" -- "$cur"))
    fi
}
complete -F _busprof busprof
