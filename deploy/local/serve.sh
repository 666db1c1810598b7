#!/usr/bin/env bash
# Runs a command in the foreground (`make run`: bin/importd serve) and, when it
# ends, Ctrl-C included, says that the local PostgreSQL and Redis are still
# running and how to stop them: they are started by `make run` but outlive it,
# so that the next run starts at once.
#
#   deploy/local/serve.sh COMMAND [ARG...]
#
# The command is not exec'ed: the script stays its parent to print the note
# (and demo.sh's vendor simulator, tied to the pid of `make run`'s shell,
# which execs this script, lives as long as the command).
set -uo pipefail

if (($# == 0)); then
	echo "usage: deploy/local/serve.sh COMMAND [ARG...]" >&2
	exit 2
fi

# A handler rather than an ignored signal: the command inherits the default
# action for SIGINT and stops on Ctrl-C, while this script lives on to print
# the note.
trap : INT TERM
trap 'echo; echo "$1 stopped. PostgreSQL and Redis are still running: make stack-down (or deploy/local/stack.sh down) stops them; their data stays in .local/."' EXIT
"$@"
status=$?
exit "$status"
