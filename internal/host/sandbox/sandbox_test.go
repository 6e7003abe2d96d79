package sandbox

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/proto"
)

func TestParseUser(t *testing.T) {
	tests := []struct {
		in       string
		uid, gid int
		ok       bool
	}{
		{"1000:1000", 1000, 1000, true},
		{"1000", 1000, 1000, true},
		{"0:0", 0, 0, true},
		{"1000:2000", 1000, 2000, true},
		{"agent", 0, 0, false},
		{"1000:agent", 0, 0, false},
		{"-1:0", 0, 0, false},
		{"", 0, 0, false},
		{":1000", 0, 0, false},
	}
	for _, tt := range tests {
		uid, gid, err := ParseUser(tt.in)
		if (err == nil) != tt.ok || uid != tt.uid || gid != tt.gid {
			t.Errorf("ParseUser(%q) = %d, %d, %v", tt.in, uid, gid, err)
		}
	}
}

func FuzzParseUser(f *testing.F) {
	for _, s := range []string{"1000:1000", "1000", "x", ":", "1:2:3"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		uid, gid, err := ParseUser(s)
		if err == nil && (uid < 0 || gid < 0) {
			t.Fatalf("negative id from %q", s)
		}
	})
}

func TestRunArgv(t *testing.T) {
	for _, tt := range []struct {
		cwd  string
		env  []string
		want []string
	}{
		{"", nil, []string{"/tools/toolgate-client", "run", "--timeout", "1.5s", "--call", "c1", "--", "sh", "-c", "echo hi"}},
		{"/workspace/a", []string{"A=1", "B=--x"}, []string{"/tools/toolgate-client", "run", "--timeout", "1.5s", "--call", "c1",
			"--cwd", "/workspace/a", "--env", "A=1", "--env", "B=--x", "--", "sh", "-c", "echo hi"}},
	} {
		if got := RunArgv("c1", 1500*time.Millisecond, tt.cwd, tt.env, []string{"sh", "-c", "echo hi"}); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("cwd %q env %q: got %q", tt.cwd, tt.env, got)
		}
	}
}

func TestSpec(t *testing.T) {
	ok := AgentSpec{Agent: "a", Image: "img", Workspace: "/h/agents/a/workspace", ClientBinary: "/usr/bin/toolgate-client"}
	if err := ok.Validate(); err != nil {
		t.Fatal(err)
	}
	if got := ok.ToolsBinDir(); got != "/h/agents/a/tools/bin" {
		t.Errorf("ToolsBinDir = %s", got)
	}
	if ok.UserOrDefault() != proto.DefaultUser {
		t.Errorf("default user %q", ok.UserOrDefault())
	}
	bad := []func(*AgentSpec){
		func(s *AgentSpec) { s.Agent = "" },
		func(s *AgentSpec) { s.Image = "" },
		func(s *AgentSpec) { s.Workspace = "rel/ws" },
		func(s *AgentSpec) { s.ClientBinary = "" },
		func(s *AgentSpec) { s.User = "agent" },
	}
	for i, mut := range bad {
		s := ok
		mut(&s)
		if s.Validate() == nil {
			t.Errorf("case %d: invalid spec accepted: %+v", i, s)
		}
	}
}

// The launcher directory holds the agent's tools and the client itself,
// nothing else; a tool named like the client is refused.
func TestWriteLaunchers(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "stale"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/elsewhere", filepath.Join(dir, "toolgate-client")); err != nil {
		t.Fatal(err)
	}
	for range 2 { // the second run finds everything in place
		if err := WriteLaunchers(dir, []string{"lint", "fmt"}, proto.LauncherPath); err != nil {
			t.Fatal(err)
		}
		got := map[string]string{}
		entries, _ := os.ReadDir(dir)
		for _, e := range entries {
			got[e.Name()], _ = os.Readlink(filepath.Join(dir, e.Name()))
		}
		want := map[string]string{"lint": proto.LauncherPath, "fmt": proto.LauncherPath, "toolgate-client": proto.ClientPath}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("launchers %v, want %v", got, want)
		}
	}
	if err := WriteLaunchers(dir, []string{"toolgate-client"}, proto.LauncherPath); err == nil {
		t.Fatal("a tool named toolgate-client was accepted")
	}
}
