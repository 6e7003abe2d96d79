package systemtest

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/internal/host/audit"
	"github.com/toolgate/toolgate/internal/host/gateway"
	"github.com/toolgate/toolgate/internal/testenv"
)

// TestWriteRawBodyStreams: a write whose content is the admin API's raw body
// (size and SHA-256 in the arguments) lands byte for byte through the warm
// executor; a body that is not what was stated — other bytes, cut short,
// longer — leaves the file as it was; a size over limits.maxWrite is refused
// before any byte is taken; the audit keeps path, size and digest. The CLI's
// write uses this path, from a file and from a pipe, and prints an integer.
func TestWriteRawBodyStreams(t *testing.T) {
	e := New(t, "raw")
	a := e.Agents[0]
	ctx := context.Background()
	content := make([]byte, 3<<20+17)
	_, _ = rand.Read(content)
	sum := sha256.Sum256(content)
	args := func(size int) map[string]any {
		return map[string]any{"path": "bin/raw.dat", "size": size, "sha256": hex.EncodeToString(sum[:])}
	}
	res, err := e.Admin.CallRaw(ctx, a, "write", args(len(content)), bytes.NewReader(content), int64(len(content)))
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(Out(res, "bytes")); got != fmt.Sprint(len(content)) {
		t.Errorf("write answered bytes %s, want %d", got, len(content))
	}
	digest := func() string {
		res, err := e.Call(a, "exec", map[string]any{"argv": []string{"sha256sum", "/workspace/bin/raw.dat"}})
		if err != nil {
			t.Fatal(err)
		}
		s, _ := Out(res, "stdout").(string)
		return strings.Fields(s + " -")[0]
	}
	if got := digest(); got != hex.EncodeToString(sum[:]) {
		t.Fatalf("file in the sandbox has sha256 %s, want %x", got, sum)
	}

	other := bytes.ToUpper(content)
	for name, body := range map[string][]byte{
		"other bytes": other,
		"cut short":   content[:len(content)/2],
		"longer":      append(append([]byte{}, content...), 'x'),
	} {
		// Chunked (size -1): the client does not hold the body to its length.
		if _, err := e.Admin.CallRaw(ctx, a, "write", args(len(content)), bytes.NewReader(body), -1); err == nil {
			t.Errorf("%s: write succeeded", name)
		}
		if got := digest(); got != hex.EncodeToString(sum[:]) {
			t.Errorf("%s: the file changed (sha256 %s)", name, got)
		}
	}
	_, err = e.Admin.CallRaw(ctx, a, "write", args(16<<20+1), bytes.NewReader(content), -1)
	if err == nil || !strings.Contains(err.Error(), "over the write limit of 16777216 bytes") {
		t.Errorf("over maxWrite: %v", err)
	}

	var found bool
	for _, en := range e.Entries(audit.Filter{Agent: a, Tool: "write"}) {
		if en.Phase == gateway.PhaseDecision && strings.Contains(string(en.Args), hex.EncodeToString(sum[:])) &&
			strings.Contains(string(en.Args), fmt.Sprintf(`"size":%d`, len(content))) && strings.Contains(string(en.Args), "raw.dat") {
			found = true
		}
	}
	if !found {
		t.Error("no audit decision entry with the write's path, size and sha256")
	}
	e.Verify()

	toolgate, _ := testenv.Binaries(t)
	src := t.TempDir() + "/src.dat"
	if err := os.WriteFile(src, content[:1<<20], 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for name, stdin := range map[string]any{"file": f, "pipe": bytes.NewReader(content[:1<<20])} {
		cmd := exec.Command(toolgate, "write", a, "bin/raw.dat")
		cmd.Env = append(os.Environ(), "TOOLGATE_HOME="+e.Home)
		switch in := stdin.(type) {
		case *os.File:
			cmd.Stdin = in
		case *bytes.Reader:
			cmd.Stdin = in // not an *os.File: exec gives the process a pipe
		}
		o, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(o), "wrote 1048576 bytes to /workspace/bin/raw.dat") {
			t.Errorf("CLI write from a %s: %v %q", name, err, o)
		}
		if got, want := digest(), sha256.Sum256(content[:1<<20]); got != hex.EncodeToString(want[:]) {
			t.Errorf("CLI write from a %s: file sha256 %s", name, got)
		}
	}
}

