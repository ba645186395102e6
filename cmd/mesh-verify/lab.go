package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/mesh-verify/mesh-verify/exitcode"
	"github.com/mesh-verify/mesh-verify/internal/sibling"
)

// labProgram is the lab's own executable (lab/cmd/mesh-verify-lab): the lab
// is kept out of this binary, and `mesh-verify lab ARGS` runs
// `mesh-verify-lab ARGS` as kubectl runs its plugins.
const labProgram = "mesh-verify-lab"

// newLabCmd is `mesh-verify lab`: it runs mesh-verify-lab, found beside
// this executable or on PATH, with the same arguments, standard streams
// and environment, and ends with its exit code.
func newLabCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "lab",
		Short: "Run a local multi-cluster lab (kwok API servers, tutorial apps, simulated mesh)",
		Long: `The lab runs real Kubernetes API servers (kwok, no containers), deploys a topology's
apps and backs every simulated pod with a real server on 127.0.0.1, so kubectl
get/logs/port-forward/scale work as on a real cluster (mesh-verify lab --help:
up, down, status, env, list).

The lab is a program of its own, mesh-verify-lab: mesh-verify lab ARGS runs the
mesh-verify-lab beside this executable, else on PATH, with the same arguments.
make build builds both into bin/; go install ./lab/cmd/mesh-verify-lab installs it from a clone.`,
		// Every argument, flags and --help included, is the lab's.
		DisableFlagParsing: true,
		ValidArgsFunction:  completeLab,
		RunE: func(cmd *cobra.Command, args []string) error {
			path, err := sibling.Find(labProgram)
			if err != nil {
				return exitcode.Wrap(exitcode.Setup, fmt.Errorf("mesh-verify lab: %w", err))
			}
			return runLab(cmd.Context(), path, args, cmd.InOrStdin(), cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
}

// runLab runs the lab program to its end. When the streams are this
// process's own, the lab program replaces this process (execLab, on Unix):
// signals, the terminal and the pid are then the lab's exactly, as when it
// is run directly. Otherwise (in-process callers, other systems) it runs
// as a child, and its exit code becomes this command's.
func runLab(ctx context.Context, path string, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	if canExec && stdin == os.Stdin && stdout == os.Stdout && stderr == os.Stderr {
		if err := execLab(path, args); err != nil {
			return exitcode.Wrap(exitcode.Setup, fmt.Errorf("mesh-verify lab: run %s: %w", path, err))
		}
	}
	if ctx == nil {
		ctx = context.Background()
	}
	c := exec.CommandContext(ctx, path, args...)
	c.Stdin, c.Stdout, c.Stderr = stdin, stdout, stderr
	err := c.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &ee) && ee.ExitCode() >= 0:
		// The lab printed its own message.
		return exitcode.Wrap(ee.ExitCode(), nil)
	default:
		return exitcode.Wrap(exitcode.Setup, fmt.Errorf("mesh-verify lab: run %s: %w", path, err))
	}
}

// completeLab completes `mesh-verify lab ...` by asking mesh-verify-lab
// (cobra's __complete protocol: one candidate a line, then
// :<directive>); without the lab program there is nothing to offer.
func completeLab(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
	path, err := sibling.Find(labProgram)
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	ctx := cmd.Context()
	if ctx == nil {
		ctx = context.Background()
	}
	var out bytes.Buffer
	c := exec.CommandContext(ctx, path, append(append([]string{cobra.ShellCompRequestCmd}, args...), toComplete)...)
	c.Stdout = &out
	if err := c.Run(); err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	return parseCompletions(out.String())
}

// parseCompletions reads the output of a program's __complete.
func parseCompletions(out string) ([]string, cobra.ShellCompDirective) {
	var got []string
	directive := cobra.ShellCompDirectiveNoFileComp
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		line := sc.Text()
		if d, ok := strings.CutPrefix(line, ":"); ok {
			if n, err := strconv.Atoi(d); err == nil {
				directive = cobra.ShellCompDirective(n)
			}
			continue
		}
		if line != "" {
			got = append(got, line)
		}
	}
	return got, directive
}
