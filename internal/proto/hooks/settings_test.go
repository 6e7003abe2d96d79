package hooks

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

var gate = GateCommand{Command: "/tools/bin/toolgate-client"}

const fresh = `{
  "hooks": {
    "PreToolUse": [
      {
        "matcher": "*",
        "hooks": [
          {
            "type": "command",
            "command": "/tools/bin/toolgate-client",
            "args": [
              "hook",
              "pre-tool-use"
            ],
            "timeout": 30,
            "onFailure": "block"
          }
        ]
      }
    ],
    "PostToolUse": [
      {
        "matcher": "*",
        "hooks": [
          {
            "type": "command",
            "command": "/tools/bin/toolgate-client",
            "args": [
              "hook",
              "post-tool-use"
            ],
            "timeout": 30
          }
        ]
      }
    ],
    "PostToolUseFailure": [
      {
        "matcher": "*",
        "hooks": [
          {
            "type": "command",
            "command": "/tools/bin/toolgate-client",
            "args": [
              "hook",
              "post-tool-use"
            ],
            "timeout": 30
          }
        ]
      }
    ]
  }
}
`

func TestMergeSettingsEmpty(t *testing.T) {
	for _, existing := range []string{"", "  \n", "{}"} {
		got, err := MergeSettings([]byte(existing), gate)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != fresh {
			t.Fatalf("existing %q:\n%s", existing, got)
		}
	}
}

// A user's document: other settings (order kept), a Stop and a SessionStart
// hook, the user's own Bash PreToolUse hook, and a stale toolgate entry (old
// path, shell form) sharing a group with a user hook.
const userDoc = `{
  "model": "opus",
  "permissions": {"allow": ["Bash(git *)"], "deny": []},
  "hooks": {
    "Stop": [{"hooks": [{"type": "command", "command": "/home/u/notify.sh"}]}],
    "PreToolUse": [
      {"matcher": "Bash", "hooks": [{"type": "command", "command": "/home/u/lint-bash.sh", "timeout": 5}]},
      {"matcher": "*", "hooks": [
        {"type": "command", "command": "/old/bin/toolgate-client hook pre-tool-use", "onFailure": "block"},
        {"type": "command", "command": "/home/u/audit.sh"}
      ]}
    ],
    "SessionStart": [{"matcher": "startup", "hooks": [{"type": "command", "command": "echo hi"}]}]
  },
  "env": {"FOO": "1"},
  "zzUnknownKey": [1, 2, 3]
}`

func TestMergeSettingsKeepsOthers(t *testing.T) {
	got, err := MergeSettings([]byte(userDoc), gate)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Hooks map[string][]struct {
			Matcher string `json:"matcher"`
			Hooks   []struct {
				Command   string   `json:"command"`
				Args      []string `json:"args"`
				OnFailure string   `json:"onFailure"`
				Timeout   int      `json:"timeout"`
			} `json:"hooks"`
		} `json:"hooks"`
		Permissions json.RawMessage `json:"permissions"`
	}
	if err := json.Unmarshal(got, &doc); err != nil {
		t.Fatal(err)
	}
	s := string(got)
	// Top-level order kept, our hooks merged in place.
	order := []string{`"model"`, `"permissions"`, `"hooks"`, `"env"`, `"zzUnknownKey"`}
	for i := 1; i < len(order); i++ {
		if strings.Index(s, order[i-1]) > strings.Index(s, order[i]) {
			t.Fatalf("key order lost (%s before %s):\n%s", order[i], order[i-1], s)
		}
	}
	if strings.Index(s, `"Stop"`) > strings.Index(s, `"SessionStart"`) {
		t.Fatal("event order lost")
	}
	if len(doc.Hooks["Stop"]) != 1 || doc.Hooks["Stop"][0].Hooks[0].Command != "/home/u/notify.sh" {
		t.Fatalf("Stop clobbered: %+v", doc.Hooks["Stop"])
	}
	if len(doc.Hooks["SessionStart"]) != 1 {
		t.Fatal("SessionStart clobbered")
	}
	pre := doc.Hooks["PreToolUse"]
	if len(pre) != 3 {
		t.Fatalf("PreToolUse groups: %+v", pre)
	}
	if pre[0].Matcher != "Bash" || pre[0].Hooks[0].Command != "/home/u/lint-bash.sh" || pre[0].Hooks[0].Timeout != 5 {
		t.Fatalf("user's Bash hook changed: %+v", pre[0])
	}
	if len(pre[1].Hooks) != 1 || pre[1].Hooks[0].Command != "/home/u/audit.sh" {
		t.Fatalf("stale toolgate entry not removed or user hook lost: %+v", pre[1])
	}
	g := pre[2].Hooks[0]
	if pre[2].Matcher != "*" || g.Command != gate.Command || g.OnFailure != "block" || g.Timeout != DefaultGateTimeout || strings.Join(g.Args, " ") != "hook pre-tool-use" {
		t.Fatalf("gate: %+v", pre[2])
	}
	for _, ev := range []string{"PostToolUse", "PostToolUseFailure"} {
		if len(doc.Hooks[ev]) != 1 || strings.Join(doc.Hooks[ev][0].Hooks[0].Args, " ") != "hook post-tool-use" || doc.Hooks[ev][0].Hooks[0].OnFailure != "" {
			t.Fatalf("%s: %+v", ev, doc.Hooks[ev])
		}
	}
	var perms bytes.Buffer
	if json.Compact(&perms, doc.Permissions) != nil || perms.String() != `{"allow":["Bash(git *)"],"deny":[]}` {
		t.Fatalf("permissions changed: %s", doc.Permissions)
	}
}

