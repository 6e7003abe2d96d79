package config

import (
	"strings"
	"testing"
)

func TestSandboxBackendErrors(t *testing.T) {
	noProxyEnv(t, nil)
	tests := []struct {
		name, yaml string
		want       []string
	}{
		{"unknown backend", "gateway:\n  sandbox:\n    backend: podman\n",
			[]string{`c.yaml:3: gateway.sandbox.backend: "podman": the backends are docker (the default) and kubernetes`}},
		{"kubernetes section without the backend", "gateway:\n  sandbox:\n    kubernetes: {namespace: agents}\n",
			[]string{`c.yaml:3: gateway.sandbox.kubernetes: set only with backend: kubernetes`}},
		{"kubernetes without its section", "gateway:\n  sandbox:\n    backend: kubernetes\n",
			[]string{`c.yaml:3: gateway.sandbox.kubernetes: required with backend: kubernetes (at least its namespace)`}},
		{"no namespace, no node", "gateway:\n  sandbox:\n    backend: kubernetes\n    kubernetes: {instance: a}\n",
			[]string{
				`c.yaml:4: gateway.sandbox.kubernetes.namespace: required`,
				`c.yaml:4: gateway.sandbox.kubernetes.node: required: this gateway's node (or NODE_NAME in its environment, as the DaemonSet sets it)`,
			}},
		{"bad names and values", "gateway:\n  sandbox:\n    backend: kubernetes\n    kubernetes:\n      namespace: Agents\n      node: n1\n      instance: much-too-long-instance\n      workspaceSize: 1 gig\n      pullPolicy: never\n      context: x\n      socketLinks: /run/" + strings.Repeat("x", 60) + "\n",
			[]string{
				`c.yaml:5: gateway.sandbox.kubernetes.namespace: "Agents": want at most 63 lowercase letters, digits or -`,
				`c.yaml:7: gateway.sandbox.kubernetes.instance: "much-too-long-instance": want at most 16 lowercase letters, digits or -`,
				`c.yaml:8: gateway.sandbox.kubernetes.workspaceSize: "1 gig" is not a size as Kubernetes writes it (e.g. 1Gi, 500Mi)`,
				`c.yaml:9: gateway.sandbox.kubernetes.pullPolicy: "never" is not one of Always, IfNotPresent, Never`,
				`c.yaml:10: gateway.sandbox.kubernetes.context: names a context of a kubeconfig: set kubeconfig too`,
				`c.yaml:11: gateway.sandbox.kubernetes.socketLinks: 65 bytes is too long for a socket path under it; at most 57`,
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := parseErrors(t, tt.yaml)
			if strings.Join(got, "\n") != strings.Join(tt.want, "\n") {
				t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(tt.want, "\n"))
			}
		})
	}
}

func TestSandboxBackendDefaults(t *testing.T) {
	noProxyEnv(t, map[string]string{"NODE_NAME": "node-7"})
	cfg, err := Parse(home, "c.yaml", []byte("gateway:\n  sandbox:\n    backend: kubernetes\n    kubernetes: {namespace: agents, kubeconfig: kube/admin.conf}\n"))
	if err != nil {
		t.Fatal(err)
	}
	k := cfg.Gateway.Sandbox.Kubernetes
	if k.Node != "node-7" || k.Kubeconfig != home+"/kube/admin.conf" || !k.WatchAgents() {
		t.Errorf("got %+v", k)
	}
	if cfg, err = Parse(home, "c.yaml", nil); err != nil || cfg.Gateway.Sandbox.Backend != BackendDocker {
		t.Errorf("empty file: backend %q, %v", cfg.Gateway.Sandbox.Backend, err)
	}
}

// TestParseWith: agents from elsewhere are checked, defaulted and merged
// like the file's; their errors name them, in the resource's spelling.
func TestParseWith(t *testing.T) {
	noProxyEnv(t, nil)
	file := "plugins:\n  git: {kind: command, command: /usr/bin/git}\ndefaults:\n  rules:\n    - {name: no-curl, deny: 'call.tool == \"exec\"', reason: shared}\nagents:\n  local: {}\n"
	good := Extra{Name: "demo", Source: "Agent agents/demo", Entry: []byte(`{"image":"sb:1","tools":["git"],"limits":{"memory":"512Mi","execTimeout":"10s"},"egress":{"allow":["api.github.com:443"]},"rules":[{"name":"r","allow":"true","reason":"ok"}]}`)}
	cfg, err := ParseWith(home, "c.yaml", []byte(file), []Extra{good})
	if err != nil {
		t.Fatal(err)
	}
	a := cfg.Agents["demo"]
	if a == nil || cfg.Agents["local"] == nil {
		t.Fatalf("agents: %v", cfg.Agents)
	}
	if a.Image != "sb:1" || a.MemoryBytes() != 512<<20 || len(a.Rules) != 2 || a.Rules[0].ID != "no-curl" || a.Egress == nil || a.Egress.MaxConnections != DefaultEgressConnections {
		t.Errorf("demo: %+v", a)
	}
	// An empty file takes extra agents too.
	plain := Extra{Name: "demo", Source: "Agent agents/demo", Entry: []byte(`{"image":"sb:1"}`)}
	if cfg, err := ParseWith(home, "c.yaml", nil, []Extra{plain}); err != nil || cfg.Agents["demo"] == nil {
		t.Errorf("empty file: %v", err)
	}

	bad := []struct {
		name  string
		file  string
		extra Extra
		want  string
	}{
		{"undeclared tool", file, Extra{Name: "x", Source: "Agent agents/x", Entry: []byte(`{"tools":["gh"]}`)},
			`Agent agents/x: spec.tools[0]: tool "gh" is not declared under plugins`},
		{"rule without reason", file, Extra{Name: "x", Source: "Agent agents/x", Entry: []byte(`{"rules":[{"name":"r","deny":"true"}]}`)},
			`Agent agents/x: spec.rules[0].reason: required: say why, it is shown to the agent and in the audit log`},
		{"unknown field", file, Extra{Name: "x", Source: "Agent agents/x", Entry: []byte(`{"workspace2":"/"}`)},
			`Agent agents/x: spec.workspace2: unknown field`},
		{"name taken by the file", file, Extra{Name: "local", Source: "Agent agents/local", Entry: []byte(`{}`)},
			`Agent agents/local: agent local is also defined in c.yaml; one of them must go`},
		{"not an entry", file, Extra{Name: "x", Source: "Agent agents/x", Entry: []byte(`[1`)},
			`Agent agents/x: not an agent entry`},
		{"the file's own error keeps its line", "agents:\n  local: {image: 3, user: root:x:y}\n", good,
			`c.yaml:2: agents.local.user: "root:x:y" is not uid:gid`},
	}
	for _, tt := range bad {
		_, err := ParseWith(home, "c.yaml", []byte(tt.file), []Extra{tt.extra})
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: got %v, want %q", tt.name, err, tt.want)
		}
	}
}
