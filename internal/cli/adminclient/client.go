// Package adminclient is the client of the gateway's admin API (the server
// is internal/host/door/adminapi): what the CLI, the tests and the benchmarks use to
// reach a running gateway, over the home's Unix socket or a TCP address.
// It speaks its small part of HTTP/1.1 itself (http.go) and links no
// server, so `toolgate exec` starts and returns quickly.
package adminclient

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"github.com/toolgate/toolgate/internal/proto"
	"github.com/toolgate/toolgate/internal/proto/api"
)

// ErrDaemonDown means nothing answers on the admin socket.
var ErrDaemonDown = errors.New("the toolgate daemon is not running (start it with `toolgate serve`)")

// Client talks to a running daemon. Each request is one connection: a CLI
// run makes one call.
type Client struct {
	network, addr string // "unix" and the socket, or "tcp" and host:port
	host          string // the Host header
	token         string
	session       string // sent with every call: the calls of one run
	budget        string // the run's caps (toolgate run --budget)
}

// WithSession returns a client whose calls carry session (toolgate run
// starts one; everything its process tree does is recorded under it).
func (c *Client) WithSession(session string) *Client {
	cc := *c
	cc.session = session
	return &cc
}

// WithBudget returns a client whose calls open their session's task with
// these caps (cost=2,calls=500).
func (c *Client) WithBudget(budget string) *Client {
	cc := *c
	cc.budget = budget
	return &cc
}

// Dial returns a client for the daemon of a toolgate home, over its Unix socket.
func Dial(home string) (*Client, error) {
	tok, err := os.ReadFile(filepath.Join(home, api.TokenFile))
	if err != nil {
		return nil, fmt.Errorf("reading the admin token: %w (run `toolgate init`)", err)
	}
	return &Client{network: "unix", addr: filepath.Join(home, api.SocketName), host: "toolgate",
		token: strings.TrimSpace(string(tok))}, nil
}

// DialAddr returns a client for a daemon's admin API on a TCP address
// (gateway.listen; a gateway in a cluster through kubectl port-forward),
// with the admin token in the file tokenFile.
func DialAddr(addr, tokenFile string) (*Client, error) {
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return nil, fmt.Errorf("admin API address %q: want host:port: %w", addr, err)
	}
	tok, err := os.ReadFile(tokenFile)
	if err != nil {
		return nil, fmt.Errorf("reading the admin token: %w", err)
	}
	return &Client{network: "tcp", addr: addr, host: addr, token: strings.TrimSpace(string(tok))}, nil
}

// Call runs a tool for an agent. With stdout/stderr set, output streams as
// the tool produces it; otherwise the result carries it.
func (c *Client) Call(ctx context.Context, agent, tool string, args any, stdout, stderr io.Writer) (*api.Result, error) {
	accept := "application/json"
	if stdout != nil {
		accept = api.MediaNDJSON
	}
	resp, err := c.call(ctx, agent, tool, args, accept)
	if err != nil {
		return nil, err
	}
	defer resp.body.Close()
	if resp.header["content-type"] == api.MediaNDJSON {
		return ReadFrames(resp.body, stdout, stderr)
	}
	var res api.Result
	dec := json.NewDecoder(resp.body)
	dec.UseNumber() // a byte count or exit code prints as the integer it is, not 1.048576e+06
	if err := dec.Decode(&res); err != nil {
		return nil, fmt.Errorf("bad response from daemon: %w", err)
	}
	return &res, nil
}

// call sends a tool call with args as its JSON body and returns the 200
// answer, or the daemon's error.
func (c *Client) call(ctx context.Context, agent, tool string, args any, accept string) (*response, error) {
	body, err := json.Marshal(args)
	if err != nil {
		return nil, err
	}
	req, err := c.request("POST", callPath(agent, tool), "application/json", body)
	if err != nil {
		return nil, err
	}
	if err := req.set("Accept", accept); err != nil {
		return nil, err
	}
	return c.do(ctx, req)
}

// CallRaw runs a tool whose input is body, sent as bytes (size of them;
// -1: unknown) with the arguments in a header: a write's content streams
// from the caller's file to the sandbox without being held or encoded.
func (c *Client) CallRaw(ctx context.Context, agent, tool string, args any, body io.Reader, size int64) (*api.Result, error) {
	req, err := c.rawRequest(agent, tool, args, body, size)
	if err != nil {
		return nil, err
	}
	var res api.Result
	return &res, c.decode(ctx, req, &res, true)
}

// CallStream runs a tool whose input is stdin, sent as bytes as it is
// read (an exec's stdin, byte for byte: binary, and any length), while its
// output streams back to stdout and stderr as the tool produces it — both
// at once, so a command that answers its input as it reads it never waits
// for the end of it.
func (c *Client) CallStream(ctx context.Context, agent, tool string, args any, stdin io.Reader, stdout, stderr io.Writer) (*api.Result, error) {
	req, err := c.rawRequest(agent, tool, args, stdin, -1)
	if err != nil {
		return nil, err
	}
	req.duplex = true
	if err := req.set("Accept", api.MediaNDJSON); err != nil {
		return nil, err
	}
	resp, err := c.do(ctx, req)
	if err != nil {
		return nil, err
	}
	defer resp.body.Close()
	return ReadFrames(resp.body, stdout, stderr)
}

