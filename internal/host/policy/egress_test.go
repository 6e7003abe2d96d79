package policy

import (
	"net/netip"
	"reflect"
	"testing"

	"github.com/toolgate/toolgate/internal/host/door/egress"
	"github.com/toolgate/toolgate/internal/host/gateway"
	"github.com/toolgate/toolgate/internal/host/netrule"
)

// resolvedPublic is what the egress tool's Prepare leaves on a call whose
// name resolved to one global address.
var resolvedPublic = &gateway.EgressFacts{Resolved: []netip.Addr{netip.MustParseAddr("93.184.215.14")}}

func TestDecideEgress(t *testing.T) {
	t.Parallel()
	e := engine(t, `agents:
  web:
    default: deny
    egress:
      allow: ["pypi.org:443", "*.pythonhosted.org:443", "db.test:5432", "169.254.169.254:80"]
    rules:
      - {name: no-files, deny: 'kind == "egress" && host == "files.pythonhosted.org"', reason: not that mirror}
  lab:
    egress: {allow: ["db.test:5432"], private: allow}
  offline: {}
`)
	call := func(agent, host string, port int, resolved ...any) *gateway.Call {
		c := &gateway.Call{Agent: agent, Kind: gateway.KindEgress, Tool: egress.ToolName, Host: host, Port: port}
		if resolved != nil {
			// As read back from the audit log.
			f, err := netrule.RecordedFacts(map[string]any{"resolved": resolved})
			if err != nil {
				t.Fatal(err)
			}
			c.Egress = f
		}
		return c
	}
	tests := []struct {
		name  string
		call  *gateway.Call
		allow bool
		rule  string
	}{
		{"allowlisted, global", call("web", "pypi.org", 443, "151.101.0.223", "2a04:4e42::223"), true, "egress.allow[0]"},
		{"wildcard, default deny does not apply", call("web", "x.pythonhosted.org", 443, "151.101.0.223"), true, "egress.allow[1]"},
		{"a deny rule still wins", call("web", "files.pythonhosted.org", 443, "151.101.0.223"), false, "no-files"},
		{"off the list", call("web", "evil.example", 443), false, netrule.RuleAllowlist},
		{"wrong port", call("web", "pypi.org", 22), false, netrule.RuleAllowlist},
		{"apex of a wildcard", call("web", "pythonhosted.org", 443), false, netrule.RuleAllowlist},
		{"private answer", call("web", "db.test", 5432, "10.0.0.5"), false, netrule.RulePrivate},
		{"private allowed", call("lab", "db.test", 5432, "10.0.0.5"), true, "egress.allow[0]"},
		{"mixed even when private is allowed", call("lab", "db.test", 5432, "10.0.0.5", "151.101.0.223"), false, netrule.RuleMixed},
		{"metadata even when listed", call("web", "169.254.169.254", 80, "169.254.169.254"), false, netrule.RuleMetadata},
		{"mapped metadata answer", call("lab", "db.test", 5432, "::ffff:169.254.169.254"), false, netrule.RuleMetadata},
		{"empty answer", call("web", "pypi.org", 443, []any{}...), false, netrule.RuleEmpty},
		{"no answer recorded", call("web", "pypi.org", 443), false, netrule.RuleResolve},
		{"no egress configured", call("offline", "pypi.org", 443, "151.101.0.223"), false, netrule.RuleAllowlist},
		{"no port", call("web", "pypi.org", 0), false, "args.invalid"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := e.Decide(tt.call)
			if d.Allow != tt.allow || d.Rule != tt.rule {
				t.Errorf("Decide = %+v, want allow=%v rule=%s", d, tt.allow, tt.rule)
			}
			if x := e.Explain(tt.call); !reflect.DeepEqual(x.Decision, d) {
				t.Errorf("Explain = %+v, Decide = %+v", x.Decision, d)
			}
		})
	}

	failed := call("web", "pypi.org", 443, "151.101.0.223")
	failed.Egress.ResolveError = "lookup pypi.org: no such host"
	if d := e.Decide(failed); d.Allow || d.Rule != netrule.RuleResolve {
		t.Errorf("failed lookup: %+v", d)
	}
}
