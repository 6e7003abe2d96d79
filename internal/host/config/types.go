// Package config loads and validates toolgate's YAML configuration.
package config

import (
	"time"

	"github.com/toolgate/toolgate/internal/host/model"
)

// Config is the whole configuration file (~/.toolgate/config.yaml).
type Config struct {
	Gateway  Gateway           `yaml:"gateway"`
	Defaults Agent             `yaml:"defaults"` // applied to every agent before its own fields
	Plugins  map[string]Plugin `yaml:"plugins"`
	Agents   map[string]*Agent `yaml:"agents"`
	// Secrets declares host-side secrets by reference (env or file); literal
	// values belong in HOME/secrets.yaml (0600), which has the same format.
	Secrets map[string]Secret `yaml:"secrets"`

	// Home is the toolgate home directory the file was loaded for (not in YAML).
	Home string `yaml:"-"`
	// Path is the file the config was loaded from (not in YAML).
	Path string `yaml:"-"`
	// Digest is the SHA-256 of the file's bytes, in hex: the version of
	// the policy it holds (not in YAML).
	Digest string `yaml:"-"`
}

// Gateway holds daemon-wide settings.
type Gateway struct {
	// Listen is an optional TCP address for the admin API (and MCP), e.g. 127.0.0.1:7433.
	Listen string `yaml:"listen"`
	// ClientBinary is the static toolgate-client mounted into sandboxes;
	// default: next to the toolgate executable.
	ClientBinary string        `yaml:"clientBinary"`
	Audit        Audit         `yaml:"audit"`
	Egress       GatewayEgress `yaml:"egress"`
	// Models are the model providers agents may use through the model door,
	// by name (the name is the `tool` of their audit entries).
	Models map[string]ModelProvider `yaml:"models"`
	// Sandbox chooses where the agents' sandboxes run.
	Sandbox Sandbox `yaml:"sandbox"`
	// Telemetry sends traces of the calls to an observability backend.
	Telemetry Telemetry `yaml:"telemetry"`
	// Approvals reaches people where they are when a rule asks: each
	// notifier gets the call and single-use signed links to answer it.
	Approvals Approvals `yaml:"approvals"`
}

// Approvals configures who is told of a call that waits for a person.
type Approvals struct {
	// LinkBase is the URL at which approvers reach this gateway's listen
	// address (e.g. through a reverse proxy): the answer links start
	// with it. Default: http://LISTEN.
	LinkBase string `yaml:"linkBase"`
	// RequireToken accepts an answer by link only with an admin token
	// (its id is recorded as who answered); without it the link is the
	// credential and the notifier it was sent to is recorded.
	RequireToken bool `yaml:"requireToken"`
	// Notify lists the notifiers; each call that asks is sent to all.
	Notify []Notifier `yaml:"notify"`
}

// The notifier kinds.
const (
	NotifyWebhook = "webhook" // a JSON document (docs/protocol.md)
	NotifySlack   = "slack"   // a Slack-compatible incoming-webhook message with blocks
)

// Notifier is one place asks are sent.
type Notifier struct {
	Name string `yaml:"name"` // default: the kind and position, e.g. webhook-0
	Kind string `yaml:"kind"` // webhook or slack
	// URL receives a POST per ask: https, or http to a loopback address.
	// It may hold {{secret:NAME}} (granted to agent "*", tool approvals.notify).
	URL string `yaml:"url"`
	// Timeout bounds one attempt (default 5s); Attempts is how many are
	// made before the call is denied as undeliverable (default 3).
	Timeout  time.Duration `yaml:"timeout"`
	Attempts int           `yaml:"attempts"`
}

// Telemetry configures what leaves the host for an observability backend.
type Telemetry struct {
	// OTLP, when set, exports a trace of every call over OTLP (internal/
	// tracing); nil: no traces are made at all.
	OTLP *OTLP `yaml:"otlp"`
}

// The OTLP protocols.
const (
	OTLPHTTP = "http"
	OTLPGRPC = "grpc"
)

// OTLP names the collector traces go to. Credentials for it come from the
// standard OTEL_EXPORTER_OTLP_HEADERS variable, never from this file.
type OTLP struct {
	// Endpoint is host:port, or a URL (http:// is plain text; for the
	// http protocol its path replaces /v1/traces).
	Endpoint string `yaml:"endpoint"`
	// Protocol is http (OTLP/HTTP with protobuf, port 4318; the default) or grpc (port 4317).
	Protocol string `yaml:"protocol"`
	// Insecure sends to a host:port endpoint in plain text instead of TLS.
	Insecure bool `yaml:"insecure"`
}

