package modeldoor

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/toolgate/toolgate/internal/host/config"
	"github.com/toolgate/toolgate/internal/host/gateway"
	"github.com/toolgate/toolgate/internal/host/model"
	"github.com/toolgate/toolgate/internal/host/secrets"
)

// maxJSONAnswer bounds how much of a non-streamed answer is kept to read
// its usage; the client gets all of it regardless.
const maxJSONAnswer = 16 << 20

// Secrets resolves a host secret for an (agent, tool) pair; *secrets.Store
// implements it.
type Secrets interface {
	Resolve(agent, tool, name string) (string, error)
}

var _ Secrets = (*secrets.Store)(nil)

// provider is one configured provider as the tool runs it.
type provider struct {
	name    string
	cfg     config.ModelProvider
	api     model.API
	prices  model.Prices
	backend Backend
}

// Tool is the gateway tool behind every model call (Snapshot.ByKind[model]).
// A call's Tool is the provider's name. Prepare reads the request's facts
// and what the agent has spent, which policy decides on; Run forwards the
// request with the host's credential and records what the answer reports.
type Tool struct {
	providers map[string]*provider
	agents    map[string]*config.AgentModel
	meter     *Meter
	secrets   Secrets
	now       func() time.Time
	// How long, and how many more bytes, an answer is read for its usage
	// after the client went away.
	drainTime  time.Duration
	drainBytes int64
}

// Bounds on reading an answer nobody takes any more: long enough for most
// answers to end and report what they cost, short enough that a client
// hanging up cannot hold the door's connections for long.
const (
	drainAfterClient      = 2 * time.Minute
	drainBytesAfterClient = 16 << 20
)

// NewTool builds the model tool of a configuration. The meter outlives it
// (a reload builds a new tool on the same meter).
func NewTool(cfg *config.Config, sec Secrets, meter *Meter, env Env) (*Tool, error) {
	t := &Tool{providers: map[string]*provider{}, agents: map[string]*config.AgentModel{}, meter: meter, secrets: sec, now: time.Now,
		drainTime: drainAfterClient, drainBytes: drainBytesAfterClient}
	var errs []error
	for name, p := range cfg.Gateway.Models {
		f, ok := factory(p.Kind)
		if !ok {
			errs = append(errs, fmt.Errorf("gateway.models.%s.kind: %q is not a provider kind (known: %s)", name, p.Kind, strings.Join(Kinds(), ", ")))
			continue
		}
		b, err := f(name, p, env)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		t.providers[name] = &provider{name: name, cfg: p, api: model.API(p.API), prices: model.Prices(p.Prices), backend: b}
	}
	for name, a := range cfg.Agents {
		if a.Model != nil {
			t.agents[name] = a.Model
		}
	}
	return t, errors.Join(errs...)
}

func (t *Tool) Name() string       { return "model" }
func (t *Tool) Kind() gateway.Kind { return gateway.KindModel }

// MaxBody is the request body limit of an agent; false when it has no
// model section.
func (t *Tool) MaxBody(agent string) (int64, bool) {
	a, ok := t.agents[agent]
	if !ok {
		return 0, false
	}
	return a.MaxBody, true
}

// API is the wire shape of a provider, for shaping errors.
func (t *Tool) API(provider string) (model.API, bool) {
	p, ok := t.providers[provider]
	if !ok {
		return "", false
	}
	return p.api, true
}

// Args are a model call's arguments as recorded and as CEL rules see them
// (args.model, args.max_tokens, args.tools, args.server_tools …): the
// facts, never the prompt.
type Args struct {
	Provider  string   `json:"provider"`
	Endpoint  string   `json:"endpoint"`
	Model     string   `json:"model,omitempty"`
	MaxTokens int64    `json:"max_tokens,omitempty"`
	Stream    bool     `json:"stream,omitempty"`
	Tools     []string `json:"tools,omitempty"`
	// ServerTools and Betas are always listed, so a rule can read them
	// without has(): args.server_tools.exists(t, t.kind == "web_fetch").
	ServerTools []model.ServerTool `json:"server_tools"`
	Betas       []string           `json:"betas"`           // anthropic-beta / OpenAI-Beta values, as forwarded
	Query       string             `json:"query,omitempty"` // the query string, as forwarded
	BodyBytes   int                `json:"bodyBytes"`
}

