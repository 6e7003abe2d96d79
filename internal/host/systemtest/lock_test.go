package systemtest

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/host/audit"
	"github.com/toolgate/toolgate/internal/host/auditindex"
	"github.com/toolgate/toolgate/internal/proto/api"
	"github.com/toolgate/toolgate/internal/testenv"
)

// homeFiles records size and mtime of every regular file under home.
func homeFiles(t *testing.T, home string) map[string]string {
	t.Helper()
	files := map[string]string{}
	err := filepath.WalkDir(home, func(path string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		if strings.HasPrefix(d.Name(), auditindex.File) {
			return nil // the first daemon's index follower keeps touching its own files
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		files[path] = fmt.Sprintf("%d %s", fi.Size(), fi.ModTime().Format(time.RFC3339Nano))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// TestSecondDaemonTouchesNothing: a second `toolgate serve` on a home that
// is being served exits with a message naming the first, and changes no
// file of the home — not the audit log the first is writing.
func TestSecondDaemonTouchesNothing(t *testing.T) {
	e := New(t, "lock")
	a := e.Agents[0]
	toolgate, _ := testenv.Binaries(t)
	denied := func() error {
		_, err := e.Call(a, "exec", map[string]any{"command": "rm -rf /tmp/x"})
		var we *api.Error
		if !errors.As(err, &we) || we.Rule != "no-rm-rf" {
			return fmt.Errorf("want a no-rm-rf denial, got %v", err)
		}
		return nil
	}
	second := func() string {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		out, err := exec.CommandContext(ctx, toolgate, "--home", e.Home, "serve").CombinedOutput()
		if err == nil {
			t.Fatalf("a second daemon on the same home exited 0:\n%s", out)
		}
		want := fmt.Sprintf("another toolgate daemon (pid %d) is serving %s", os.Getpid(), e.Home)
		if !strings.Contains(string(out), want) {
			t.Fatalf("second daemon's message does not say %q:\n%s", want, out)
		}
		return string(out)
	}

	if err := denied(); err != nil {
		t.Fatal(err)
	}
	if err := e.Daemon.FlushAudit(); err != nil {
		t.Fatal(err)
	}
	before := homeFiles(t, e.Home)
	second()
	after := homeFiles(t, e.Home)
	for path, was := range before {
		if after[path] != was {
			t.Errorf("the second daemon changed %s: %s → %s", path, was, after[path])
		}
	}
	for path := range after {
		if _, ok := before[path]; !ok {
			t.Errorf("the second daemon created %s", path)
		}
	}

	// Again while the first daemon is writing: every call it answered is
	// on record and the chain verifies.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	answered := 1
	var callErr error
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			if callErr = denied(); callErr != nil {
				return
			}
			answered++
		}
	}()
	second()
	close(stop)
	wg.Wait()
	if callErr != nil {
		t.Fatal(callErr)
	}
	if got := len(e.Entries(audit.Filter{Agent: a, Decision: "deny"})); got != answered {
		t.Fatalf("%d denials answered, %d on record", answered, got)
	}
	e.Verify()
}
