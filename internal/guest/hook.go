package guest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/toolgate/toolgate/internal/proto"
	"github.com/toolgate/toolgate/internal/proto/hooks"
)

// Claude Code hook programs (reference: docs of internal/proto/hooks). The gate
// answers on stdout with exactly one JSON object and exits 0 — with
// --exit2 a deny is the reason on stderr and exit 2 instead; either way a
// deny blocks. Anything that keeps it from a real decision (bad input, no
// gateway, a slow one) is a deny. The tap prints nothing and exits 0.
const (
	// DefaultHookDeadline is the gate's and the tap's own deadline, well
	// inside the hook timeout the settings writer registers (30 s): a gate
	// that answers late is one Claude Code kills, and onFailure "block"
	// then blocks without our reason.
	DefaultHookDeadline = 5 * time.Second
	// DefaultGateDeadline is the gate's: longer, because a rule may make a
	// call wait for a person (the gateway answers by hooks.MaxAskWait).
	DefaultGateDeadline = hooks.MaxAskWait + 5*time.Second
	// tapMaxInput bounds the tap's stdin: a PostToolUse of a large Read
	// carries the file; the tap bounds it before sending.
	tapMaxInput = 64 << 20
	// DefaultSpoolDir keeps undelivered tap events in the workspace: it
	// survives a gateway restart and a sandbox restart (tmpfs /tmp does
	// not). The agent can read and write it either way: the spool is for
	// delivery, not for evidence.
	DefaultSpoolDir = proto.WorkspacePath + "/.toolgate/spool"
	fallbackSpool   = "/tmp/toolgate-spool"
)

// Environment overrides (tests, and operators with other layouts).
const (
	envHookDeadline = "TOOLGATE_HOOK_DEADLINE" // Go duration
	envSpool        = "TOOLGATE_SPOOL"
)

func cmdHook(args []string, stderr io.Writer) int {
	exit2 := len(args) > 1 && args[1] == "--exit2"
	switch {
	case len(args) > 0 && args[0] == "pre-tool-use" && (len(args) == 1 || exit2 && len(args) == 2):
		return gate(os.Stdin, os.Stdout, stderr, exit2)
	case len(args) == 1 && args[0] == "post-tool-use":
		return tap(os.Stdin, stderr)
	}
	fmt.Fprintln(stderr, "usage: toolgate-client hook pre-tool-use [--exit2] | hook post-tool-use")
	// A misconfigured gate must still block: exit 2 is a deny to Claude Code.
	return 2
}

func hookDeadline(dflt time.Duration) time.Duration {
	if d, err := time.ParseDuration(os.Getenv(envHookDeadline)); err == nil && d > 0 {
		return d
	}
	return dflt
}

// gate asks the gateway for a decision and prints it. Whichever comes
// first, the answer or the deadline, prints; the other is discarded.
func gate(stdin io.Reader, stdout, stderr io.Writer, exit2 bool) int {
	var once sync.Once
	var code int
	answer := func(dec proto.GateAnswer) int {
		once.Do(func() {
			rep := hooks.ReplyPreToolUse(dec, exit2)
			_, _ = stdout.Write(rep.Stdout)
			_, _ = stderr.Write(rep.Stderr)
			code = rep.ExitCode
		})
		return code
	}
	deadline := time.Now().Add(hookDeadline(DefaultGateDeadline))
	timer := time.AfterFunc(time.Until(deadline), func() {
		os.Exit(answer(hooks.DenyInternal(errors.New("no decision from the gateway in time"))))
	})
	defer timer.Stop()

	data, err := io.ReadAll(io.LimitReader(stdin, hooks.DefaultMaxInput+1))
	if err != nil {
		return answer(hooks.DenyInternal(fmt.Errorf("reading hook input: %v", err)))
	}
	if _, err := hooks.ParseInput(bytes.NewReader(data), hooks.DefaultMaxInput); err != nil {
		return answer(hooks.DenyInternal(err))
	}
	var ga proto.GateAnswer
	if err := post(socketPath(), proto.PreToolUsePath, data, deadline, &ga); err != nil {
		return answer(hooks.DenyInternal(err))
	}
	return answer(ga)
}

// tap sends the event, or spools it when the gateway cannot take it; after
// a delivery it drains what earlier runs spooled. It always exits 0.
func tap(stdin io.Reader, stderr io.Writer) int {
	deadline := time.Now().Add(hookDeadline(DefaultHookDeadline))
	data, err := io.ReadAll(io.LimitReader(stdin, tapMaxInput+1))
	if err != nil || len(data) > tapMaxInput {
		fmt.Fprintf(stderr, "toolgate tap: hook input unreadable or over %d bytes; not recorded\n", tapMaxInput)
		return 0
	}
	in, err := hooks.ParseInput(bytes.NewReader(data), tapMaxInput)
	if err != nil {
		fmt.Fprintf(stderr, "toolgate tap: %v; not recorded\n", err)
		return 0
	}
	body, err := shrink(in)
	if err != nil {
		fmt.Fprintf(stderr, "toolgate tap: %v; not recorded\n", err)
		return 0
	}
	sock := socketPath()
	deliver := func(ev hooks.Event) error {
		return post(sock, proto.PostToolUsePath, ev.Body, deadline, nil)
	}
	ev := hooks.Event{ID: hooks.EventID(in), Body: body}
	if err := deliver(ev); errors.Is(err, hooks.ErrRejected) {
		// Spooling it would only retry it for ever; say why and drop it.
		fmt.Fprintf(stderr, "toolgate tap: %v; not recorded\n", err)
		return 0
	} else if err != nil {
		if serr := spool(ev); serr != nil {
			fmt.Fprintf(stderr, "toolgate tap: delivery failed (%v) and spooling failed: %v\n", err, serr)
		}
		return 0
	}
	for _, dir := range spoolDirs() {
		if !exists(dir) {
			continue
		}
		if _, err := (&hooks.Spool{Dir: dir}).Drain(deliver); err != nil {
			fmt.Fprintf(stderr, "toolgate tap: draining the spool: %v\n", err)
			break
		}
	}
	return 0
}