// GatewayEgress configures the egress guard for every agent.
type GatewayEgress struct {
	// Resolver is the DNS server (ip:port) the guard asks; default: the
	// host's resolver. For operators who pin DNS, and for tests.
	Resolver string `yaml:"resolver"`
	// NAT64 lists the network's operator NAT64 prefixes (RFC 6052 lengths:
	// /32 /40 /48 /56 /64 /96), so the IPv4 address they carry is classified
	// — a metadata address behind one is still refused. The well-known
	// 64:ff9b::/96 is always decoded.
	NAT64 []string `yaml:"nat64"`
}

// Audit configures the audit log. Fields tagged config:"size" take a byte
// count or a size such as 64m.
type Audit struct {
	Dir          string `yaml:"dir"`                        // default HOME/logs
	MaxFileBytes int64  `yaml:"maxFileBytes" config:"size"` // rotate when exceeded; default 64 MiB
	MaxArgBytes  int    `yaml:"maxArgBytes" config:"size"`  // strings longer than this are cut; default 1024
	// A signed checkpoint of the log's tree is written every
	// CheckpointEvery entries and CheckpointInterval after an entry no
	// checkpoint covers (defaults 1000 and 30s), at shutdown and rotation.
	CheckpointEvery    int           `yaml:"checkpointEvery"`
	CheckpointInterval time.Duration `yaml:"checkpointInterval"`
	// Witnesses cosign each checkpoint that is consistent with the last
	// they cosigned (toolgate witness); a rewritten history is refused.
	Witnesses []AuditWitness `yaml:"witnesses"`
	// Postgres, when set, also copies the log into a fleet database that
	// several gateways share (package auditpg); the files stay the truth.
	Postgres *AuditPostgres `yaml:"postgres"`
}

// AuditWitness is one witness of this gateway's log: where it listens and
// its verifier key (the key its toolgate witness prints).
type AuditWitness struct {
	URL string `yaml:"url"`
	Key string `yaml:"key"`
}

// AuditPostgres names the fleet database.
type AuditPostgres struct {
	// DSN is a postgres:// URL or key=value connection string; the password
	// belongs in a host secret, {{secret:NAME}}, granted to agent "*" and
	// tool audit.postgres.
	DSN string `yaml:"dsn"`
}

// Agent is one agent: its sandbox, its tools and its rules.
type Agent struct {
	Image     string   `yaml:"image"`
	Workspace string   `yaml:"workspace"` // host dir; default HOME/agents/NAME/workspace
	User      string   `yaml:"user"`      // uid:gid inside the sandbox; default 1000:1000
	Limits    Limits   `yaml:"limits"`
	Core      Core     `yaml:"core"`
	Tools     []string `yaml:"tools"` // plugin tool allowlist; default empty (deny)
	Rules     []Rule   `yaml:"rules"`
	// Default is the decision when no rule matches an enabled tool: allow (default) or deny.
	Default string `yaml:"default"`
	// AskTimeout bounds how long a call an ask rule matched waits for a
	// person (default 2m; Claude Code's gate waits within its hook timeout).
	AskTimeout time.Duration `yaml:"askTimeout"`
	// Egress lets the sandbox reach the network through the gateway's guard;
	// nil: the sandbox has no way out at all.
	Egress *Egress `yaml:"egress"`
	// Rates limit allowed calls by tool or kind: a call over a limit is
	// denied, with the limit as its reason. An agent's own list replaces
	// the defaults' list.
	Rates []Rate `yaml:"rates"`
	// Model lets the agent's sandbox reach model providers through the
	// gateway's model door; nil: it has none.
	Model *AgentModel `yaml:"model"`
	// Session says what the agent's calls give their session (labels
	// rules read as session.labels) and which calls share them.
	Session Session `yaml:"session"`
}

// The scopes of session labels.
const (
	ScopeAgent   = "agent"   // every session of the agent shares its labels (the default)
	ScopeSession = "session" // each session hint has its own
)

// Session is what an agent's allowed calls give their session: each
// label whose expression matches a call is given by it, and rules read
// them as session.labels (docs/policy.md, Session facts).
type Session struct {
	// Scope is agent (the default) or session. Session hints come from
	// the agent, which can start a new session at will; scope session suits
	// agents whose sessions toolgate names itself (toolgate agent).
	Scope string `yaml:"scope"`
	// Labels are the defaults' first, then the agent's own.
	Labels []LabelRule `yaml:"labels"`
	// Budget caps each task the agent is given — a toolgate run or
	// toolgate agent session — across every door; a run's --budget
	// replaces it. Nil: tasks have no cap of their own.
	Budget *SessionBudget `yaml:"budget"`
}

