package config

import (
	"fmt"
	"net/http"
	"net/url"
	"path"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/toolgate/toolgate/internal/host/model"
	"github.com/toolgate/toolgate/internal/host/netrule"
)

// Model door defaults.
const (
	DefaultModelKind    = "http"
	DefaultModelTimeout = 10 * time.Minute
	DefaultModelMaxBody = 32 << 20
)

// models checks gateway.models and fills their defaults.
func (d *decoder) models(c *Config) {
	for _, name := range sortedKeys(c.Gateway.Models) {
		p, path := c.Gateway.Models[name], join("gateway.models", name)
		if !agentName().MatchString(name) {
			d.errorf(d.at(path), path, "provider names are 1-63 lowercase letters, digits, _ or -, starting with a letter or digit")
		}
		if !model.API(p.API).Valid() {
			d.errorf(d.at(path+".api"), path+".api", "%q: want anthropic or openai", p.API)
		}
		p.Kind = or(p.Kind, DefaultModelKind)
		if p.Kind == DefaultModelKind {
			if err := checkModelURL(p.URL); err != nil {
				d.errorf(d.at(path+".url"), path+".url", "%v", err)
			}
		}
		if p.Private != "" && p.Private != "allow" && p.Private != "deny" {
			d.errorf(d.at(path+".private"), path+".private", "%q is neither allow nor deny", p.Private)
		}
		p.Private = or(p.Private, "deny")
		d.positive(path+".timeout", int64(p.Timeout))
		p.Timeout = or(p.Timeout, DefaultModelTimeout)
		for _, m := range sortedKeys(p.Prices) {
			pr, pp := p.Prices[m], join(path+".prices", m)
			if _, err := pathMatch(m); err != nil {
				d.errorf(d.at(pp), pp, "%v", err)
			}
			if pr.Input < 0 || pr.Output < 0 || pr.CacheRead < 0 || pr.CacheWrite < 0 {
				d.errorf(d.at(pp), pp, "prices must not be negative")
			}
		}
		d.pinnedHeaders(path+".headers", p.Headers)
		c.Gateway.Models[name] = p
	}
}

// pinnedHeaders checks a provider's headers: names a client could send,
// and none the door sets itself or that carries a credential.
func (d *decoder) pinnedHeaders(p string, h map[string]string) {
	for _, k := range sortedKeys(h) {
		kp := join(p, k)
		switch ck := http.CanonicalHeaderKey(k); {
		case !headerName.MatchString(k):
			d.errorf(d.at(kp), kp, "%q is not a header name", k)
		case unpinnable[ck] || strings.HasPrefix(ck, "Toolgate-"):
			d.errorf(d.at(kp), kp, "%s is set by the door itself (credentials come from secret)", ck)
		case h[k] == "" || strings.ContainsAny(h[k], "\r\n\x00"):
			d.errorf(d.at(kp), kp, "the value is empty or holds a line break")
		}
	}
}

var unpinnable = map[string]bool{
	"Authorization": true, "X-Api-Key": true, "Api-Key": true, "Proxy-Authorization": true, "Cookie": true,
	"Host": true, "Content-Length": true, "Content-Type": true, "Connection": true, "Transfer-Encoding": true,
	"Te": true, "Trailer": true, "Upgrade": true, "Keep-Alive": true, "Accept-Encoding": true,
}

// headerName is an HTTP token (RFC 9110).
var headerName = regexp.MustCompile("^[A-Za-z0-9!#$%&'*+.^_`|~-]+$")

// serverToolKind is how a kind is written: model.KindOf's names.
var serverToolKind = regexp.MustCompile(`^[a-z][a-z0-9_]{0,63}$`)

// checkModelURL accepts an http(s) base URL with a host and nothing that
// would carry a credential or change per request.
func checkModelURL(s string) error {
	u, err := url.Parse(s)
	switch {
	case s == "":
		return fmt.Errorf("required for kind http (e.g. https://api.anthropic.com)")
	case err != nil:
		return fmt.Errorf("%q is not a URL", s)
	case u.Scheme != "http" && u.Scheme != "https":
		return fmt.Errorf("%q: want an http or https URL", s)
	case u.Host == "" || u.Hostname() == "":
		return fmt.Errorf("%q has no host", s)
	case u.User != nil:
		return fmt.Errorf("the URL carries credentials; put the key in a secret and name it in secret")
	case u.RawQuery != "" || u.Fragment != "":
		return fmt.Errorf("%q: a base URL has no query or fragment", s)
	}
	return nil
}

// pathMatch checks a model name pattern.
func pathMatch(pat string) (bool, error) {
	if _, err := path.Match(pat, ""); err != nil {
		return false, fmt.Errorf("%q is not a valid pattern", pat)
	}
	return true, nil
}

// agentModel checks an agent's (or the defaults') model section as written.
func (d *decoder) agentModel(p string, m *AgentModel, providers map[string]ModelProvider) {
	if m == nil {
		return
	}
	for i, name := range m.Providers {
		ip := fmt.Sprintf("%s.providers[%d]", p, i)
		if _, ok := providers[name]; !ok {
			d.errorf(d.at(ip), ip, "provider %q is not declared under gateway.models", name)
		} else if slices.Index(m.Providers, name) != i {
			d.errorf(d.at(ip), ip, "%q is listed twice", name)
		}
	}
	for i, pat := range m.Allow {
		if _, err := pathMatch(pat); err != nil {
			ip := fmt.Sprintf("%s.allow[%d]", p, i)
			d.errorf(d.at(ip), ip, "%v", err)
		}
	}
	for i, k := range m.ServerTools {
		ip := fmt.Sprintf("%s.serverTools[%d]", p, i)
		if !serverToolKind.MatchString(k) {
			d.errorf(d.at(ip), ip, "%q is not a server tool kind (web_search, web_fetch, code_execution, mcp …)", k)
		} else if slices.Index(m.ServerTools, k) != i {
			d.errorf(d.at(ip), ip, "%q is listed twice", k)
		}
	}
	for i, s := range m.Connectors {
		if _, err := netrule.ParseRule(s); err != nil {
			ip := fmt.Sprintf("%s.connectors[%d]", p, i)
			d.errorf(d.at(ip), ip, "%v", err)
		}
	}
	d.positive(p+".maxBody", m.MaxBody)
	b, bp := m.Budget, p+".budget"
	for _, f := range []struct {
		name string
		neg  bool
	}{
		{"requestsPerMinute", b.RequestsPerMinute < 0}, {"tokensPerHour", b.TokensPerHour < 0}, {"tokensPerDay", b.TokensPerDay < 0},
		{"costPerHour", b.CostPerHour < 0}, {"costPerDay", b.CostPerDay < 0},
	} {
		if f.neg {
			d.errorf(d.at(bp+"."+f.name), bp+"."+f.name, "must not be negative (0 or unset: no limit)")
		}
	}
}

// mergeModel gives an agent without a model section the defaults' whole,
// and fills the built-in limits.
func mergeModel(a, def *Agent) {
	if a.Model == nil && def.Model != nil {
		m := *def.Model
		m.Providers, m.Allow = slices.Clone(def.Model.Providers), slices.Clone(def.Model.Allow)
		m.ServerTools, m.Connectors = slices.Clone(def.Model.ServerTools), slices.Clone(def.Model.Connectors)
		a.Model = &m
	}
	if a.Model != nil {
		a.Model.MaxBody = or(a.Model.MaxBody, DefaultModelMaxBody)
	}
}
