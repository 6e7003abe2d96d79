package coretools

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/internal/host/config"
	"github.com/toolgate/toolgate/internal/host/gateway"
)

func rawArgs(path string, size int, content string) string {
	sum := sha256.Sum256([]byte(content))
	return fmt.Sprintf(`{"path":%q,"size":%d,"sha256":%q}`, path, size, hex.EncodeToString(sum[:]))
}

// TestWriteRawBody: content sent as a raw body with its size and SHA-256
// replaces the file only when the body is exactly that; anything else is a
// clear error and leaves the file as it was. (The fake sandbox is not a
// gateway.StreamWriter, so this is the buffered fallback; the streamed path
// is tested against Docker in internal/host/systemtest.)
func TestWriteRawBody(t *testing.T) {
	t.Parallel()
	h := newHarness(t, config.Limits{MaxWrite: 64})
	content := "hello\x00binary\xff"
	res, err := h.call("write", rawArgs("raw.bin", len(content), content), &gateway.Streams{Stdin: strings.NewReader(content)})
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256([]byte(content))
	if out := res.Output.(*WriteOutput); out.Bytes != int64(len(content)) || out.SHA256 != hex.EncodeToString(sum[:]) || h.get("/workspace/raw.bin") != content {
		t.Fatalf("wrote %+v, file %q", out, h.get("/workspace/raw.bin"))
	}
	// The size alone suffices; the digest is the gateway's.
	res, err = h.call("write", `{"path":"raw2.bin","size":13}`, &gateway.Streams{Stdin: strings.NewReader(content)})
	if err != nil {
		t.Fatal(err)
	}
	if out := res.Output.(*WriteOutput); out.SHA256 != hex.EncodeToString(sum[:]) || h.get("/workspace/raw2.bin") != content {
		t.Fatalf("size alone: wrote %+v, file %q", out, h.get("/workspace/raw2.bin"))
	}
	for _, tc := range []struct{ name, args, body, err string }{
		{"short body", rawArgs("raw.bin", len(content), content), content[:3], "not the stated 13 bytes"},
		{"long body", rawArgs("raw.bin", len(content), content), content + "x", "not the stated 13 bytes"},
		{"other bytes", rawArgs("raw.bin", len(content), content), strings.ToUpper(content), "not the stated 13 bytes"},
		{"no body", rawArgs("raw.bin", len(content), content), "-", "this call has none"},
		{"over the limit", rawArgs("raw.bin", 65, content), content, "over the write limit of 64 bytes (limits.maxWrite)"},
		{"negative size", `{"path":"raw.bin","size":-1,"sha256":"` + hex.EncodeToString(sum[:]) + `"}`, content, "size is a byte count"},
		{"short body, no digest stated", `{"path":"raw.bin","size":13}`, content[:3], "not the stated 13 bytes"},
		{"long body, no digest stated", `{"path":"raw.bin","size":13}`, content + "x", "not the stated 13 bytes"},
		{"sha alone", `{"path":"raw.bin","sha256":"` + hex.EncodeToString(sum[:]) + `"}`, "abc", "goes with its size"},
		{"short sha", `{"path":"raw.bin","size":3,"sha256":"abcd"}`, "abc", "64 lowercase hex digits"},
		{"upper sha", `{"path":"raw.bin","size":3,"sha256":"` + strings.ToUpper(hex.EncodeToString(sum[:])) + `"}`, "abc", "64 lowercase hex digits"},
		{"content too", `{"path":"raw.bin","content":"x","size":1,"sha256":"` + hex.EncodeToString(sum[:]) + `"}`, "x", "cannot be given with them"},
		{"encoding too", `{"path":"raw.bin","encoding":"base64","size":1,"sha256":"` + hex.EncodeToString(sum[:]) + `"}`, "x", "cannot be given with them"},
	} {
		var io *gateway.Streams
		if tc.body != "-" {
			io = &gateway.Streams{Stdin: strings.NewReader(tc.body)}
		}
		_, err := h.call("write", tc.args, io)
		if err == nil || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("%s: err %v, want %q", tc.name, err, tc.err)
		}
		if got := h.get("/workspace/raw.bin"); got != content {
			t.Errorf("%s: the file changed to %q", tc.name, got)
		}
	}
}

// TestWriteAuditArgsKeepSizeAndDigest: the audit of a raw-body write
// records its path, size and SHA-256 (which the sandbox enforces), before
// and after Prepare alike.
func TestWriteAuditArgsKeepSizeAndDigest(t *testing.T) {
	t.Parallel()
	h := newHarness(t, config.Limits{})
	args := rawArgs("a.txt", 12, "some content")
	call, err := h.prepare("write", args)
	if err != nil {
		t.Fatal(err)
	}
	aa := h.tools["write"].(gateway.AuditArgs)
	unprepared := &gateway.Call{Agent: testAgent.Name, Tool: "write", Args: json.RawMessage(args)}
	var want map[string]any
	_ = json.Unmarshal([]byte(args), &want)
	for _, raw := range []json.RawMessage{aa.AuditArgs(call), aa.AuditArgs(unprepared)} {
		var got map[string]any
		if err := json.Unmarshal(raw, &got); err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("audit args %s, want %s", raw, args)
		}
	}
}

// TestReadRaw: a raw read streams the file's bytes to the caller's stdout
// and answers their size and SHA-256; over the read cap it is refused
// before a byte is written; a caller without a byte stream is told so.
func TestReadRaw(t *testing.T) {
	t.Parallel()
	h := newHarness(t, config.Limits{MaxReadFile: 16})
	content := "bin\x00ary\xff\n"
	h.put("/workspace/b.bin", content)
	var out strings.Builder
	res, err := h.call("read", `{"path":"b.bin","encoding":"raw"}`, &gateway.Streams{Stdout: &out})
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256([]byte(content))
	if o := res.Output.(*ReadOutput); out.String() != content || o.Size != int64(len(content)) || o.SHA256 != hex.EncodeToString(sum[:]) || o.Content != "" {
		t.Fatalf("streamed %q, answered %+v", out.String(), o)
	}
	h.put("/workspace/big.bin", strings.Repeat("x", 17))
	out.Reset()
	if _, err := h.call("read", `{"path":"big.bin","encoding":"raw"}`, &gateway.Streams{Stdout: &out}); err == nil ||
		!strings.Contains(err.Error(), "file is 17 bytes, over the read cap of 16 bytes (limits.maxReadFile)") || out.Len() != 0 {
		t.Errorf("over the cap: %v, streamed %d bytes", err, out.Len())
	}
	if _, err := h.call("read", `{"path":"b.bin","encoding":"raw"}`, nil); err == nil || !strings.Contains(err.Error(), "takes none") {
		t.Errorf("no byte stream: %v", err)
	}
	if _, err := h.prepare("read", `{"path":"b.bin","encoding":"raw","limit":3}`); err == nil || !strings.Contains(err.Error(), "do not apply to raw reads") {
		t.Errorf("raw with limit: %v", err)
	}
}