// shrink bounds the event before it leaves the sandbox: file bodies become
// sizes and the tool response is cut, as the audit would keep them anyway.
// The gateway bounds again; this keeps the socket and the spool small.
func shrink(in *hooks.Input) ([]byte, error) {
	in.ToolInput = hooks.AuditArgs(in.ToolName, in.ToolInput)
	if len(in.ToolResponse) > 0 {
		in.ToolResponse = hooks.BoundResponse(in.ToolName, in.ToolResponse)
	} else {
		in.ToolResponse = nil
	}
	return json.Marshal(in)
}

// spoolDirs are where undelivered events go, first choice first. In a
// sandbox: the workspace, or /tmp where the workspace is not writable (lost
// with the sandbox, but not with the gateway). Outside one (TOOLGATE_SOCKET
// names the socket, so the sandbox layout is not there): the user's cache
// directory, not a /workspace the host may not have. Drains look in all.
func spoolDirs() []string {
	if d := os.Getenv(envSpool); d != "" {
		return []string{d}
	}
	if os.Getenv("TOOLGATE_SOCKET") == "" {
		return []string{DefaultSpoolDir, fallbackSpool}
	}
	if d, err := os.UserCacheDir(); err == nil {
		return []string{filepath.Join(d, "toolgate", "spool")}
	}
	return []string{filepath.Join(os.TempDir(), fmt.Sprintf("toolgate-spool-%d", os.Getuid()))}
}

// spool stores ev in the first spool directory that can be created. In the
// workspace, .toolgate/ is marked as ignored by git so the project does not
// grow a directory to commit.
func spool(ev hooks.Event) error {
	var errs []error
	for _, dir := range spoolDirs() {
		sp, err := hooks.OpenSpool(dir)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if dir == DefaultSpoolDir {
			if ignore := filepath.Join(filepath.Dir(dir), ".gitignore"); !exists(ignore) {
				_ = os.WriteFile(ignore, []byte("*\n"), 0o644)
			}
		}
		return sp.Put(ev)
	}
	return errors.Join(errs...)
}

func exists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// runHints are the headers that link what this process asks of the
// gateway to the run it belongs to: the exec it runs under (claude started
// by toolgate run, and what claude starts: hooks, MCP servers) and that
// exec's session, from the environment the exec gave it.
func runHints() [][2]string {
	var out [][2]string
	for _, h := range [][2]string{{proto.HeaderParent, os.Getenv(proto.EnvCallID)}, {proto.HeaderSession, os.Getenv(proto.SessionEnv)}} {
		if proto.ValidCallID(h[1]) {
			out = append(out, h)
		}
	}
	return out
}

// post sends one JSON request over the agent socket and decodes a 200
// answer into out (when non-nil). Any other status is an error carrying the
// gateway's message.
func post(sock, path string, body []byte, deadline time.Time, out any) error {
	conn, err := net.DialTimeout("unix", sock, time.Until(deadline))
	if err != nil {
		return fmt.Errorf("gateway unavailable at %s: %v", sock, unwrapOp(err))
	}
	defer conn.Close()
	// A moment past the hook's own deadline, so its timer answers first
	// and says why; this only stops a read that would outlive the process.
	_ = conn.SetDeadline(deadline.Add(100 * time.Millisecond))
	req := make([]byte, 0, 160+len(body))
	req = append(req, "POST "...)
	req = append(req, path...)
	req = append(req, " HTTP/1.1\r\nHost: toolgate\r\nUser-Agent: toolgate-client\r\nConnection: close\r\nContent-Type: application/json\r\n"...)
	for _, h := range runHints() {
		req = append(req, h[0]+": "+h[1]+"\r\n"...)
	}
	req = append(req, "Content-Length: "...)
	req = strconv.AppendInt(req, int64(len(body)), 10)
	req = append(req, "\r\n\r\n"...)
	req = append(req, body...)
	if _, err := conn.Write(req); err != nil {
		return fmt.Errorf("sending to the gateway: %v", unwrapOp(err))
	}
	br := bufio.NewReaderSize(conn, 4<<10)
	status, chunked, length, err := readHead(br)
	if err != nil {
		return fmt.Errorf("no answer from the gateway (restarting?): %v", unwrapOp(err))
	}
	b, err := io.ReadAll(io.LimitReader(answerBody(br, chunked, length), 1<<20))
	if err != nil {
		return fmt.Errorf("reading the gateway's answer: %v", unwrapOp(err))
	}
	if status != 200 {
		err := fmt.Errorf("gateway answered %d", status)
		var e struct {
			Error *respError `json:"error"`
		}
		if json.Unmarshal(b, &e) == nil && e.Error != nil {
			err = fmt.Errorf("gateway answered %d: %s", status, e.Error.Message)
		}
		if rejected(status) {
			err = fmt.Errorf("%w: %w", hooks.ErrRejected, err)
		}
		return err
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			return fmt.Errorf("bad answer from the gateway: %v", err)
		}
	}
	return nil
}

// rejected reports whether a status refuses the request itself, so sending
// it again cannot help (unlike 5xx, a missing route during an upgrade, a
// timeout or a rate limit).
func rejected(status int) bool {
	switch status {
	case 404, 408, 425, 429:
		return false
	}
	return status >= 400 && status < 500
}
