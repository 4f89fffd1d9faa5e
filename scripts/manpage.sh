#!/usr/bin/env bash
# Writes stead(8), a manual page, from the command line's own help: every
# command and subcommand as `stead help …` prints it, so the page never
# says other than the binary does. scripts/package.sh ships it in the .deb.
#
#   scripts/manpage.sh STEAD_BINARY VERSION > stead.8
set -euo pipefail
stead="$1"
version="$2"

# roff: a backslash doubled, a line that starts with . or ' protected.
esc() { sed -e 's/\\/\\e/g' -e "s/^\([.']\)/\\\\\&\1/"; }

# The commands a help text lists (not `help` itself).
commands() { awk '/^Commands:/ { on = 1; next } on && /^[^ ]/ { on = 0 } on && NF { print $1 }' | grep -vx help || true; }

section() {
    local text
    text="$("$stead" help "$@")"
    printf '.SS "stead %s"\n.nf\n' "$*"
    printf '%s\n' "$text" | esc
    printf '.fi\n'
    local c
    for c in $(printf '%s\n' "$text" | commands); do
        section "$@" "$c"
    done
}

date="$(git log -1 --format=%cs 2>/dev/null || date -u +%F)"
cat <<HEAD
.TH STEAD 8 "$date" "stead $version" "System Administration"
.SH NAME
stead \\- keeps an edge node's containers true to what they were told to run
.SH SYNOPSIS
.B stead
.I command
.RI [ options ]
.SH DESCRIPTION
HEAD
"$stead" --help | awk 'NR == 1' | esc
cat <<'MID'
.PP
The agent runs as a systemd service (stead.service) and reads
/etc/stead/stead.toml; the same binary is the local client of its API.
The operator's tool for a fleet is another program, stead-plane, with
manual pages of its own (stead-plane man). The references are in
/usr/share/doc/stead/ (README.md, configuration.md, intentions.md, api.md,
operations.md, fleet.md and the rest).
.SH COMMANDS
MID
for c in $("$stead" --help | commands); do
    section "$c"
done
cat <<'TAIL'
.SH FILES
.TP
.I /etc/stead/stead.toml
the agent's configuration
.TP
.I /etc/stead/intentions.d/
intention files, one module each
.TP
.I /var/lib/stead/
the store, composed files and the device's key
.SH SEE ALSO
.BR systemctl (1),
.BR journalctl (1)
TAIL
