package proto

import (
	"net/url"
	"strings"
)

// The model door as the sandbox reaches it: the client's forwarder serves
// plain HTTP on ModelAddr (the container's loopback) and passes each request
// to ModelRoute on the agent socket, where the gateway adds the credential.
//
//	http://127.0.0.1:3129/PROVIDER/v1/messages            → POST /v1/model/PROVIDER/v1/messages
//	http://127.0.0.1:3129/~PARENT~SESSION/PROVIDER/v1/…  → the same, with the hints as headers
//
// The optional first segment carries correlation hints (the exec call id
// whose process asks, the session), as the exec's own base URLs put them:
// the forwarder is shared by every process, so the URL is what tells them
// apart. Hints are recorded, never trusted for identity.
const (
	ModelAddr          = "127.0.0.1:3129"
	ModelRoute         = "/v1/model/" // + PROVIDER/PATH on the agent socket
	ModelHeaderSession = HeaderSession
	ModelHeaderParent  = HeaderParent
	// ModelPlaceholderKey stands where a client insists on a key: it is
	// worth nothing, the gateway adds the real one on the host.
	ModelPlaceholderKey = "toolgate-placeholder"
	// SessionEnv carries a session hint to the processes of an exec.
	SessionEnv = "TOOLGATE_SESSION"
)

// ModelProvider is one model provider an agent's sandbox may call.
type ModelProvider struct {
	Name string // the provider's name in gateway.models, the URL's first segment
	API  string // anthropic or openai
}

// ModelEnvVars are the variables ModelEnv may set, so launchers of other
// agents know them: base URL and placeholder key per API shape.
var ModelEnvVars = map[string][2]string{
	"anthropic": {"ANTHROPIC_BASE_URL", "ANTHROPIC_API_KEY"},
	"openai":    {"OPENAI_BASE_URL", "OPENAI_API_KEY"},
}

// ModelBaseURL is the base URL of provider p inside the sandbox, with
// optional hints. An OpenAI base URL ends in /v1 (clients append
// /chat/completions or /responses), an Anthropic one does not.
func ModelBaseURL(p ModelProvider, parent, session string) string {
	u := "http://" + ModelAddr
	if ValidCallID(parent) || ValidCallID(session) {
		u += "/~" + hint(parent) + "~" + hint(session)
	}
	u += "/" + url.PathEscape(p.Name)
	if p.API == "openai" {
		u += "/v1"
	}
	return u
}

func hint(s string) string {
	if ValidCallID(s) {
		return s
	}
	return ""
}

// ModelEnv points the clients of each API shape at the first provider of
// that shape and gives them the placeholder key. TOOLGATE_MODEL=1 has the
// sandbox's init start the forwarder.
func ModelEnv(ps []ModelProvider, parent, session string) []string {
	if len(ps) == 0 {
		return nil
	}
	env := []string{"TOOLGATE_MODEL=1"}
	seen := map[string]bool{}
	for _, p := range ps {
		vars, ok := ModelEnvVars[p.API]
		if !ok || seen[p.API] {
			continue
		}
		seen[p.API] = true
		env = append(env, vars[0]+"="+ModelBaseURL(p, parent, session), vars[1]+"="+ModelPlaceholderKey)
	}
	return env
}

// ParseModelPath splits a path the forwarder received into its hints and
// the provider path: "/~P~S/anthropic/v1/messages" → P, S,
// "/anthropic/v1/messages". ok is false for a malformed hint segment.
func ParseModelPath(p string) (parent, session, rest string, ok bool) {
	if !strings.HasPrefix(p, "/~") {
		return "", "", p, true
	}
	seg, rest, _ := strings.Cut(p[2:], "/")
	parent, session, found := strings.Cut(seg, "~")
	if !found || (parent != "" && !ValidCallID(parent)) || (session != "" && !ValidCallID(session)) {
		return "", "", p, false
	}
	return parent, session, "/" + rest, true
}
