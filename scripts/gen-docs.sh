#!/bin/sh
# scripts/gen-docs.sh ROCELAB OUTDIR [CHANGELOG]: the man pages (OUTDIR/man1/rocelab.1.gz, rocelab-COMMAND.1.gz)
# and the bash completion (OUTDIR/completions/rocelab), written by the binary from its own
# command table, so they say what --help says. The build runs it (target docs).
set -eu
rocelab=$1
out=$2
mkdir -p "$out/man1" "$out/completions"
"$rocelab" help man > "$out/man1/rocelab.1"
# The commands are the first words of the lines under "commands:" in the general help.
for c in $("$rocelab" --help | sed -n '/^commands:/,/^$/p' | awk 'NF && $1 != "commands:" {print $1}'); do
  "$rocelab" help man "$c" > "$out/man1/rocelab-$c.1"
done
"$rocelab" completion bash > "$out/completions/rocelab"
gzip -9nf "$out"/man1/*.1  # Debian ships man pages compressed (-n: no name or time, reproducible)
if [ -n "${3:-}" ]; then  # the package's changelog, compressed as Debian ships it
  gzip -9nc "$3" > "$out/changelog.gz"
fi
