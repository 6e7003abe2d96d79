package systemtest

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/internal/host/identity"
	"github.com/toolgate/toolgate/internal/host/witness"
	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/internal/testenv/wait"
)

// startWitness runs `toolgate witness` for the gateway key gwKey and
// returns its URL and its verifier key.
func startWitness(t *testing.T, dir, gwKey string) (url, key string) {
	t.Helper()
	toolgate, _ := testenv.Binaries(t)
	cmd := exec.Command(toolgate, "witness", "--dir", dir, "--name", "witness.test/w1", "--listen", "127.0.0.1:0", "--log", gwKey)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	sc := bufio.NewScanner(stderr)
	for (url == "" || key == "") && sc.Scan() {
		line := sc.Text()
		if _, after, ok := strings.Cut(line, " on http://"); ok {
			url = "http://" + strings.Fields(after)[0]
		} else if url != "" {
			key = strings.TrimSpace(line)
		}
	}
	if url == "" || key == "" {
		t.Fatalf("the witness did not say where it listens and its key: %v", sc.Err())
	}
	go func() {
		for sc.Scan() {
		}
	}()
	return url, key
}

// A gateway with a witness (a real toolgate witness process): a receipt's
// checkpoint carries the witness's cosignature and verifies with
// --witness-key; after the gateway is restored from an old copy of its log
// (its history rewritten), the witness refuses its checkpoints, keeps the
// request as evidence, and a new receipt fails against the witness's key.
func TestWitnessedReceipts(t *testing.T) {
	e := NewHome(t, Extra{}, "carol")
	keys, _, err := identity.Ensure(e.Home)
	if err != nil {
		t.Fatal(err)
	}
	wdir := t.TempDir()
	url, wkey := startWitness(t, wdir, keys.Current.Verifier)
	e.Extra.Gateway = "  audit:\n    witnesses:\n      - {url: " + url + ", key: '" + wkey + "'}\n"
	e.WriteConfig("")
	e.Start()
	carol := e.Agents[0]
	ctx := t.Context()
	call := func(session, word string) {
		t.Helper()
		if _, err := e.Admin.WithSession(session).Call(ctx, carol, "exec", map[string]any{"argv": []string{"echo", word}}, nil, nil); err != nil {
			t.Fatal(err)
		}
	}
	receipt := func(session, file string) {
		t.Helper()
		if out, code := e.CLI("", "audit", "receipt", "--session", session, "-o", file); code != 0 {
			t.Fatalf("audit receipt: exit %d\n%s", code, out)
		}
	}
	dir := t.TempDir()
	call("job-1", "one")
	receipt("job-1", filepath.Join(dir, "job-1.json"))
	// A copy of the log as it is now: the "old disk".
	logs := filepath.Join(e.Home, "logs")
	old := filepath.Join(dir, "old-logs")
	if out, err := exec.Command("cp", "-a", logs, old).CombinedOutput(); err != nil {
		t.Fatalf("%v %s", err, out)
	}
	call("job-2", "two")
	call("job-2", "three")
	receipt("job-2", filepath.Join(dir, "job-2.json"))
	out, code := e.CLI("", "audit", "verify", "--receipt", filepath.Join(dir, "job-2.json"), "--key", keys.Current.Verifier, "--witness-key", wkey)
	if code != 0 || !strings.Contains(out, "cosigned by 1 witness") {
		t.Fatalf("a witnessed receipt: exit %d %q", code, out)
	}

	// Restored from the old copy: the history after it is gone, and new
	// calls write another.
	if err := e.Daemon.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	e.Daemon = nil
	if err := os.RemoveAll(logs); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(old, logs); err != nil {
		t.Fatal(err)
	}
	e.Start()
	for _, w := range []string{"four", "five", "six", "seven"} {
		call("job-3", w)
	}
	receipt("job-3", filepath.Join(dir, "job-3.json"))
	out, code = e.CLI("", "audit", "verify", "--receipt", filepath.Join(dir, "job-3.json"), "--key", keys.Current.Verifier, "--witness-key", wkey)
	if code != 1 || !strings.Contains(out, "invalid") {
		t.Fatalf("a receipt of the rewritten history against the witness: exit %d %q", code, out)
	}
	// Without the witness the gateway's own signature still holds: only the
	// witness can tell the histories apart.
	if out, code := e.CLI("", "audit", "verify", "--receipt", filepath.Join(dir, "job-3.json"), "--key", keys.Current.Verifier); code != 0 {
		t.Fatalf("the same receipt, gateway key only: exit %d %q", code, out)
	}
	wait.For(t, "the witness to keep the refused checkpoint as evidence", func() bool {
		ev, _ := os.ReadDir(filepath.Join(wdir, witness.EvidenceDir))
		return len(ev) > 0
	})
}