// exchange is one request in flight, as the entry point received it. The
// entry point puts it in Call.Prepared; the answer goes to the call's
// output (RunEnv.IO), a sink, as every tool's output goes to its caller.
type exchange struct {
	method, path string
	query        string // raw, passed on as sent
	header       http.Header
	body         []byte

	api      model.API
	endpoint model.Endpoint
	facts    model.Facts
}

// sink is where an answer goes: an HTTP response, or an in-process reader.
type sink interface {
	// Write sends body bytes at once (flushed); an error means the client is gone.
	io.Writer
	// start sends the status and headers; once, before any body.
	start(status int, h http.Header)
	started() bool
	// header holds headers the door adds to its own answers.
	header() http.Header
}

// Prepare reads the request's facts into the call's arguments and
// Call.Model, with what the agent has spent, so policy decides on
// recorded facts only.
func (t *Tool) Prepare(call *gateway.Call, _ gateway.AgentInfo) error {
	ex, ok := call.Prepared.(*exchange)
	if !ok {
		return t.prepareRecorded(call)
	}
	args := Args{Provider: call.Tool, BodyBytes: len(ex.body), ServerTools: []model.ServerTool{}, Betas: []string{}}
	defer func() { call.Args, _ = json.Marshal(args) }()
	p, ok := t.providers[call.Tool]
	if !ok {
		return fmt.Errorf("model: no provider %q is configured", call.Tool)
	}
	ep, ok := model.EndpointOf(p.api, ex.method, ex.path)
	if !ok {
		return fmt.Errorf("model: %s %s is not a %s endpoint the door forwards", ex.method, ex.path, p.api)
	}
	args.Endpoint = string(ep)
	if err := checkQuery(ex.query); err != nil {
		return err
	}
	args.Query = ex.query
	header, betas, err := requestHeader(ex.header, p.cfg.Headers)
	if err != nil {
		return err
	}
	ex.header, args.Betas = header, append(args.Betas, betas...)
	facts, err := model.ParseRequest(ep, ex.body)
	if err != nil {
		return err
	}
	args.Model, args.MaxTokens, args.Stream, args.Tools = facts.Model, facts.MaxTokens, facts.Stream, facts.Tools
	args.ServerTools = append(args.ServerTools, facts.ServerTools...)
	if ex.body, err = model.WithStreamUsage(ep, ex.body, facts); err != nil {
		return err
	}
	ex.api, ex.endpoint, ex.facts = p.api, ep, facts
	spent := t.meter.Spent(call.Agent, t.now())
	call.Model = &gateway.ModelFacts{Name: facts.Model, API: string(p.api), Spent: &spent}
	if ep.Generates() {
		// The most it can use, held against a task's budget while it runs.
		u := model.Estimate(facts, len(ex.body), model.Usage{})
		call.Model.Reserve.Tokens = u.Total()
		if price, ok := p.prices.Lookup(facts.Model); ok {
			call.Model.Reserve.Cost = price.Cost(u)
		}
	}
	return nil
}

// HeldInput implements gateway.InputHolder: the request body as it will be
// sent, which a person asked about the call sees and an approval binds.
func (t *Tool) HeldInput(call *gateway.Call) []byte {
	if ex, ok := call.Prepared.(*exchange); ok {
		return ex.body
	}
	return nil
}

// prepareRecorded prepares a call read back from the audit log (replay):
// the facts and what was spent are the recorded ones, never measured anew.
// Such a call has no request to run: Run refuses it.
func (t *Tool) prepareRecorded(call *gateway.Call) error {
	var a Args
	if err := json.Unmarshal(call.Args, &a); err != nil || a.Endpoint == "" {
		return errors.New("model: the call carries no request")
	}
	if _, ok := t.providers[call.Tool]; !ok {
		return fmt.Errorf("model: no provider %q is configured", call.Tool)
	}
	f := &gateway.ModelFacts{Name: a.Model}
	if name, ok := call.Detail["model"].(string); ok {
		f.Name = name
	}
	f.API, _ = call.Detail["api"].(string)
	if spent, ok := model.SpentOf(call.Detail["spent"]); ok {
		f.Spent = &spent
	}
	call.Model = f
	return nil
}