// SessionBudget caps one task; a zero field is no cap. At a cap the next
// call waits for a person to raise it, and is denied without an answer.
type SessionBudget struct {
	Cost   float64       `yaml:"cost" json:"cost,omitempty"`     // USD of model calls, priced by the providers' prices
	Tokens int64         `yaml:"tokens" json:"tokens,omitempty"` // model tokens, all kinds
	Calls  int           `yaml:"calls" json:"calls,omitempty"`   // allowed calls of every kind
	Wall   time.Duration `yaml:"wall" json:"wall,omitempty"`     // since the task started
}

// LabelRule gives a label to the session of every allowed call its
// expression matches.
type LabelRule struct {
	Label string `yaml:"label"` // a name: lowercase letters, digits, _ or -
	// When is a CEL expression over the call, as a rule's; one that cannot
	// be evaluated gives the label (a label only ever adds care).
	When string `yaml:"when"`

	Line int `yaml:"-"` // where it is written, for error messages
}

// Rate is one limit on an agent's calls. Tool or Kind selects the calls
// (neither: all of them); each non-zero limit applies.
type Rate struct {
	Tool        string `yaml:"tool"`
	Kind        string `yaml:"kind"`
	PerMinute   int    `yaml:"perMinute"`                 // calls per minute (a bucket of this size, refilled evenly)
	Concurrent  int    `yaml:"concurrent"`                // calls running at once
	BytesPerDay int64  `yaml:"bytesPerDay" config:"size"` // egress bytes both ways per UTC day
}

// Egress is an agent's outbound network policy. Fields tagged config:"size"
// take a byte count or a size such as 1g.
type Egress struct {
	// Allow lists "host:port" and "*.suffix:port" (strict subdomains);
	// empty allows nothing.
	Allow []string `yaml:"allow"`
	// Private is deny (default) or allow: non-global destinations such as
	// RFC 1918 addresses. Cloud metadata addresses are refused either way.
	Private        string        `yaml:"private"`
	MaxConnections int           `yaml:"maxConnections"`         // concurrent tunnels; default 64
	IdleTimeout    time.Duration `yaml:"idleTimeout"`            // no bytes either way ends a tunnel; default 60s
	MaxBytes       int64         `yaml:"maxBytes" config:"size"` // per tunnel, both ways; default 1g
}

// Limits are the sandbox's resource limits. Fields tagged config:"size" take
// a byte count or a size such as 64m.
type Limits struct {
	Memory      string        `yaml:"memory"`                    // e.g. 512m; default 512m
	CPUs        float64       `yaml:"cpus"`                      // default 1
	Pids        int64         `yaml:"pids"`                      // default 256
	ExecTimeout time.Duration `yaml:"execTimeout"`               // default and ceiling for exec timeouts; default 10m
	MaxOutput   int64         `yaml:"maxOutput" config:"size"`   // bytes kept per stream; default 1 MiB
	MaxReadFile int64         `yaml:"maxReadFile" config:"size"` // bytes read returns at most; default 10 MiB
	MaxWrite    int64         `yaml:"maxWrite" config:"size"`    // bytes write/patch accept; default 64 MiB
}

// Core switches the core tools on or off; nil means on.
type Core struct {
	Read  *bool `yaml:"read"`
	Write *bool `yaml:"write"`
	Patch *bool `yaml:"patch"`
	Exec  *bool `yaml:"exec"`
}

// Rule is a CEL expression with a decision. Exactly one of Deny and Allow is set.
type Rule struct {
	Name  string `yaml:"name"`
	Deny  string `yaml:"deny"`
	Allow string `yaml:"allow"`
	// Ask sends a matching call to a person (toolgate approvals); it
	// waits up to the agent's askTimeout and is denied without an answer.
	Ask    string `yaml:"ask"`
	Reason string `yaml:"reason"`
	// Mode shadow evaluates the rule and records its would-be verdict in
	// the entry's detail without enforcing it; enforce (the default) bites.
	Mode string `yaml:"mode"`
	// Examples are calls the rule must and must not match: checked by
	// `config check`, `serve` and `toolgate policy test`.
	Examples *RuleExamples `yaml:"examples"`

	// Line is where the rule starts in the file, for error messages (not in YAML).
	Line int `yaml:"-"`
	// ID names the rule in decisions and the audit log: Name when set, else
	// its position, "rules[i]" or "defaults.rules[i]". Filled by Load (not in YAML).
	ID string `yaml:"-"`
}

// RuleExamples are a rule's tests.
type RuleExamples struct {
	Match    []Example `yaml:"match"`
	NotMatch []Example `yaml:"not_match"`
}

