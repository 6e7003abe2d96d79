package sandbox

import (
	"slices"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/internal/proto"
)

func TestEgressEnv(t *testing.T) {
	off := AgentSpec{Agent: "a"}
	if off.Env() != nil || !slices.Equal(off.CallEnv("c1", ""), []string{"TOOLGATE_CALL_ID=c1"}) {
		t.Errorf("without egress: %q %q", off.Env(), off.CallEnv("c1", ""))
	}
	on := AgentSpec{Agent: "a", Egress: true}
	want := func(env []string, url string) {
		t.Helper()
		for _, k := range []string{"HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"} {
			if !slices.Contains(env, k+"="+url) {
				t.Errorf("%s not %s in %q", k, url, env)
			}
		}
		for _, k := range []string{"NO_PROXY", "no_proxy"} {
			if !slices.Contains(env, k+"=localhost,127.0.0.1") {
				t.Errorf("%s missing in %q", k, env)
			}
		}
	}
	want(on.Env(), "http://127.0.0.1:3128")
	if !slices.Contains(on.Env(), "TOOLGATE_EGRESS=1") {
		t.Errorf("container env %q does not start the forwarder", on.Env())
	}
	call := on.CallEnv("18ecaa9a0c1c8d4a", "")
	want(call, "http://call-18ecaa9a0c1c8d4a:x@127.0.0.1:3128")
	if call[0] != "TOOLGATE_CALL_ID=18ecaa9a0c1c8d4a" || strings.Contains(strings.Join(call, " "), "TOOLGATE_EGRESS") {
		t.Errorf("call env %q", call)
	}
	if off.SameSandbox(on) {
		t.Error("switching egress must recreate the sandbox (its environment changes)")
	}
}

func TestPathEnv(t *testing.T) {
	for _, c := range []struct {
		image []string
		want  string
	}{
		{nil, "PATH=/tools/bin:" + DefaultPath},
		{[]string{"HOME=/root"}, "PATH=/tools/bin:" + DefaultPath},
		{[]string{"PATH=/opt/bin:/usr/bin"}, "PATH=/tools/bin:/opt/bin:/usr/bin"},
		{[]string{"PATH=/tools/bin:/usr/bin"}, "PATH=/tools/bin:/usr/bin"},
		{[]string{"PATH=/tools/binx:/usr/bin"}, "PATH=/tools/bin:/tools/binx:/usr/bin"},
		{[]string{"PATH="}, "PATH=/tools/bin:" + DefaultPath},
	} {
		if got := PathEnv(c.image); got != c.want {
			t.Errorf("PathEnv(%q) = %q, want %q", c.image, got, c.want)
		}
	}
}

func TestModelEnv(t *testing.T) {
	s := AgentSpec{Models: []proto.ModelProvider{{Name: "anth", API: "anthropic"}, {Name: "oai", API: "openai"}, {Name: "oai2", API: "openai"}}}
	env := s.Env()
	for _, want := range []string{"TOOLGATE_MODEL=1", "ANTHROPIC_BASE_URL=http://127.0.0.1:3129/anth", "ANTHROPIC_API_KEY=toolgate-placeholder",
		"OPENAI_BASE_URL=http://127.0.0.1:3129/oai/v1", "OPENAI_API_KEY=toolgate-placeholder"} {
		if !slices.Contains(env, want) {
			t.Errorf("Env lacks %s: %q", want, env)
		}
	}
	call := s.CallEnv("c1", "sess-1")
	for _, want := range []string{"TOOLGATE_SESSION=sess-1", "ANTHROPIC_BASE_URL=http://127.0.0.1:3129/~c1~sess-1/anth"} {
		if !slices.Contains(call, want) {
			t.Errorf("CallEnv lacks %s: %q", want, call)
		}
	}
	if slices.Contains(s.CallEnv("c1", "bad session"), "TOOLGATE_SESSION=bad session") {
		t.Error("an invalid session hint exported")
	}
}

// Allowlisted services on the host's loopback must not be diverted to the
// sandbox's own by NO_PROXY: with any, loopback is proxied too and the
// forwarder learns which targets are the host's.
func TestHostLoopbackEnv(t *testing.T) {
	spec := AgentSpec{Agent: "a", Egress: true, HostLoopback: []string{"localhost:8080", "127.0.0.1:9000"}}
	for _, env := range [][]string{spec.Env(), spec.CallEnv("c1", "")} {
		for _, kv := range env {
			if strings.HasPrefix(strings.ToUpper(kv), "NO_PROXY=") {
				t.Errorf("%s with host loopback targets in %q", kv, env)
			}
		}
	}
	if !slices.Contains(spec.Env(), proto.EnvHostLoopback+"=localhost:8080,127.0.0.1:9000") {
		t.Errorf("container env %q does not name the host's loopback targets", spec.Env())
	}
	if slices.ContainsFunc(spec.CallEnv("c1", ""), func(kv string) bool { return strings.HasPrefix(kv, proto.EnvHostLoopback) }) {
		t.Error("the forwarder's setting leaked into the call env")
	}
}
