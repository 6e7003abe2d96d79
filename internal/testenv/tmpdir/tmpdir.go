// Package tmpdir makes temporary directories for tests that do not outlive
// their test process, even one that was killed.
//
// A test process removes what it made when it ends, but one killed — by
// `go test -timeout`, by a person's ^C or kill — cannot, and what it made
// stays: the binaries testenv builds (~119 MB a process; 637 of them, 75 GB,
// had piled up on one machine), a benchmark's audit logs (~400 MB). So the
// directories made here are named after their owner, the process and its
// start time, and each New first removes those whose owner is gone. The
// start time tells a dead owner from another process given its pid later.
//
// It is a leaf package (testing and the standard library only), so the
// tests of any package — the Docker backend's too, which testenv imports —
// may use it.
package tmpdir

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
)

var (
	mu   sync.Mutex
	made []string // by this process, for RemoveAll
)

// New makes a directory in the system's temporary directory named
// prefix-OWNER-RANDOM, where OWNER is this process, after removing the
// directories of the same prefix whose owner is no longer alive. RemoveAll
// removes it (and every other New made) when the process ends.
func New(prefix string) (string, error) {
	if strings.ContainsAny(prefix, `/\`) || prefix == "" {
		return "", fmt.Errorf("tmpdir: prefix %q: want a plain name", prefix)
	}
	Sweep(os.TempDir(), prefix)
	dir, err := os.MkdirTemp("", prefix+"-"+self()+"-")
	if err != nil {
		return "", err
	}
	mu.Lock()
	made = append(made, dir)
	mu.Unlock()
	return dir, nil
}

// For is tb.TempDir owned like New's: removed at tb's clean-up, and by a
// later New when the process was killed before that. Mind the length of
// socket paths under it: it is longer than tb.TempDir's.
func For(tb testing.TB) string {
	tb.Helper()
	dir, err := New("toolgate-test")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		if err := os.RemoveAll(dir); err != nil {
			tb.Errorf("removing %s: %v", dir, err)
		}
	})
	return dir
}

// RemoveAll removes every directory New made in this process: for a
// TestMain, after m.Run, for what lives as long as the process (the
// binaries testenv builds once).
func RemoveAll() error {
	mu.Lock()
	dirs := made
	made = nil
	mu.Unlock()
	var errs []error
	for _, d := range dirs {
		errs = append(errs, os.RemoveAll(d))
	}
	return errors.Join(errs...)
}

// Sweep removes the entries of dir named prefix-OWNER-… whose OWNER is no
// longer alive, and returns their paths. Nothing is removed where the
// process table cannot be read (no /proc): an owner could not be told dead.
func Sweep(dir, prefix string) (removed []string) {
	if !procReadable() {
		return nil
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	for _, e := range entries {
		rest, ok := strings.CutPrefix(e.Name(), prefix+"-")
		if !ok {
			continue
		}
		owner, _, ok := strings.Cut(rest, "-")
		if !ok || !wellFormed(owner) || alive(owner) {
			continue
		}
		p := filepath.Join(dir, e.Name())
		if os.RemoveAll(p) == nil {
			removed = append(removed, p)
		}
	}
	return removed
}

// self is this process as an owner: pid.starttime.
var self = sync.OnceValue(func() string {
	pid := strconv.Itoa(os.Getpid())
	start, _ := startTime(pid)
	return pid + "." + start
})

func procReadable() bool {
	_, err := startTime(strconv.Itoa(os.Getpid()))
	return err == nil
}

// wellFormed reports whether owner is pid.starttime, both decimal: a name
// of another shape is not ours to judge (another prefix that begins like
// this one, a directory made by hand).
func wellFormed(owner string) bool {
	pid, start, ok := strings.Cut(owner, ".")
	return ok && decimal(pid) && decimal(start)
}

func decimal(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// alive reports whether owner (pid.starttime) is a running process: its
// pid exists and started when the owner did. When that cannot be read for
// another reason than the process being gone, it counts as alive.
func alive(owner string) bool {
	pid, start, _ := strings.Cut(owner, ".")
	now, err := startTime(pid)
	if errors.Is(err, fs.ErrNotExist) {
		return false
	}
	return err != nil || now == start
}

// startTime is when process pid started, in clock ticks since boot: field
// 22 of /proc/PID/stat, counted after the command name, which may hold
// spaces and parentheses itself.
func startTime(pid string) (string, error) {
	b, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		return "", err
	}
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return "", fmt.Errorf("/proc/%s/stat: no command name", pid)
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 20 || !decimal(f[19]) {
		return "", fmt.Errorf("/proc/%s/stat: no start time", pid)
	}
	return f[19], nil
}
