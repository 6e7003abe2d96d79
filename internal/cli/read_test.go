package cli

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/internal/host/coretools"
	"github.com/toolgate/toolgate/internal/proto/api"
)

// TestReadBinaryHintNamesTheFlag: a text read of a binary file tells a
// person at the CLI to pass --binary, not the API's "encoding":"base64".
func TestReadBinaryHintNamesTheFlag(t *testing.T) {
	if apiBinaryHint != coretools.BinaryHint {
		t.Fatalf("apiBinaryHint %q differs from coretools.BinaryHint %q", apiBinaryHint, coretools.BinaryHint)
	}
	daemon := &api.Error{Code: "tool_error", Message: "read /workspace/a.bin: binary file (NUL byte at offset 2); " + coretools.BinaryHint, ID: "c-1"}
	got := cliHint(fmt.Errorf("call: %w", daemon)).Error()
	if !strings.Contains(got, "read it with --binary") || strings.Contains(got, "encoding") {
		t.Errorf("CLI error %q, want it to name --binary and not the API field", got)
	}
	if !strings.Contains(got, "NUL byte at offset 2") || !strings.Contains(daemon.Message, "encoding") {
		t.Errorf("CLI error %q lost the daemon's words, or the daemon's error was changed", got)
	}
	other := &api.Error{Code: "denied", Message: "no"}
	if cliHint(other) != error(other) {
		t.Error("an unrelated error was rewritten")
	}
}

// TestCutShort: a text read is an error when the read cap cut the lines
// asked for (the CLI printed the head of the file), not when the window
// asked for ended inside the kept part, nor for a file under the cap.
func TestCutShort(t *testing.T) {
	res := func(truncated bool, from, to, total int) *api.Result {
		return &api.Result{Output: map[string]any{
			"truncated": truncated, "size": json.Number("18688890"),
			"lines": map[string]any{"from": json.Number(fmt.Sprint(from)), "to": json.Number(fmt.Sprint(to)), "total": json.Number(fmt.Sprint(total))},
		}}
	}
	for _, tt := range []struct {
		name string
		res  *api.Result
		want string
	}{
		{"under the cap", res(false, 1, 9, 9), ""},
		{"cut at the cap", res(true, 1, 225465, 225465), "printed lines 1–225465"},
		{"offset to the cap", res(true, 225460, 225465, 225465), "printed lines 225460–225465"},
		{"a window inside the kept part", res(true, 1, 3, 225465), ""},
	} {
		err := cutShort(tt.res)
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("%s: %v", tt.name, err)
		case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), "18688890 bytes")):
			t.Errorf("%s: %v, want an error with %q", tt.name, err, tt.want)
		}
	}
}