func TestMergeSettingsIdempotent(t *testing.T) {
	for _, existing := range []string{"", userDoc} {
		once, err := MergeSettings([]byte(existing), gate)
		if err != nil {
			t.Fatal(err)
		}
		twice, err := MergeSettings(once, gate)
		if err != nil {
			t.Fatal(err)
		}
		if string(once) != string(twice) {
			t.Fatalf("not idempotent:\n%s\n---\n%s", once, twice)
		}
		// Moving the client replaces the entry rather than adding a second.
		moved, err := MergeSettings(once, GateCommand{Command: "/opt/toolgate/toolgate-client", Timeout: 10})
		if err != nil {
			t.Fatal(err)
		}
		if strings.Count(string(moved), "toolgate-client") != 3 || !strings.Contains(string(moved), `"timeout": 10`) {
			t.Fatalf("re-apply with new path:\n%s", moved)
		}
	}
}

func TestMergeSettingsInvalid(t *testing.T) {
	tests := []struct{ name, doc string }{
		{"not json", `{"hooks": {`},
		{"trailing comma", `{"a": 1,}`},
		{"array", `[]`},
		{"two objects", `{} {}`},
		{"hooks not object", `{"hooks": []}`},
		{"event not array", `{"hooks": {"PreToolUse": {}}}`},
		{"group not object", `{"hooks": {"PreToolUse": [1]}}`},
		{"group hooks not array", `{"hooks": {"PostToolUse": [{"hooks": "x"}]}}`},
		{"duplicate key", `{"hooks": {}, "hooks": {}}`},
		{"hooks disabled", `{"disableAllHooks": true}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := MergeSettings([]byte(tt.doc), gate)
			if !errors.Is(err, ErrInvalidSettings) || out != nil {
				t.Fatalf("got %v, %q", err, out)
			}
		})
	}
	if _, err := MergeSettings(nil, GateCommand{Command: "toolgate-client"}); err == nil {
		t.Fatal("relative command accepted")
	}
}

// The managed document also turns off every hook that is not managed, even
// when the existing managed file allowed them; the rest is MergeSettings'.
func TestManagedSettings(t *testing.T) {
	for _, existing := range []string{"", `{"allowManagedHooksOnly": false, "model": "opus"}`, userDoc} {
		got, err := ManagedSettings([]byte(existing), gate)
		if err != nil {
			t.Fatal(err)
		}
		var doc struct {
			AllowManagedHooksOnly *bool                        `json:"allowManagedHooksOnly"`
			Hooks                 map[string][]json.RawMessage `json:"hooks"`
		}
		if err := json.Unmarshal(got, &doc); err != nil {
			t.Fatal(err)
		}
		if doc.AllowManagedHooksOnly == nil || !*doc.AllowManagedHooksOnly || len(doc.Hooks[EventPreToolUse]) == 0 {
			t.Fatalf("existing %q:\n%s", existing, got)
		}
		if again, err := ManagedSettings(got, gate); err != nil || string(again) != string(got) {
			t.Fatalf("not idempotent: %v\n%s", err, again)
		}
		if existing != "" && !strings.Contains(string(got), `"model": "opus"`) {
			t.Fatalf("other settings lost:\n%s", got)
		}
	}
	if _, err := ManagedSettings([]byte(`{"disableAllHooks": true}`), gate); !errors.Is(err, ErrInvalidSettings) {
		t.Fatalf("disableAllHooks accepted: %v", err)
	}
}
