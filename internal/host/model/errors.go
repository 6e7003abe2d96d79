package model

import (
	"encoding/json"
	"net/http"
)

// ErrorBody is an error answer in the provider's own shape, so the agent's
// client shows the message as it would the provider's.
func ErrorBody(api API, status int, message string) []byte {
	var v any
	switch api {
	case Anthropic:
		v = map[string]any{"type": "error", "error": map[string]string{"type": anthropicType(status), "message": message}}
	default:
		v = map[string]any{"error": map[string]any{"message": message, "type": openaiType(status), "code": openaiCode(status)}}
	}
	b, _ := json.Marshal(v)
	return b
}

// StreamError is the SSE event that tells a client its stream failed part
// way, in the shape its API uses for a stream error.
func StreamError(e Endpoint, message string) []byte {
	var ev string
	switch e {
	case Messages:
		b, _ := json.Marshal(map[string]any{"type": "error", "error": map[string]string{"type": "api_error", "message": message}})
		ev = "event: error\ndata: " + string(b)
	case Responses:
		b, _ := json.Marshal(map[string]any{"type": "error", "code": "server_error", "message": message})
		ev = "event: error\ndata: " + string(b)
	default:
		b, _ := json.Marshal(map[string]any{"error": map[string]any{"message": message, "type": "server_error"}})
		ev = "data: " + string(b)
	}
	return []byte(ev + "\n\n")
}

func anthropicType(status int) string {
	switch status {
	case http.StatusBadRequest:
		return "invalid_request_error"
	case http.StatusUnauthorized:
		return "authentication_error"
	case http.StatusForbidden:
		return "permission_error"
	case http.StatusNotFound:
		return "not_found_error"
	case http.StatusRequestEntityTooLarge:
		return "request_too_large"
	case http.StatusTooManyRequests:
		return "rate_limit_error"
	case http.StatusServiceUnavailable, 529:
		return "overloaded_error"
	}
	return "api_error"
}

func openaiType(status int) string {
	switch {
	case status == http.StatusTooManyRequests:
		return "requests"
	case status == http.StatusForbidden:
		return "permission_error"
	case status >= 500:
		return "server_error"
	}
	return "invalid_request_error"
}

func openaiCode(status int) string {
	switch status {
	case http.StatusForbidden:
		return "denied_by_toolgate"
	case http.StatusTooManyRequests:
		return "rate_limit_exceeded"
	case http.StatusRequestEntityTooLarge:
		return "request_too_large"
	case http.StatusNotFound:
		return "not_found"
	}
	return "toolgate_error"
}
