package kube

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"time"

	"k8s.io/client-go/rest"
)

// ExecWrapperArg is the first argument of mesh-verify's own run as the
// wrapper of a kubeconfig exec credential plugin (IsExecWrapperCall).
//
// client-go runs the plugin again whenever the credential expires (an EKS
// token lasts 15 minutes), inside a request, with no timeout: a plugin
// that hangs on a refresh would hang the run, and a CI gate with it,
// forever. So, once the preflight has run the plugin itself
// (preflightExec), the client's exec config names mesh-verify instead,
// which runs the same command with the same arguments, environment, stdin
// and stdout (the credential passes straight through, never read here),
// in its own process group, and kills the group after --exec-timeout
// (README.md "Connecting to clusters").
const ExecWrapperArg = "__mesh-verify-exec-plugin"

// IsExecWrapperCall says whether args (os.Args) is client-go starting
// the wrapper: then main calls RunExecWrapper(args[2:]) and exits.
func IsExecWrapperCall(args []string) bool {
	return len(args) > 1 && args[1] == ExecWrapperArg
}

// RunExecWrapper runs "TIMEOUT -- COMMAND ARGS..." and returns the exit
// code: the plugin's, or 1 when it did not finish in time (said on
// stderr, which client-go passes to the user).
func RunExecWrapper(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) < 3 || args[1] != "--" {
		fmt.Fprintf(stderr, "mesh-verify %s: want TIMEOUT -- COMMAND [ARGS...]\n", ExecWrapperArg)
		return 2
	}
	timeout, err := time.ParseDuration(args[0])
	if err != nil || timeout <= 0 {
		fmt.Fprintf(stderr, "mesh-verify %s: timeout %q: want a positive duration\n", ExecWrapperArg, args[0])
		return 2
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, args[2], args[3:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdin, stdout, stderr
	// As in preflightExec: the group is killed, so a plugin's children
	// cannot outlive it holding the pipes client-go reads.
	killGroupOnCancel(cmd)
	err = cmd.Run()
	var exitErr *exec.ExitError
	switch {
	case ctx.Err() != nil:
		fmt.Fprintf(stderr, "mesh-verify: exec credential plugin %s gave no credentials within %s (--exec-timeout) while refreshing them; stopped it\n", args[2], timeout)
		return 1
	case errors.As(err, &exitErr):
		return exitErr.ExitCode()
	case err != nil:
		fmt.Fprintf(stderr, "mesh-verify: exec credential plugin %s could not run: %v\n", args[2], err)
		return 1
	}
	return 0
}

// wrapExec is cfg with its exec plugin run through wrapper (an
// executable that answers IsExecWrapperCall: mesh-verify itself), bounded
// by timeout. cfg itself is not changed.
func wrapExec(cfg *rest.Config, wrapper string, timeout time.Duration) *rest.Config {
	if cfg.ExecProvider == nil || wrapper == "" {
		return cfg
	}
	out := rest.CopyConfig(cfg)
	ec := *cfg.ExecProvider
	ec.Args = append([]string{ExecWrapperArg, timeout.String(), "--", ec.Command}, ec.Args...)
	ec.Command = wrapper
	out.ExecProvider = &ec
	return out
}

// ExecWrapper is the executable to name as the wrapper: this program.
func ExecWrapper() string {
	p, err := os.Executable()
	if err != nil {
		return ""
	}
	return p
}
