package proto

// The warm executor: `toolgate-client executor`, started by init, serves
// execs on a Unix socket in a host directory bind-mounted read-write, so a
// call costs a connection instead of an Engine exec. Protocol (one call per
// connection): POST ExecRoute, body = one JSON ExecRequest line, then the
// raw stdin bytes; a 200 response is exec frames (frames.go): output as
// produced, then exactly one exit frame. Any other status means nothing ran.
const (
	ExecDirPath    = RunDir + "/exec"
	ExecSocketName = "executor.sock"
	ExecSocketPath = ExecDirPath + "/" + ExecSocketName
	ExecRoute      = "/v1/exec"
	// MaxExecLine bounds the request line.
	MaxExecLine = 1 << 20
	// ExecBuiltinHeader, sent as ExecBuiltinPut, lets the executor run a
	// request whose argv is `ClientPath put …` (and no timeout) inside its
	// own process instead of as a child: the same code, answers and exit
	// codes, without a process and a pipe in the content's way. An executor
	// that did so says it with the same header on its response; an older
	// one ignores it and runs the child.
	ExecBuiltinHeader = "Toolgate-Builtin"
	ExecBuiltinPut    = "put"
)

// ExecRequest is the first line of an exec request.
type ExecRequest struct {
	Argv    []string `json:"argv"`
	Cwd     string   `json:"cwd,omitempty"`
	Env     []string `json:"env,omitempty"`     // added to the container's environment
	Timeout string   `json:"timeout,omitempty"` // Go duration; kills the process group
	CallID  string   `json:"callId,omitempty"`  // records the group for `kill --call`
}

// ExecExit ends a response.
type ExecExit struct {
	ExitCode int  `json:"exitCode"`
	TimedOut bool `json:"timedOut,omitempty"`
}

// FileHeader is the first line `toolgate-client get` prints before a
// file's bytes: the gateway's read learns the full size and mode from it.
type FileHeader struct {
	Size int64  `json:"size"`
	Mode uint32 `json:"mode"`
}