// TestReadRawStreams: a raw read streams the file's bytes through the warm
// executor to the admin API's caller, with the outcome (size, SHA-256) after
// them and in the audit's result entry; a file over limits.maxReadFile is
// refused before a byte; `toolgate read --binary` prints the bytes.
func TestReadRawStreams(t *testing.T) {
	e := New(t, "rawread")
	a := e.Agents[0]
	ctx := context.Background()
	content := make([]byte, 3<<20+5)
	_, _ = rand.Read(content)
	sum := sha256.Sum256(content)
	put := func(p string, b []byte) {
		s := sha256.Sum256(b)
		if _, err := e.Admin.CallRaw(ctx, a, "write", map[string]any{"path": p, "size": len(b), "sha256": hex.EncodeToString(s[:])}, bytes.NewReader(b), int64(len(b))); err != nil {
			t.Fatal(err)
		}
	}
	put("r.bin", content)
	var got bytes.Buffer
	res, err := e.Admin.CallRawOut(ctx, a, "read", map[string]any{"path": "r.bin", "encoding": "raw"}, &got)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got.Bytes(), content) || fmt.Sprint(Out(res, "sha256")) != hex.EncodeToString(sum[:]) || fmt.Sprint(Out(res, "size")) != fmt.Sprint(len(content)) {
		t.Fatalf("read %d bytes (equal: %v), result %v", got.Len(), bytes.Equal(got.Bytes(), content), res.Output)
	}

	put("big.bin", make([]byte, 10<<20+1))
	got.Reset()
	if _, err := e.Admin.CallRawOut(ctx, a, "read", map[string]any{"path": "big.bin", "encoding": "raw"}, &got); err == nil ||
		!strings.Contains(err.Error(), "over the read cap of 10485760 bytes") || got.Len() != 0 {
		t.Errorf("over maxReadFile: %v, %d bytes streamed", err, got.Len())
	}
	if _, err := e.Admin.CallRawOut(ctx, a, "read", map[string]any{"path": "nope.bin", "encoding": "raw"}, &got); err == nil || !strings.Contains(err.Error(), "no such file") {
		t.Errorf("missing file: %v", err)
	}

	var found bool
	for _, en := range e.Entries(audit.Filter{Agent: a, Tool: "read"}) {
		if en.Phase == gateway.PhaseResult && fmt.Sprint(en.Detail["sha256"]) == hex.EncodeToString(sum[:]) {
			found = true
		}
	}
	if !found {
		t.Error("no audit result entry with the read's sha256")
	}
	e.Verify()

	toolgate, _ := testenv.Binaries(t)
	cmd := exec.Command(toolgate, "read", "--binary", a, "r.bin")
	cmd.Env = append(os.Environ(), "TOOLGATE_HOME="+e.Home)
	o, err := cmd.Output()
	if err != nil || !bytes.Equal(o, content) {
		t.Errorf("CLI read --binary: %v, %d bytes (equal: %v)", err, len(o), bytes.Equal(o, content))
	}
	cmd = exec.Command(toolgate, "read", a, "r.bin")
	cmd.Env = append(os.Environ(), "TOOLGATE_HOME="+e.Home)
	if o, err := cmd.CombinedOutput(); err == nil || !strings.Contains(string(o), "read it with --binary") {
		t.Errorf("CLI text read of a binary file: %v %q", err, o)
	}
}

// TestWriteDigestInResult: `toolgate write` states only the size, so the
// decision entry (written before anything runs) has the path and size; the
// gateway hashes the bytes on their way and the result entry and the CLI's
// line have their SHA-256. A stated --sha256 the content does not have is
// refused and leaves the file; the right one, in either case, is accepted. A raw body with
// only a size that is shorter or longer than it is refused.
func TestWriteDigestInResult(t *testing.T) {
	e := New(t, "digest")
	a := e.Agents[0]
	toolgate, _ := testenv.Binaries(t)
	content := make([]byte, 2<<20+9)
	_, _ = rand.Read(content)
	sum := sha256.Sum256(content)
	hexSum := hex.EncodeToString(sum[:])
	src := t.TempDir() + "/src.dat"
	if err := os.WriteFile(src, content, 0o600); err != nil {
		t.Fatal(err)
	}
	write := func(flags ...string) (string, error) {
		f, err := os.Open(src)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		cmd := exec.Command(toolgate, append([]string{"write", a, "d.bin"}, flags...)...)
		cmd.Env, cmd.Stdin = append(os.Environ(), "TOOLGATE_HOME="+e.Home), f
		o, err := cmd.CombinedOutput()
		return string(o), err
	}
	fileSum := func() string {
		b, _ := os.ReadFile(e.Home + "/agents/" + a + "/workspace/d.bin")
		s := sha256.Sum256(b)
		return hex.EncodeToString(s[:])
	}
	if o, err := write(); err != nil || !strings.Contains(o, fmt.Sprintf("wrote %d bytes to /workspace/d.bin (sha256 %s)", len(content), hexSum)) {
		t.Fatalf("toolgate write: %v %q", err, o)
	}
	if fileSum() != hexSum {
		t.Fatal("the file is not the content")
	}
	var decision, result *gateway.Entry
	for _, en := range e.Entries(audit.Filter{Agent: a, Tool: "write"}) {
		switch en.Phase {
		case gateway.PhaseDecision:
			decision = en
		case gateway.PhaseResult:
			result = en
		}
	}
	if decision == nil || result == nil || decision.ID != result.ID {
		t.Fatalf("decision %+v, result %+v", decision, result)
	}
	if args := string(decision.Args); !strings.Contains(args, `"path":"d.bin"`) || !strings.Contains(args, fmt.Sprintf(`"size":%d`, len(content))) || strings.Contains(args, "sha256") {
		t.Errorf("decision args %s: want path and size, no digest (none was stated)", args)
	}
	if fmt.Sprint(result.Detail["sha256"]) != hexSum || result.Detail["bytes"] != float64(len(content)) {
		t.Errorf("result detail %v: want bytes %d, sha256 %s", result.Detail, len(content), hexSum)
	}

	other := sha256.Sum256([]byte("other"))
	if o, err := write("--sha256", hex.EncodeToString(other[:])); err == nil || !strings.Contains(o, "not the "+hex.EncodeToString(other[:])+" stated") {
		t.Errorf("a wrong --sha256: %v %q", err, o)
	}
	if o, err := write("--sha256", strings.ToUpper(hexSum)); err != nil { // either case, as sha256sum's or not
		t.Errorf("the right --sha256: %v %q", err, o)
	}
	ctx := context.Background()
	for name, body := range map[string][]byte{"shorter": content[:len(content)-1], "longer": append(append([]byte{}, content...), 0)} {
		if _, err := e.Admin.CallRaw(ctx, a, "write", map[string]any{"path": "d.bin", "size": len(content)}, bytes.NewReader(body), -1); err == nil {
			t.Errorf("%s body: write succeeded", name)
		}
	}
	if fileSum() != hexSum {
		t.Error("a refused write changed the file")
	}
	e.Verify()
}
