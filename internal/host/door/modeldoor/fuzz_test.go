package modeldoor

import (
	"net/http"
	"slices"
	"testing"
)

// Whatever headers and query a sandbox sends, only the allowlisted headers
// pass, the provider's pinned ones win over the sandbox's, every beta
// recorded is a name, and a query the door forwards is short and parses.
func FuzzRequestHeader(f *testing.F) {
	f.Add("Anthropic-Beta", "mcp-client-2025-04-04, fine-grained-tool-streaming-2025-05-14", "2023-06-01", "OpenAI-Organization", "org-agent", "beta=true")
	f.Add("openai-beta", "responses=v1", "latest", "Authorization", "Bearer x", "a=%zz")
	f.Add("X-Api-Key", ",,", "", "openai-project", "p", "")
	pinned := map[string]string{"OpenAI-Organization": "org-host"}
	f.Fuzz(func(t *testing.T, key, value, version, key2, value2, query string) {
		in := http.Header{}
		in.Add(key, value)
		in.Add(key2, value2)
		in.Add("Anthropic-Version", version)
		out, betas, err := requestHeader(in, pinned)
		if checkQuery(query) == nil && len(query) > maxQuery {
			t.Fatalf("a query of %d bytes passed", len(query))
		}
		if err != nil {
			return
		}
		for k := range out {
			if !slices.Contains(passRequest, k) && k != "Openai-Organization" {
				t.Fatalf("%s passed: %v", k, out)
			}
		}
		if got := out.Values("OpenAI-Organization"); len(got) != 1 || got[0] != "org-host" {
			t.Fatalf("organization %q", got)
		}
		if len(betas) > maxBetas {
			t.Fatalf("%d betas", len(betas))
		}
		for _, b := range betas {
			if !betaValue.MatchString(b) {
				t.Fatalf("beta %q", b)
			}
		}
	})
}
