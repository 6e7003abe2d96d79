package adminapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"github.com/toolgate/toolgate/internal/gateway"
	"github.com/toolgate/toolgate/internal/proto"
	"github.com/toolgate/toolgate/internal/wire"
)

// SocketName is the admin socket inside the toolgate home.
const SocketName = "admin.sock"

// TokenFile holds the admin token the CLI presents (0600).
const TokenFile = "admin.token"

// ErrDaemonDown means nothing answers on the admin socket.
var ErrDaemonDown = errors.New("the toolgate daemon is not running (start it with `toolgate serve`)")

// Client talks to a running daemon.
type Client struct {
	http    *http.Client
	base    string
	token   string
	session string // sent with every call: the calls of one run
}

// WithSession returns a client whose calls carry session (toolgate run
// starts one; everything its process tree does is recorded under it).
func (c *Client) WithSession(session string) *Client {
	cc := *c
	cc.session = session
	return &cc
}

// Dial returns a client for the daemon of a toolgate home, over its Unix socket.
func Dial(home string) (*Client, error) {
	tok, err := os.ReadFile(filepath.Join(home, TokenFile))
	if err != nil {
		return nil, fmt.Errorf("reading the admin token: %w (run `toolgate init`)", err)
	}
	sock := filepath.Join(home, SocketName)
	tr := &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", sock)
	}}
	return &Client{http: &http.Client{Transport: tr}, base: "http://toolgate", token: strings.TrimSpace(string(tok))}, nil
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
	return &Client{http: &http.Client{}, base: "http://" + addr, token: strings.TrimSpace(string(tok))}, nil
}

// Call runs a tool for an agent. With stdout/stderr set, output streams as
// the tool produces it; otherwise the result carries it.
func (c *Client) Call(ctx context.Context, agent, tool string, args any, stdout, stderr io.Writer) (*gateway.Result, error) {
	req, err := c.callRequest(ctx, agent, tool, args)
	if err != nil {
		return nil, err
	}
	if stdout != nil {
		req.Header.Set("Accept", wire.MediaNDJSON)
	}
	return c.result(req, stdout, stderr)
}

// callRequest is the request of a tool call with args as its JSON body.
func (c *Client) callRequest(ctx context.Context, agent, tool string, args any) (*http.Request, error) {
	body, err := json.Marshal(args)
	if err != nil {
		return nil, err
	}
	return c.request(ctx, http.MethodPost, callPath(agent, tool), body)
}

// CallRaw runs a tool whose input is body, sent as bytes (size of them;
// -1: unknown) with the arguments in a header: a write's content streams
// from the caller's file to the sandbox without being held or encoded.
func (c *Client) CallRaw(ctx context.Context, agent, tool string, args any, body io.Reader, size int64) (*gateway.Result, error) {
	a, err := json.Marshal(args)
	if err != nil {
		return nil, err
	}
	req, err := c.request(ctx, http.MethodPost, callPath(agent, tool), nil)
	if err != nil {
		return nil, err
	}
	req.Body, req.ContentLength = io.NopCloser(body), size
	req.GetBody = nil
	req.Header.Set("Content-Type", MediaRaw)
	req.Header.Set(ArgsHeader, string(a))
	return c.result(req, nil, nil)
}

// CallRawOut runs a tool whose output is bytes (a read with encoding raw)
// and copies them to w as they come; the outcome follows them.
func (c *Client) CallRawOut(ctx context.Context, agent, tool string, args any, w io.Writer) (*gateway.Result, error) {
	req, err := c.callRequest(ctx, agent, tool, args)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", MediaRaw)
	resp, err := c.do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, readError(resp)
	}
	if resp.Header.Get("Content-Type") != MediaRaw {
		return nil, fmt.Errorf("bad response from daemon: %s where bytes were asked for", resp.Header.Get("Content-Type"))
	}
	if _, err := io.Copy(w, resp.Body); err != nil {
		return nil, err
	}
	var outcome struct {
		Result *gateway.Result `json:"result"`
		Error  *wire.Error     `json:"error"`
	}
	dec := json.NewDecoder(strings.NewReader(resp.Trailer.Get(ResultTrailer)))
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

func (c *Client) result(req *http.Request, stdout, stderr io.Writer) (*gateway.Result, error) {
	resp, err := c.do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, readError(resp)
	}
	if resp.Header.Get("Content-Type") == wire.MediaNDJSON {
		return wire.ReadFrames(resp.Body, stdout, stderr)
	}
	var res gateway.Result
	dec := json.NewDecoder(resp.Body)
	dec.UseNumber() // a byte count or exit code prints as the integer it is, not 1.048576e+06
	if err := dec.Decode(&res); err != nil {
		return nil, fmt.Errorf("bad response from daemon: %w", err)
	}
	return &res, nil
}

// Agents lists the agents and their sandboxes.
func (c *Client) Agents(ctx context.Context) ([]AgentStatus, error) {
	var rows []AgentStatus
	return rows, c.getJSON(ctx, http.MethodGet, "/v1/agents", nil, &rows)
}

// Eval asks the daemon's live policy for a dry-run decision.
func (c *Client) Eval(ctx context.Context, req EvalRequest) (json.RawMessage, error) {
	body, _ := json.Marshal(req)
	var out json.RawMessage
	return out, c.getJSON(ctx, http.MethodPost, "/v1/policy/eval", body, &out)
}

func (c *Client) getJSON(ctx context.Context, method, path string, body []byte, out any) error {
	req, err := c.request(ctx, method, path, body)
	if err != nil {
		return err
	}
	resp, err := c.do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return readError(resp)
	}
	return json.NewDecoder(resp.Body).Decode(out)
}

func (c *Client) request(ctx context.Context, method, path string, body []byte) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	if c.session != "" {
		req.Header.Set(proto.HeaderSession, c.session)
	}
	req.Header.Set("Content-Type", "application/json")
	return req, nil
}

func (c *Client) do(req *http.Request) (*http.Response, error) {
	resp, err := c.http.Do(req)
	if err != nil {
		var op *net.OpError
		if errors.As(err, &op) && op.Op == "dial" {
			return nil, ErrDaemonDown
		}
		return nil, err
	}
	return resp, nil
}

func readError(resp *http.Response) error {
	var body struct {
		Error *wire.Error `json:"error"`
	}
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if json.Unmarshal(b, &body) == nil && body.Error != nil {
		return body.Error
	}
	return fmt.Errorf("daemon answered %s: %s", resp.Status, bytes.TrimSpace(b))
}

// Session runs toolgate's own agent loop for agent (the body is an
// agentloop.StartRequest) and calls fn with each event, a JSON object, as
// it arrives. Cancelling ctx stops the run; the daemon saves the session.
func (c *Client) Session(ctx context.Context, agent string, start any, fn func(json.RawMessage) error) error {
	body, err := json.Marshal(start)
	if err != nil {
		return err
	}
	req, err := c.request(ctx, http.MethodPost, "/v1/agents/"+url.PathEscape(agent)+"/sessions", body)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", wire.MediaNDJSON)
	resp, err := c.do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return readError(resp)
	}
	dec := json.NewDecoder(resp.Body)
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
