package cli

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"syscall"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"github.com/leaseside/leaseside/ipc"
)

// Positional-argument checks that say what was wrong: the argument that is
// missing by its name in the usage line, the one too many by its value.

// noArgs accepts no positional argument; on a command with subcommands an
// argument is an unknown subcommand, with suggestions.
func noArgs(cmd *cobra.Command, args []string) error {
	if len(args) == 0 {
		return nil
	}
	if cmd.HasAvailableSubCommands() {
		msg := fmt.Sprintf("unknown command %q for %q", args[0], cmd.CommandPath())
		if cmd.SuggestionsMinimumDistance <= 0 {
			cmd.SuggestionsMinimumDistance = 2
		}
		if s := cmd.SuggestionsFor(args[0]); len(s) > 0 {
			msg += fmt.Sprintf(": did you mean %s?", strings.Join(s, " or "))
		}
		return usageError{fmt.Errorf("%s", msg)}
	}
	return usagef("unexpected argument %q: '%s' takes no arguments", args[0], cmd.CommandPath())
}

// exactArgs wants exactly the named arguments, in order. An argument
// named NAME is a lease name, and must be a valid one.
func exactArgs(names ...string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) < len(names) {
			return usagef("missing %s: '%s %s'", names[len(args)], cmd.CommandPath(), strings.Join(names, " "))
		}
		if len(args) > len(names) {
			return usagef("unexpected argument %q: '%s' takes %s", args[len(names)], cmd.CommandPath(), strings.Join(names, " "))
		}
		return checkNames(names, args)
	}
}

// optionalArg accepts at most the one named argument.
func optionalArg(name string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) > 1 {
			return usagef("unexpected argument %q: '%s' takes at most one %s", args[1], cmd.CommandPath(), name)
		}
		return checkNames([]string{name}, args)
	}
}

// checkNames checks the arguments named NAME as lease names.
func checkNames(names, args []string) error {
	for i, n := range names {
		if n != "NAME" || i >= len(args) {
			continue
		}
		var ie *ipc.Error
		if err := ipc.ValidateName(args[i]); errors.As(err, &ie) {
			return usagef("NAME %q: %s", args[i], ie.Message)
		}
	}
	return nil
}

// commandArgs wants the named arguments, then "--" and a command line.
func commandArgs(names ...string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		dash := cmd.ArgsLenAtDash()
		if dash < 0 {
			if err := exactArgs(names...)(cmd, args); err != nil && len(args) < len(names) {
				return err
			}
			return usagef("missing '-- CMD': '%s %s -- CMD [ARGS...]' (put the command after --)", cmd.CommandPath(), strings.Join(names, " "))
		}
		if err := exactArgs(names...)(cmd, args[:dash]); err != nil {
			return err
		}
		if len(args) == dash {
			return usagef("missing CMD after '--'")
		}
		return nil
	}
}

// flagError is a flag parse error as a usage error, with a hint for the
// single-dash spelling (-socket) that Go's flag package took: here a
// single dash is for one-letter shorthands only.
func flagError(cmd *cobra.Command, err error) error {
	msg := err.Error()
	if _, arg, ok := strings.Cut(msg, "unknown shorthand flag: "); ok {
		if _, word, ok := strings.Cut(arg, " in -"); ok && len(word) > 1 {
			name, _, _ := strings.Cut(word, "=")
			if cmd.Flags().Lookup(name) != nil {
				return usagef("unknown flag -%s: spell it --%s", word, name)
			}
		}
	}
	return usageError{err}
}

// checkLimit refuses a semaphore limit outside what the protocol carries.
func checkLimit(limit int) error {
	if limit < 1 || limit > ipc.MaxLimit {
		return usagef("--limit %d: how many may hold NAME at once, 1 (the default: one holder, an exclusive lease) to %d", limit, ipc.MaxLimit)
	}
	return nil
}

// checkShared refuses --shared with --limit above 1: a shared lock has
// any number of shared holders, a semaphore a limit; they are different
// kinds of lock on a name.
func checkShared(shared bool, limit int) error {
	if shared && limit > 1 {
		return usagef("--shared and --limit %d exclude each other: a shared (read) lock has any number of shared holders and no limit; --limit makes a semaphore, another kind of lock", limit)
	}
	return nil
}

// parseSignal reads a signal flag: SIGUSR1, USR1, usr1 or 10; "" is none
// (0).
func parseSignal(s string) (syscall.Signal, error) {
	if s == "" {
		return 0, nil
	}
	if n, err := strconv.Atoi(s); err == nil {
		if n < 1 || n > 64 {
			return 0, usagef("--jeopardy-signal %s: signal numbers are 1 to 64", s)
		}
		return syscall.Signal(n), nil
	}
	name := strings.ToUpper(s)
	if !strings.HasPrefix(name, "SIG") {
		name = "SIG" + name
	}
	if sig := unix.SignalNum(name); sig != 0 {
		return sig, nil
	}
	return 0, usagef("--jeopardy-signal %s: no such signal (try SIGUSR1, USR2 or a number)", s)
}