// rawRequest is a call whose input is body (size bytes; -1: unknown) and
// whose arguments go in the api.ArgsHeader.
func (c *Client) rawRequest(agent, tool string, args any, body io.Reader, size int64) (*request, error) {
	a, err := json.Marshal(args)
	if err != nil {
		return nil, err
	}
	req, err := c.request("POST", callPath(agent, tool), api.MediaRaw, nil)
	if err != nil {
		return nil, err
	}
	req.body, req.size = body, size
	return req, req.set(api.ArgsHeader, string(a))
}

// CallRawOut runs a tool whose output is bytes (a read with encoding raw)
// and copies them to w as they come; the outcome follows them.
func (c *Client) CallRawOut(ctx context.Context, agent, tool string, args any, w io.Writer) (*api.Result, error) {
	resp, err := c.call(ctx, agent, tool, args, api.MediaRaw)
	if err != nil {
		return nil, err
	}
	defer resp.body.Close()
	if ct := resp.header["content-type"]; ct != api.MediaRaw {
		return nil, fmt.Errorf("bad response from daemon: %s where bytes were asked for", ct)
	}
	if _, err := io.Copy(w, resp.body); err != nil {
		return nil, err
	}
	var outcome struct {
		Result *api.Result `json:"result"`
		Error  *api.Error  `json:"error"`
	}
	dec := json.NewDecoder(strings.NewReader(resp.trailer[strings.ToLower(api.ResultTrailer)]))
	dec.UseNumber()
	switch err := dec.Decode(&outcome); {
	case err != nil:
		return nil, errors.New("the daemon's answer ended without its outcome (daemon restarted?)")
	case outcome.Error != nil:
		return nil, outcome.Error
	case outcome.Result == nil:
		return nil, errors.New("the daemon's answer ended without its outcome")
	}
	return outcome.Result, nil
}

// Escaped: a name with '/', '?' or '#' must reach the server as that name
// (and be refused as unknown), not as another route or a shorter name.
func callPath(agent, tool string) string {
	return "/v1/agents/" + url.PathEscape(agent) + "/tools/" + url.PathEscape(tool) + "/call"
}

// Agents lists the agents and their sandboxes.
func (c *Client) Agents(ctx context.Context) ([]api.AgentStatus, error) {
	var rows []api.AgentStatus
	return rows, c.json(ctx, "GET", "/v1/agents", nil, &rows)
}

// Eval asks the daemon's live policy for a dry-run decision.
func (c *Client) Eval(ctx context.Context, req api.EvalRequest) (json.RawMessage, error) {
	body, _ := json.Marshal(req)
	var out json.RawMessage
	return out, c.json(ctx, "POST", "/v1/policy/eval", body, &out)
}

// Approvals lists the calls waiting for a person.
func (c *Client) Approvals(ctx context.Context) ([]api.Pending, error) {
	var out []api.Pending
	return out, c.json(ctx, "GET", "/v1/approvals", nil, &out)
}

// Approval returns one waiting call, all of it (a list shortens inputs).
func (c *Client) Approval(ctx context.Context, id string) (api.Pending, error) {
	var out api.Pending
	return out, c.json(ctx, "GET", "/v1/approvals/"+url.PathEscape(id), nil, &out)
}

// Labels returns an agent's session labels.
func (c *Client) Labels(ctx context.Context, agent string) (*api.Labels, error) {
	var out api.Labels
	return &out, c.json(ctx, "GET", "/v1/agents/"+url.PathEscape(agent)+"/labels", nil, &out)
}

// ClearLabels takes every session label from an agent, with a reason.
func (c *Client) ClearLabels(ctx context.Context, agent, reason string) (*api.Labels, error) {
	body, _ := json.Marshal(api.Labels{Reason: reason})
	var out api.Labels
	return &out, c.json(ctx, "POST", "/v1/agents/"+url.PathEscape(agent)+"/labels/clear", body, &out)
}

// Answer approves or denies a waiting call.
func (c *Client) Answer(ctx context.Context, id string, a api.ApprovalAnswer) error {
	body, err := json.Marshal(a)
	if err != nil {
		return err
	}
	var ok struct{}
	return c.json(ctx, "POST", "/v1/approvals/"+url.PathEscape(id), body, &ok)
}