// Run forwards an allowed call and passes the answer on as it arrives.
// The result entry's detail gets the status, usage, stop reason, tool_use
// ids, cost and timings; a failure on either side is its error.
//
// The upstream request does not end with the client's: a provider bills an
// answer whether anyone reads it or not, so when the client goes away the
// door reads on for the usage, for at most drainTime and drainBytes more.
// An answer whose usage does not arrive whole is charged an estimate
// (model.Estimate) and recorded as such (usage: estimated).
func (t *Tool) Run(ctx context.Context, call *gateway.Call, env *gateway.RunEnv) (*gateway.Result, error) {
	ex, _ := call.Prepared.(*exchange)
	p := t.providers[call.Tool]
	if ex == nil || p == nil {
		return nil, errors.New("model: the call carries no request")
	}
	var answer sink
	if env != nil && env.IO != nil {
		answer, _ = env.IO.Stdout.(sink)
	}
	if answer == nil {
		return nil, errors.New("model: the call has no answer to write to")
	}
	if ctx.Err() != nil {
		return nil, errors.New("model: the client went away before the request was sent")
	}
	d := maps.Clone(call.Detail)
	delete(d, "spent") // on the decision; the result has its own facts
	defer func() { call.Detail = d }()
	start := t.now()
	t.meter.Request(call.Agent, start)

	client := ctx
	ctx, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	defer cancel(nil)
	// No byte from the upstream for Timeout ends the call: before the
	// answer's headers and between two reads of its body.
	idle := time.AfterFunc(p.cfg.Timeout, func() {
		cancel(fmt.Errorf("model: the upstream sent nothing for %s", p.cfg.Timeout))
	})
	defer idle.Stop()
	// The client leaving (its context ends, or a write to it fails) starts
	// the clock on reading on.
	var leaving sync.Once
	left := func() {
		leaving.Do(func() {
			drain := time.AfterFunc(t.drainTime, func() {
				cancel(fmt.Errorf("model: the answer did not end within %s of the client leaving", t.drainTime))
			})
			context.AfterFunc(ctx, func() { drain.Stop() })
		})
	}
	defer context.AfterFunc(client, left)()
	var sent atomic.Bool // the whole request reached the upstream: from here on it may bill
	ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
		GotConn:      func(ci httptrace.GotConnInfo) { d["remote"] = ci.Conn.RemoteAddr().String() },
		WroteRequest: func(w httptrace.WroteRequestInfo) { sent.Store(w.Err == nil) },
	})

	req, err := http.NewRequestWithContext(ctx, ex.method, ex.path, bytes.NewReader(ex.body))
	if err != nil {
		return nil, err
	}
	req.URL.RawQuery = ex.query
	req.ContentLength = int64(len(ex.body))
	req.Header = ex.header.Clone()
	if p.cfg.Secret != "" {
		key, err := t.secrets.Resolve(call.Agent, p.name, p.cfg.Secret)
		if err != nil {
			return nil, fmt.Errorf("model: provider %s: %w", p.name, err)
		}
		setKey(req.Header, p.api, key)
	}
	resp, err := p.backend.Do(req)
	if err != nil {
		if c := context.Cause(ctx); c != nil && ctx.Err() != nil {
			err = c
		}
		if sent.Load() {
			t.record(d, call, p, ex, model.Outcome{}, false, 0)
		}
		return nil, fmt.Errorf("model: provider %s: %w", p.name, err)
	}
	defer resp.Body.Close()
	idle.Reset(p.cfg.Timeout)
	d["status"] = resp.StatusCode
	if s, ok := retryAfter(resp.Header); ok {
		d["retryAfter"] = s
	}
	answer.start(resp.StatusCode, answerHeader(resp.Header))
	d["ttfbMs"] = ms(t.now().Sub(start))

	sse := strings.HasPrefix(strings.ToLower(resp.Header.Get("Content-Type")), "text/event-stream")
	var stream *model.Stream
	var whole bytes.Buffer
	if sse {
		stream = model.NewStream(ex.endpoint)
	}
	var n, drained int64
	var upErr, gone error // gone: why the client stopped taking the answer
	buf := make([]byte, 32<<10)
	for {
		k, rerr := resp.Body.Read(buf)
		if k > 0 {
			idle.Reset(p.cfg.Timeout)
			n += int64(k)
			if stream != nil {
				stream.Write(buf[:k])
			} else if whole.Len() < maxJSONAnswer {
				whole.Write(buf[:min(k, maxJSONAnswer-whole.Len())])
			}
			if gone == nil && client.Err() != nil {
				gone = client.Err()
			}
			if gone == nil {
				if _, gone = answer.Write(buf[:k]); gone != nil {
					left()
				}
			} else if drained += int64(k); drained > t.drainBytes {
				upErr = fmt.Errorf("model: the answer ran on for more than %d bytes after the client left", t.drainBytes)
				break
			}
		}
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			upErr = rerr
			if c := context.Cause(ctx); c != nil && ctx.Err() != nil {
				upErr = c
			}
			break
		}
	}
	if gone == nil && client.Err() != nil {
		gone = client.Err()
	}
	d["bytes"] = n
	d["durationMs"] = ms(t.now().Sub(start))

	var out model.Outcome
	measured := false
	if stream != nil {
		stream.Close()
		out = stream.Outcome()
		measured = stream.Done() && out.HasUsage
		if upErr == nil && gone == nil && resp.StatusCode < 300 && !stream.Done() {
			upErr = errors.New("the stream ended before its final event")
		}
	} else if resp.StatusCode < 300 {
		var ok bool
		out, ok = model.ParseResponse(ex.endpoint, whole.Bytes())
		measured = ok && out.HasUsage
	}
	res := &gateway.Result{}
	t.record(d, call, p, ex, out, measured, resp.StatusCode)
	switch {
	case gone != nil:
		res.Error = "the client went away before the answer ended: " + gone.Error()
		if upErr != nil {
			res.Error += "; reading on for its usage: " + upErr.Error()
		}
	case upErr != nil:
		res.Error = "the upstream cut the answer: " + upErr.Error()
		if sse {
			// Tell the client in its API's own words; it may be gone too.
			_, _ = answer.Write(model.StreamError(ex.endpoint, "toolgate: "+res.Error))
		}
	case resp.StatusCode >= 400:
		res.Error = fmt.Sprintf("the upstream answered %d %s", resp.StatusCode, http.StatusText(resp.StatusCode))
		if m := providerMessage(whole.Bytes()); m != "" {
			res.Error += ": " + m
		}
	case out.Error != "":
		res.Error = "the upstream reported an error: " + out.Error
	}
	return res, nil
}

