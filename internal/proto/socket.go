package proto

// Routes of the agent socket (SocketPath in the sandbox).
const (
	// CallPattern is the plugin-call route; {name} is the tool. A call's
	// body is one JSON call header, or NDJSON: the header, then stdin frames.
	CallPattern = "/v1/tools/{name}/call"
	// The Claude Code hook routes: the gate answers before the tool runs,
	// the tap records what ran.
	PreToolUsePath  = "/v1/hooks/pre-tool-use"
	PostToolUsePath = "/v1/hooks/post-tool-use"
	// EgressPath is CONNECTed by the in-sandbox forwarder for one tunnel,
	// naming the destination in HeaderTarget and, optionally, the exec
	// call whose process connects in HeaderParent.
	EgressPath   = "/v1/egress"
	HeaderTarget = "Toolgate-Target"
	HeaderParent = "Toolgate-Parent"
	// HeaderSession carries a session hint (the gate and tap send the one
	// their exec runs under); like HeaderParent it is for correlation, never
	// for identity.
	HeaderSession = "Toolgate-Session"
	// HeaderBudget opens a task's budget for the session (cost=2,calls=500):
	// honoured on the admin API only (toolgate run --budget), never from a
	// sandbox.
	HeaderBudget = "Toolgate-Budget"
)

// CallPath is the CallPattern route of tool name.
func CallPath(name string) string { return "/v1/tools/" + name + "/call" }

// Environment the host gives sandbox processes.
const (
	// EnvCallID holds the id of the exec call a process runs under; a
	// launcher it starts passes it on as the call's parent.
	EnvCallID = "TOOLGATE_CALL_ID"
	// EnvEgress is "1" in a sandbox with egress: init starts the forwarder.
	EnvEgress = "TOOLGATE_EGRESS"
)

// GateAnswer is the body of the gate route's 200 answer
// (PreToolUsePath): the decision on a Claude Code tool call, the audit id
// of its entry, and what shadow rules would have decided (the hook client
// ignores it; it is there for a person reading the answer).
type GateAnswer struct {
	Allow  bool    `json:"allow"`
	Rule   string  `json:"rule"` // the rule that decided
	Reason string  `json:"reason"`
	Ask    bool    `json:"ask,omitempty"` // a rule sent the call to a person
	Shadow *Shadow `json:"shadow,omitempty"`
	ID     string  `json:"id,omitempty"`
}

// Shadow is the would-be decision of shadow-mode rules (gateway.Shadow).
type Shadow struct {
	Verdict string   `json:"verdict"` // allow or deny, had the shadow rules been enforced
	Rule    string   `json:"rule"`
	Reason  string   `json:"reason,omitempty"`
	Matched []string `json:"matched"` // every shadow rule that matched
}