// Observe streams a stream-json transcript (NDJSON) to be recorded as the
// agent's observed entries (toolgate ingest).
func (c *Client) Observe(ctx context.Context, agent string, transcript io.Reader) (*api.Observed, error) {
	req, err := c.request("POST", "/v1/agents/"+url.PathEscape(agent)+"/observations", api.MediaNDJSON, nil)
	if err != nil {
		return nil, err
	}
	req.body, req.size = transcript, -1
	var ans api.Observed
	return &ans, c.decode(ctx, req, &ans, false)
}

// Session runs toolgate's own agent loop for agent (the body is an
// agentloop.StartRequest) and calls fn with each event, a JSON object, as
// it arrives. Cancelling ctx stops the run; the daemon saves the session.
func (c *Client) Session(ctx context.Context, agent string, start any, fn func(json.RawMessage) error) error {
	body, err := json.Marshal(start)
	if err != nil {
		return err
	}
	req, err := c.request("POST", "/v1/agents/"+url.PathEscape(agent)+"/sessions", "application/json", body)
	if err != nil {
		return err
	}
	if err := req.set("Accept", api.MediaNDJSON); err != nil {
		return err
	}
	resp, err := c.do(ctx, req)
	if err != nil {
		return err
	}
	defer resp.body.Close()
	dec := json.NewDecoder(resp.body)
	for {
		var ev json.RawMessage
		if err := dec.Decode(&ev); err == io.EOF {
			return nil
		} else if err != nil {
			return err
		}
		if err := fn(ev); err != nil {
			return err
		}
	}
}

// json sends body (none when nil) and decodes the JSON answer into out.
func (c *Client) json(ctx context.Context, method, path string, body []byte, out any) error {
	req, err := c.request(method, path, "application/json", body)
	if err != nil {
		return err
	}
	return c.decode(ctx, req, out, false)
}

// decode sends req and decodes the JSON answer into out; exact keeps the
// numbers of a tool's result as they were written.
func (c *Client) decode(ctx context.Context, req *request, out any, exact bool) error {
	resp, err := c.do(ctx, req)
	if err != nil {
		return err
	}
	defer resp.body.Close()
	dec := json.NewDecoder(resp.body)
	if exact {
		dec.UseNumber()
	}
	if err := dec.Decode(out); err != nil {
		return fmt.Errorf("bad response from daemon: %w", err)
	}
	return nil
}

// request is a request to the daemon carrying the token and session.
func (c *Client) request(method, path, contentType string, body []byte) (*request, error) {
	req := &request{method: method, path: path, body: bytes.NewReader(body), size: int64(len(body))}
	if err := req.set("Authorization", "Bearer "+c.token); err != nil {
		return nil, errors.New("the admin token holds a control character")
	}
	if c.session != "" {
		if err := req.set(proto.HeaderSession, c.session); err != nil {
			return nil, err
		}
	}
	if c.budget != "" {
		if err := req.set(proto.HeaderBudget, c.budget); err != nil {
			return nil, err
		}
	}
	return req, req.set("Content-Type", contentType)
}

// do sends req on a new connection and returns a 200 answer; any other
// status is the daemon's error.
func (c *Client) do(ctx context.Context, req *request) (*response, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, c.network, c.addr)
	if err != nil {
		var op *net.OpError
		if errors.As(err, &op) && op.Op == "dial" {
			return nil, ErrDaemonDown
		}
		return nil, err
	}
	proto.GrowSendBuffer(conn) // a write's content
	resp, err := send(ctx, conn, c.host, req)
	if err != nil {
		return nil, err
	}
	if resp.status != 200 {
		defer resp.body.Close()
		return nil, readError(resp)
	}
	return resp, nil
}

func readError(resp *response) error {
	var body struct {
		Error *api.Error `json:"error"`
	}
	b, _ := io.ReadAll(io.LimitReader(resp.body, 1<<20))
	if json.Unmarshal(b, &body) == nil && body.Error != nil {
		return body.Error
	}
	return fmt.Errorf("daemon answered %s: %s", resp.statusText(), bytes.TrimSpace(b))
}

// Sandboxes lists every toolgate sandbox the gateway's backend holds.
func (c *Client) Sandboxes(ctx context.Context) ([]api.Sandbox, error) {
	var out []api.Sandbox
	return out, c.json(ctx, "GET", "/v1/sandboxes", nil, &out)
}

// SandboxAct stops (action stop) or removes (rm) an agent's sandbox.
func (c *Client) SandboxAct(ctx context.Context, agent, action string, a api.SandboxAction) (api.SandboxActed, error) {
	body, _ := json.Marshal(a)
	var out api.SandboxActed
	return out, c.json(ctx, "POST", "/v1/agents/"+url.PathEscape(agent)+"/sandbox/"+url.PathEscape(action), body, &out)
}

// PruneSandboxes removes the sandboxes nothing uses.
func (c *Client) PruneSandboxes(ctx context.Context, a api.SandboxAction) (api.SandboxActed, error) {
	body, _ := json.Marshal(a)
	var out api.SandboxActed
	return out, c.json(ctx, "POST", "/v1/sandboxes/prune", body, &out)
}