// record puts what the answer said in the result's detail and counts it
// against the budget: the usage the answer reported when it arrived whole
// (usage: measured), else an estimate (usage: estimated, estimatedTokens).
// status 0 is a request the upstream received but never answered.
func (t *Tool) record(d map[string]any, call *gateway.Call, p *provider, ex *exchange, out model.Outcome, measured bool, status int) {
	name := out.Model
	if name == "" {
		name = ex.facts.Model
	}
	d["model"] = name
	if out.StopReason != "" {
		d["stopReason"] = out.StopReason
	}
	if len(out.ToolUseIDs) > 0 {
		d[gateway.DetailToolUseIDs] = out.ToolUseIDs
	}
	if !ex.endpoint.Generates() || status >= 300 {
		return
	}
	u := out.Usage
	if measured {
		d["usage"] = "measured"
		d["inputTokens"], d["outputTokens"] = u.Input, u.Output
		if u.CacheRead > 0 {
			d["cacheReadTokens"] = u.CacheRead
		}
		if u.CacheWrite > 0 {
			d["cacheWriteTokens"] = u.CacheWrite
		}
	} else {
		u = model.Estimate(ex.facts, len(ex.body), u)
		d["usage"] = "estimated"
		d["estimatedTokens"] = u.Total()
	}
	cost := 0.0
	if price, ok := p.prices.Lookup(name); !ok {
		d["unpriced"] = true
	} else if cost = price.Cost(u); measured {
		d["costUSD"] = cost
	} else {
		d["estimatedCostUSD"] = cost
	}
	t.meter.Add(call.Agent, t.now(), u.Total(), cost)
	if call.Model != nil {
		call.Model.Used = &gateway.ModelUse{Tokens: u.Total(), Cost: cost}
	}
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// passRequest are the request headers the door passes from the sandbox to
// the provider: what says how to read the body and which API version or
// betas it uses. Every other header is dropped — credentials (a
// placeholder at most), billing (OpenAI-Organization, OpenAI-Project: the
// provider's headers in the configuration pin them), hop-by-hop headers,
// toolgate's own hints and whatever a client invents — and the transport
// negotiates compression itself, so usage is read from plain bytes.
var passRequest = []string{"Content-Type", "Accept", "User-Agent", "Anthropic-Version", "Anthropic-Beta", "Openai-Beta"}

const maxBetas = 32

var (
	versionValue = regexp.MustCompile(`^\d{4}-\d{2}-\d{2}$`)
	betaValue    = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._=-]{0,127}$`)
)

// requestHeader is what the door forwards of the sandbox's headers, with
// the provider's pinned ones set, and the beta values among them (each
// checked: a name, never free text the provider could read otherwise).
func requestHeader(in http.Header, pinned map[string]string) (http.Header, []string, error) {
	out := make(http.Header, len(passRequest)+len(pinned))
	var betas []string
	for _, k := range passRequest {
		vs := in.Values(k)
		if len(vs) == 0 {
			continue
		}
		switch k {
		case "Anthropic-Version":
			if len(vs) != 1 || !versionValue.MatchString(vs[0]) {
				return nil, nil, fmt.Errorf("model: anthropic-version must be one date, like 2023-06-01")
			}
		case "Anthropic-Beta", "Openai-Beta":
			for _, v := range vs {
				for b := range strings.SplitSeq(v, ",") {
					if b = strings.TrimSpace(b); !betaValue.MatchString(b) {
						return nil, nil, fmt.Errorf("model: %s holds %q, which is not a beta name", strings.ToLower(k), bound(b))
					}
					betas = append(betas, b)
				}
			}
			if len(betas) > maxBetas {
				return nil, nil, fmt.Errorf("model: more than %d beta names", maxBetas)
			}
		}
		out[k] = vs
	}
	for k, v := range pinned {
		out.Set(k, v)
	}
	return out, betas, nil
}

// maxQuery bounds the query string: the APIs the door serves take at
// most a flag there (Anthropic's SDK sends ?beta=true).
const maxQuery = 256

func checkQuery(q string) error {
	if len(q) > maxQuery {
		return fmt.Errorf("model: a query string of %d bytes; at most %d are forwarded", len(q), maxQuery)
	}
	if _, err := url.ParseQuery(q); err != nil {
		return fmt.Errorf("model: the query string is malformed")
	}
	return nil
}

var dropAnswer = map[string]bool{
	"Connection": true, "Keep-Alive": true, "Transfer-Encoding": true, "Trailer": true, "Upgrade": true,
	"Content-Length": true, "Set-Cookie": true, "Proxy-Connection": true,
}

func answerHeader(in http.Header) http.Header {
	out := make(http.Header, len(in))
	for k, v := range in {
		if !dropAnswer[http.CanonicalHeaderKey(k)] {
			out[k] = v
		}
	}
	return out
}

// setKey puts the host's credential where the provider's API reads it.
func setKey(h http.Header, api model.API, key string) {
	switch api {
	case model.Anthropic:
		h.Set("X-Api-Key", key)
	default:
		h.Set("Authorization", "Bearer "+key)
	}
}

// providerMessage is the message of a provider's error body, if it is one.
func providerMessage(body []byte) string {
	var e struct {
		Error json.RawMessage `json:"error"`
	}
	if json.Unmarshal(body, &e) != nil || len(e.Error) == 0 {
		return ""
	}
	var inner struct{ Message string }
	if json.Unmarshal(e.Error, &inner) == nil && inner.Message != "" {
		return bound(inner.Message)
	}
	var s string
	if json.Unmarshal(e.Error, &s) == nil {
		return bound(s)
	}
	return ""
}

func bound(s string) string {
	if len(s) > 300 {
		return s[:300] + "…"
	}
	return s
}
