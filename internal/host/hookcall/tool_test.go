package hookcall

import (
	"strings"
	"testing"

	"github.com/toolgate/toolgate/internal/host/gateway"
)

func TestToolPrepare(t *testing.T) {
	t.Parallel()
	tool := Tool()
	tests := []struct {
		name string
		call gateway.Call
		ok   bool
	}{
		{"mapped Bash", gateway.Call{Via: ViaHook, Tool: "Bash", Command: "ls"}, true},
		{"not from the gate", gateway.Call{Via: "admin", Tool: "Bash", Command: "ls"}, false},
		{"Bash without facts", gateway.Call{Via: ViaHook, Tool: "Bash"}, false},
		{"Write without a path", gateway.Call{Via: ViaHook, Tool: "Write"}, false},
		{"Grep in the cwd", gateway.Call{Via: ViaHook, Tool: "Grep"}, true},
		{"MCP", gateway.Call{Via: ViaHook, Tool: "mcp__s__t"}, true},
	}
	for _, tt := range tests {
		if err := tool.Prepare(&tt.call, gateway.AgentInfo{}); (err == nil) != tt.ok {
			t.Errorf("%s: %v", tt.name, err)
		}
	}
	aa := tool.(gateway.AuditArgs)
	if got := string(aa.AuditArgs(&gateway.Call{Tool: "Write", Args: []byte(`{"file_path":"/a","content":"secret body"}`)})); strings.Contains(got, "secret") || !strings.Contains(got, `"bytes":11`) {
		t.Errorf("AuditArgs kept the body: %s", got)
	}
}
