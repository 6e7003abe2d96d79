// Package model holds the wire shapes of the model APIs the model door
// forwards: which endpoints exist per API, the facts policy sees in a
// request (model, max_tokens, tools offered, and the server tools and MCP
// connectors a provider would run for the agent), read with keys matched
// exactly as the providers match them, what a response reports (usage,
// stop reason, tool_use ids) whether streamed (SSE) or not, the price
// table, budgets and the estimate charged when usage never arrives, and
// error bodies in each provider's own shape so the agent's client shows a
// denial as the provider would.
//
// It parses input from sandboxes and upstreams and depends on nothing of
// toolgate's: every parser here has a fuzz target.
package model

import "strings"

// API is a provider's wire shape.
type API string

const (
	Anthropic API = "anthropic" // Anthropic Messages
	OpenAI    API = "openai"    // OpenAI-compatible: chat completions and Responses
)

// Valid reports whether a is a known API.
func (a API) Valid() bool { return a == Anthropic || a == OpenAI }

// Endpoint is one model API operation the door forwards.
type Endpoint string

const (
	Messages        Endpoint = "messages"         // POST /v1/messages (Anthropic)
	CountTokens     Endpoint = "count_tokens"     // POST /v1/messages/count_tokens (Anthropic)
	ChatCompletions Endpoint = "chat_completions" // POST /v1/chat/completions (OpenAI)
	Responses       Endpoint = "responses"        // POST /v1/responses (OpenAI)
)

// EndpointOf maps a request to the endpoint it calls, for an API. Paths are
// as the provider's base URL ends them: "/v1/messages". Only POST is served:
// every operation the door forwards creates something the budget counts.
func EndpointOf(api API, method, path string) (Endpoint, bool) {
	if method != "POST" {
		return "", false
	}
	path = strings.TrimSuffix(path, "/")
	switch api {
	case Anthropic:
		switch path {
		case "/v1/messages":
			return Messages, true
		case "/v1/messages/count_tokens":
			return CountTokens, true
		}
	case OpenAI:
		switch path {
		case "/v1/chat/completions":
			return ChatCompletions, true
		case "/v1/responses":
			return Responses, true
		}
	}
	return "", false
}

// Generates reports whether calls to e produce tokens (and cost); a token
// count does not.
func (e Endpoint) Generates() bool { return e != CountTokens }