// Example is one call a rule is tested on. Written as a plain string it is
// an exec command ("rm -rf /"); as a mapping it names the facts:
// {tool: read, path: /etc/shadow}, {tool: git, argv: [push, --force]},
// {kind: egress, host: example.com, port: 443}, {tool: Bash, kind: hook,
// command: "rm -rf /"}, with args for anything else, and session for the
// labels its session has: {kind: egress, host: x.test, port: 443,
// session: [private, untrusted]}.
type Example struct {
	Tool    string         `yaml:"tool"`
	Kind    string         `yaml:"kind"`
	Command string         `yaml:"command"`
	Argv    []string       `yaml:"argv"`
	Path    string         `yaml:"path"`
	Host    string         `yaml:"host"`
	Port    int            `yaml:"port"`
	Args    map[string]any `yaml:"args"`
	// Session names the labels the call's session already has, for rules
	// reading session.labels; the call's own labels come from the givers.
	Session []string `yaml:"session"`

	Line int `yaml:"-"` // where it is written, for error messages
}

// Plugin declares a host-side tool handler.
type Plugin struct {
	Kind    string            `yaml:"kind"`    // command, builtin, mcp …
	Command string            `yaml:"command"` // kind command: host executable
	Args    []string          `yaml:"args"`    // fixed leading arguments
	Cwd     string            `yaml:"cwd"`     // "workspace" maps the sandbox cwd to the host workspace
	Env     map[string]string `yaml:"env"`     // values may hold {{secret:NAME}}
	Timeout time.Duration     `yaml:"timeout"`
	Builtin string            `yaml:"builtin"` // kind builtin: registered handler name (default: the plugin's name)
	// MaxOutput caps each of stdout and stderr of one call; default 16 MiB.
	MaxOutput int64 `yaml:"maxOutput" config:"size"`
}

// Secret is one host-side secret: exactly one source, and the (agent, tool)
// pairs allowed to use it. Empty lists grant nothing; "*" grants all.
type Secret struct {
	Value  string   `yaml:"value"` // literal; only in secrets.yaml
	Env    string   `yaml:"env"`   // a variable of the gateway's environment
	File   string   `yaml:"file"`  // a host file (relative to HOME); one trailing newline is dropped
	Agents []string `yaml:"agents"`
	Tools  []string `yaml:"tools"`
}

// ModelProvider is one model API the gateway forwards to, adding the
// credential from host secrets (the sandbox never holds it).
type ModelProvider struct {
	API  string `yaml:"api"`  // anthropic or openai: the wire shape
	Kind string `yaml:"kind"` // how the door serves it; default http (the remote API at URL)
	URL  string `yaml:"url"`  // kind http: base URL, e.g. https://api.anthropic.com
	// Script is kind scripted's file of turns (an absolute path); empty:
	// the embedded quickstart script.
	Script string `yaml:"script"`
	// Secret names the host secret (secrets.yaml or the secrets section)
	// holding the API key; its tools list must name this provider.
	Secret string `yaml:"secret"`
	// Private is deny (default) or allow: URL may resolve to a non-global
	// address (a model server on the host's network). Metadata stays refused.
	Private string `yaml:"private"`
	// Timeout ends a call when the upstream sends nothing for this long
	// (before its headers or between two chunks); default 10m: a
	// non-streamed answer sends nothing until it is complete.
	Timeout time.Duration `yaml:"timeout"`
	// Prices are USD per million tokens by model name or pattern
	// (claude-sonnet-4*); a model without a price costs 0 and says so.
	Prices map[string]model.Price `yaml:"prices"`
	// Headers are sent to the provider on every request, in place of any
	// the sandbox sends of the same name: the billing headers
	// (OpenAI-Organization, OpenAI-Project), which the sandbox can never
	// set, or a pinned Anthropic-Version. Not for credentials: use secret.
	Headers map[string]string `yaml:"headers"`
}

// AgentModel is an agent's use of the model door. Fields tagged
// config:"size" take a byte count or a size such as 32m.
type AgentModel struct {
	Providers []string     `yaml:"providers"`             // names under gateway.models
	Allow     []string     `yaml:"allow"`                 // model names or patterns (claude-*); empty: any
	MaxBody   int64        `yaml:"maxBody" config:"size"` // request body limit; default 32m
	Budget    model.Budget `yaml:"budget"`
	// ServerTools are the kinds of tool the provider may run on the
	// agent's behalf (web_search, web_fetch, code_execution, file_search,
	// mcp …; see model.ServerTool): each reaches the network from the
	// provider's side. Empty (the default): a request asking for any is
	// refused.
	ServerTools []string `yaml:"serverTools"`
	// Connectors are the MCP servers (host:port, *.suffix:port) the
	// provider may be asked to connect to, when mcp is among ServerTools.
	// Unset: the agent's egress allowlist, the hosts it may reach itself.
	Connectors []string `yaml:"connectors"`
}
