package modeldoor_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"

	"github.com/toolgate/toolgate/internal/host/config"
	"github.com/toolgate/toolgate/internal/host/door/modeldoor"
)

// An agent loop in the gateway's process sends its model requests through
// the door: decided (provider, model allowlist, budgets, rules), recorded
// and forwarded exactly as a sandbox's, the answer streaming back.
func ExampleDoor_Send() {
	var door *modeldoor.Door // daemon.Daemon.ModelDoor()
	resp, err := door.Send(context.Background(), &modeldoor.Request{
		Agent:    "demo",
		Session:  "task-42",
		Provider: "anthropic", // a name under gateway.models
		Path:     "/v1/messages",
		Header:   http.Header{"Content-Type": {"application/json"}, "Anthropic-Version": {"2023-06-01"}},
		Body:     []byte(`{"model":"claude-sonnet-4-5","max_tokens":1024,"stream":true,"messages":[{"role":"user","content":"hi"}]}`),
	})
	if err != nil {
		return // ctx ended before any answer
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		// A refusal in the provider's error shape; Toolgate-Rule names the rule.
		fmt.Println(resp.Header.Get(modeldoor.HeaderRule))
	}
	_, _ = io.Copy(io.Discard, resp.Body) // SSE events as they arrive
}

// canned answers every request with the same message: a provider kind
// that needs no network, registered from a file of its own.
type canned struct{ text string }

func (c canned) Do(req *http.Request) (*http.Response, error) {
	body := fmt.Sprintf(`{"type":"message","role":"assistant","model":"canned","content":[{"type":"text","text":%q}],"stop_reason":"end_turn","usage":{"input_tokens":0,"output_tokens":0}}`, c.text)
	return &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"application/json"}},
		Body: io.NopCloser(strings.NewReader(body)), Request: req}, nil
}

// A provider kind registers itself; a gateway.models entry with
// `kind: canned` then uses it.
func ExampleRegister() {
	modeldoor.Register("canned", func(name string, p config.ModelProvider, _ modeldoor.Env) (modeldoor.Backend, error) {
		return canned{text: "hello from " + name}, nil
	})
	fmt.Println(slices.Contains(modeldoor.Kinds(), "canned"))
	// Output: true
}
