package plugin

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/toolgate/toolgate/internal/host/config"
	"github.com/toolgate/toolgate/internal/host/gateway"
	"github.com/toolgate/toolgate/internal/host/secrets"
)

// Kind command runs a host executable:
//
//	plugins:
//	  gh: {kind: command, command: /usr/bin/gh, env: {GH_TOKEN: "{{secret:gh_token}}"}}
//
// The process gets command + args + the call's argv, never through a
// shell. Its environment is built only from the plugin's env (secrets
// resolved for the calling agent and this tool) over three defaults:
// PATH=/usr/local/bin:/usr/bin:/bin, LANG=C.UTF-8 and HOME=the gateway
// user's home, so tools such as git and ssh find the host's configuration
// and keys. Nothing of the gateway's own environment leaks in.
//
// It runs in its own process group; when it exits, times out or the call
// is cancelled, the whole group is killed (SIGTERM, then SIGKILL after
// killGrace), so no background child outlives the call with its secrets.
func init() { Register("command", newCommand) }

const (
	// killGrace is how long a cancelled handler may take to exit after SIGTERM.
	killGrace = 2 * time.Second
	// drainGrace bounds waiting for output after the process group is gone:
	// only a child that escaped the group (setsid) can hold the pipes open.
	drainGrace = 2 * time.Second
)

type command struct {
	path string
	args []string
	env  map[string]string // values may hold {{secret:NAME}}
	base map[string]string
}

func newCommand(name string, p config.Plugin, env Env) ([]gateway.Tool, error) {
	if !filepath.IsAbs(p.Command) {
		return nil, fmt.Errorf("command: %q is not an absolute host path (no PATH is searched)", p.Command)
	}
	if err := CheckSecrets(p, env); err != nil {
		return nil, err
	}
	home, err := os.UserHomeDir()
	if err != nil {
		home = "/"
	}
	c := &command{path: p.Command, args: p.Args, env: p.Env, base: map[string]string{
		"PATH": "/usr/local/bin:/usr/bin:/bin",
		"LANG": "C.UTF-8",
		"HOME": home,
	}}
	t, err := newTool(name, p, env, c.run)
	if err != nil {
		return nil, err
	}
	return []gateway.Tool{t}, nil
}

func (c *command) run(ctx context.Context, inv *Invocation) (int, error) {
	vars := make(map[string]string, len(c.base)+len(c.env))
	for k, v := range c.base {
		vars[k] = v
	}
	for k, v := range c.env {
		x, err := secrets.Expand(v, inv.Secret)
		if err != nil {
			return 0, fmt.Errorf("env %s: %w", k, err)
		}
		vars[k] = x
	}
	environ := make([]string, 0, len(vars))
	for _, k := range slices.Sorted(maps.Keys(vars)) {
		environ = append(environ, k+"="+vars[k])
	}

	cmd := &exec.Cmd{
		Path:        c.path,
		Args:        append(append([]string{c.path}, c.args...), inv.Argv...),
		Env:         environ,
		Dir:         inv.Dir,
		SysProcAttr: &syscall.SysProcAttr{Setpgid: true},
	}
	// Own pipes rather than exec's: Wait then returns when the process
	// exits, and the group can be killed before the output is drained.
	var closers []*os.File
	closeAll := func() {
		for _, f := range closers {
			f.Close()
		}
	}
	pipe := func() (r, w *os.File, err error) {
		r, w, err = os.Pipe()
		if err == nil {
			closers = append(closers, r, w)
		}
		return r, w, err
	}
	outR, outW, err := pipe()
	if err != nil {
		return 0, err
	}
	errR, errW, err := pipe()
	if err != nil {
		closeAll()
		return 0, err
	}
	cmd.Stdout, cmd.Stderr = outW, errW
	var inW *os.File
	if inv.Stdin != nil {
		var inR *os.File
		if inR, inW, err = pipe(); err != nil {
			closeAll()
			return 0, err
		}
		cmd.Stdin = inR
	}
	if err := cmd.Start(); err != nil {
		closeAll()
		return 0, fmt.Errorf("start %s: %w", c.path, err)
	}
	defer closeAll()
	outW.Close()
	errW.Close()
	if inW != nil {
		cmd.Stdin.(*os.File).Close()
		// Not waited for: a caller that never closes its input must not
		// hold the call open. The write end is closed when the call ends.
		go func() {
			_, _ = io.Copy(inW, inv.Stdin)
			inW.Close()
		}()
	}
	var drained sync.WaitGroup
	for _, p := range []struct {
		w io.Writer
		r *os.File
	}{{inv.Stdout, outR}, {inv.Stderr, errR}} {
		drained.Go(func() { _, _ = io.Copy(p.w, p.r) })
	}

	pgid := cmd.Process.Pid
	exited := make(chan struct{})
	stop := context.AfterFunc(ctx, func() {
		_ = syscall.Kill(-pgid, syscall.SIGTERM)
		select {
		case <-time.After(killGrace):
			_ = syscall.Kill(-pgid, syscall.SIGKILL)
		case <-exited:
		}
	})
	werr := cmd.Wait()
	close(exited)
	stop()
	// The call ends with its process: background children die with it.
	_ = syscall.Kill(-pgid, syscall.SIGKILL)

	done := make(chan struct{})
	go func() { drained.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(drainGrace):
		outR.Close()
		errR.Close()
		<-done
	}
	var ee *exec.ExitError
	if werr != nil && !errors.As(werr, &ee) {
		return 0, werr
	}
	return exitCode(cmd.ProcessState), nil
}

// exitCode follows the shell's convention: 128+N for death by signal N.
func exitCode(ps *os.ProcessState) int {
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ps.ExitCode()
}

// CheckSecrets is the check every kind that starts a host process makes of
// its configuration: secrets only in env (argv is visible to every host
// user), and each one referenced there defined.
func CheckSecrets(p config.Plugin, env Env) error {
	for _, s := range append([]string{p.Command}, p.Args...) {
		if strings.Contains(s, "{{secret:") {
			return errors.New("secrets go in env, not in command or args: a process's argv is visible to every host user")
		}
	}
	for _, k := range slices.Sorted(maps.Keys(p.Env)) {
		names, err := secrets.References(p.Env[k])
		if err != nil {
			return fmt.Errorf("env.%s: %w", k, err)
		}
		for _, n := range names {
			if !env.Secrets.Has(n) {
				return fmt.Errorf("env.%s: secret %q is not defined (secrets.yaml or the config's secrets)", k, n)
			}
		}
	}
	return nil
}
