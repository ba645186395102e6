package kube

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"k8s.io/client-go/rest"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// DefaultExecTimeout bounds one run of a kubeconfig exec credential plugin
// (gke-gcloud-auth-plugin, aws eks get-token, kubelogin): a cold cache or
// a browser-less OIDC refresh can take tens of seconds, far longer than
// the reachability probe should wait for an API server.
const DefaultExecTimeout = 2 * time.Minute

// Exec credential plugins and the reachability probe (README.md
// "Connecting to clusters"):
//
// client-go runs a kubeconfig's exec plugin inside its RoundTripper, with
// no timeout and without the request's context, so a plugin that hangs
// blocks the call forever and a slow one used to be reported as "API
// server unreachable" by the 5 s probe. Connect therefore runs the plugin
// itself first (preflightExec: the same command, arguments, environment
// and KUBERNETES_EXEC_INFO as client-go, killed after
// Options.ExecTimeout): a plugin that fails, hangs or prints no
// credential is reported as the plugin (ReasonExecPlugin: command,
// kubeconfig user, exit status and the tail of its stderr), and client-go
// never starts a copy of it that nobody could stop. Only then does the
// probe run, in a goroutine bounded by ExecTimeout+ProbeTimeout since
// client-go runs the plugin again (plugins like gke-gcloud-auth-plugin
// and kubelogin cache their credential, so the second run is quick; an
// uncached slow plugin costs its time twice, the price of never leaving a
// hung process behind). Refreshes during a run stay client-go's (it keeps
// the credential until it expires), but client-go runs the plugin through
// mesh-verify itself, which bounds each run by the same timeout
// (execwrap.go).

// execCredential is the part of a client.authentication.k8s.io
// ExecCredential (v1 and v1beta1 share it) the preflight reads.
type execCredential struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Status     *struct {
		Token                 string `json:"token"`
		ClientCertificateData string `json:"clientCertificateData"`
		ClientKeyData         string `json:"clientKeyData"`
	} `json:"status"`
}

// execInfo is the KUBERNETES_EXEC_INFO client-go hands the plugin.
type execInfo struct {
	APIVersion string       `json:"apiVersion"`
	Kind       string       `json:"kind"`
	Spec       execInfoSpec `json:"spec"`
}

type execInfoSpec struct {
	Interactive bool             `json:"interactive"`
	Cluster     *execInfoCluster `json:"cluster,omitempty"`
}

type execInfoCluster struct {
	Server                   string `json:"server"`
	TLSServerName            string `json:"tls-server-name,omitempty"`
	InsecureSkipTLSVerify    bool   `json:"insecure-skip-tls-verify,omitempty"`
	CertificateAuthorityData string `json:"certificate-authority-data,omitempty"`
}

// ExecPluginError says what went wrong with a kubeconfig exec credential
// plugin. It never carries the plugin's stdout (the credential).
type ExecPluginError struct {
	Command string
	// User is the kubeconfig user (users[].name) the plugin belongs to.
	User    string
	Timeout time.Duration
	// What happened: "gave no credentials within 2m0s", "exited with
	// status 1", "printed no ExecCredential", ...
	What string
	// Stderr is the tail of the plugin's stderr.
	Stderr string
}

func (e *ExecPluginError) Error() string {
	s := fmt.Sprintf("exec credential plugin %s (kubeconfig user %s) %s", e.Command, e.User, e.What)
	if e.Stderr != "" {
		s += "; its stderr ends: " + e.Stderr
	}
	return s
}

// stderrTail is the last lines of a plugin's stderr, short enough for a
// message.
func stderrTail(b []byte) string {
	const max = 600
	s := strings.TrimSpace(string(b))
	if len(s) > max {
		s = "…" + s[len(s)-max:]
	}
	return strings.Join(strings.Fields(strings.ReplaceAll(s, "\n", " | ")), " ")
}

// preflightExec runs cfg's exec plugin once with a timeout and checks
// that it prints an ExecCredential with a credential in it.
func preflightExec(ctx context.Context, cfg *rest.Config, user string, timeout time.Duration) error {
	ec := cfg.ExecProvider
	if timeout <= 0 {
		timeout = DefaultExecTimeout
	}
	perr := &ExecPluginError{Command: ec.Command, User: user, Timeout: timeout}
	if ec.InteractiveMode == clientcmdapi.AlwaysExecInteractiveMode {
		perr.What = "needs a terminal (interactiveMode: Always), and mesh-verify runs non-interactively"
		return perr
	}
	info := execInfo{APIVersion: ec.APIVersion, Kind: "ExecCredential"}
	if ec.ProvideClusterInfo {
		c := &execInfoCluster{Server: cfg.Host, TLSServerName: cfg.ServerName, InsecureSkipTLSVerify: cfg.Insecure}
		if len(cfg.CAData) > 0 {
			c.CertificateAuthorityData = base64.StdEncoding.EncodeToString(cfg.CAData)
		}
		info.Spec.Cluster = c
	}
	infoJSON, err := json.Marshal(info)
	if err != nil {
		return fmt.Errorf("encode KUBERNETES_EXEC_INFO: %w", err)
	}
	pctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(pctx, ec.Command, ec.Args...)
	cmd.Env = os.Environ()
	for _, e := range ec.Env {
		cmd.Env = append(cmd.Env, e.Name+"="+e.Value)
	}
	cmd.Env = append(cmd.Env, "KUBERNETES_EXEC_INFO="+string(infoJSON))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	// The plugin gets its own process group, and a timeout kills the
	// group: its children (a shell's sleep, a helper it started) would
	// otherwise outlive it and hold the pipes open. WaitDelay stops
	// waiting for the pipes shortly after in any case.
	killGroupOnCancel(cmd)
	err = cmd.Run()
	perr.Stderr = stderrTail(stderr.Bytes())
	var exitErr *exec.ExitError
	switch {
	case ctx.Err() != nil:
		return ctx.Err()
	case pctx.Err() != nil:
		perr.What = fmt.Sprintf("gave no credentials within %s (--exec-timeout)", timeout)
		return perr
	case errors.As(err, &exitErr):
		perr.What = fmt.Sprintf("exited with status %d", exitErr.ExitCode())
		return perr
	case errors.Is(err, exec.ErrNotFound) || errors.Is(err, os.ErrNotExist):
		perr.What = "is not installed (not found in PATH)"
		if ec.InstallHint != "" {
			perr.What += ": " + strings.TrimSpace(ec.InstallHint)
		}
		return perr
	case err != nil:
		perr.What = fmt.Sprintf("could not run: %v", err)
		return perr
	}
	var cred execCredential
	if err := json.Unmarshal(stdout.Bytes(), &cred); err != nil || cred.Kind != "ExecCredential" {
		perr.What = "printed no ExecCredential on stdout"
		return perr
	}
	if cred.APIVersion != ec.APIVersion {
		perr.What = fmt.Sprintf("answered apiVersion %q, the kubeconfig asks for %q", cred.APIVersion, ec.APIVersion)
		return perr
	}
	if s := cred.Status; s == nil || (s.Token == "" && (s.ClientCertificateData == "" || s.ClientKeyData == "")) {
		perr.What = "printed an ExecCredential without a token or client certificate and key"
		return perr
	}
	return nil
}

// killGroupOnCancel gives cmd its own process group and makes its
// context's end kill the whole group; WaitDelay stops waiting for the
// pipes shortly after in any case.
func killGroupOnCancel(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = time.Second
}
