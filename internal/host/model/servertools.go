package model

import (
	"fmt"
	"net"
	"net/url"
	"regexp"
	"strings"
)

// ServerTool is something a request asks the provider to run itself: a
// hosted tool (Anthropic's web_search_20250305, web_fetch_20250910,
// code_execution_…; OpenAI's web_search, file_search, code_interpreter,
// image_generation …) or a connector to an MCP server (Anthropic's
// mcp_servers, OpenAI's {"type":"mcp","server_url":…}). The provider, not
// the sandbox, reaches the network for these, so an agent with no egress
// at all could send workspace data to any URL through them: they are facts
// policy decides on, not part of the prompt.
type ServerTool struct {
	// Kind is the tool's family, the same for both APIs and every dated
	// version: web_search, web_fetch, code_execution, file_search,
	// image_generation, mcp, tool_search, shell, prompt …; a type toolgate
	// does not know is its own kind, its date suffix removed.
	Kind string `json:"kind"`
	Type string `json:"type"`           // as the request names it: web_search_20250305, mcp_servers …
	Name string `json:"name,omitempty"` // the tool's, MCP server's or stored prompt's name
	// URL and Host (host:port, the URL's scheme's port when it names
	// none) are an MCP server's that the provider would connect to.
	URL  string `json:"url,omitempty"`
	Host string `json:"host,omitempty"`
	// Connector names a server the provider runs or reaches by id
	// (OpenAI's connector_id: connector_gmail …; tunnel_id), not by URL.
	Connector string `json:"connector,omitempty"`
	// Domains are the domains a web tool is limited to (allowed_domains),
	// when the request limits them.
	Domains []string `json:"domains,omitempty"`
}

const (
	maxMCPServers = 64
	maxURLLen     = 2048
	maxDomains    = 128
)

// clientKinds are the tool kinds the agent's own client runs, by API: the
// model only asks for them. Every other type is a server tool — an unknown
// one too, so a type added to an API after this list is decided, not missed.
var clientKinds = map[API]map[string]bool{
	Anthropic: {"custom": true, "bash": true, "text_editor": true, "computer": true, "memory": true},
	OpenAI: {"function": true, "custom": true, "namespace": true, "local_shell": true, "apply_patch": true,
		"computer": true, "computer_use_preview": true},
}

// kindAliases give one kind to the same family across APIs and versions.
var kindAliases = map[string]string{
	"web_search_preview":     "web_search",
	"code_interpreter":       "code_execution",
	"tool_search_tool_regex": "tool_search",
	"tool_search_tool_bm25":  "tool_search",
	"mcp_toolset":            "mcp",
}

// dated is a type's version suffix: Anthropic's _20250305, OpenAI's _2025_03_11.
var dated = regexp.MustCompile(`_(\d{8}|\d{4}_\d{2}_\d{2})$`)

// KindOf is the kind of a tool type.
func KindOf(typ string) string {
	k := dated.ReplaceAllString(typ, "")
	if a, ok := kindAliases[k]; ok {
		return a
	}
	return k
}

func (e Endpoint) api() API {
	if e == Messages || e == CountTokens {
		return Anthropic
	}
	return OpenAI
}

// readTools reads the tools offered: each one's name, and the server tools
// among them.
func (f *Facts) readTools(e Endpoint, top object) error {
	entries, err := top.list("tools", maxTools)
	if err != nil {
		return err
	}
	for i, raw := range entries {
		t, err := readObject(raw, fmt.Sprintf("tools[%d]", i), "type", "name", "function", "custom",
			"server_label", "server_url", "connector_id", "tunnel_id", "mcp_server_name", "allowed_domains", "filters", "environment")
		if err != nil {
			return err
		}
		typ, err := t.text("type", maxToolName)
		if err != nil {
			return err
		}
		name, err := t.text("name", maxToolName)
		if err != nil {
			return err
		}
		for _, inner := range []string{"function", "custom"} { // OpenAI chat: {"type":"function","function":{"name":…}}
			if n, err := t.inner(inner, "name", maxToolName); err != nil {
				return err
			} else if n != "" {
				name = n
			}
		}
		kind := KindOf(typ)
		if typ == "" {
			kind = "custom" // Anthropic's client tools need no type
		}
		server := !clientKinds[e.api()][kind]
		if kind == "shell" { // OpenAI: client-run unless its environment is a hosted container
			et, err := t.inner("environment", "type", maxToolName)
			if err != nil {
				return err
			}
			server = et != "" && et != "local"
		}
		if name == "" {
			name = typ // a hosted tool: {"type":"web_search"}
		}
		if name == "" {
			return badRequest("tools[%d] has neither a name nor a type", i)
		}
		f.Tools = append(f.Tools, name)
		if !server {
			continue
		}
		st := ServerTool{Kind: kind, Type: typ, Name: name}
		if err := st.readMCP(t); err != nil {
			return err
		}
		if err := st.readDomains(t); err != nil {
			return err
		}
		f.ServerTools = append(f.ServerTools, st)
	}
	return nil
}

// readMCP reads an MCP tool's server: OpenAI names it by server_url,
// connector_id or tunnel_id and labels it; Anthropic's mcp_toolset names
// an entry of mcp_servers, which holds the URL.
func (st *ServerTool) readMCP(t object) error {
	var err error
	if st.Kind != "mcp" {
		return nil
	}
	for _, k := range []string{"server_label", "mcp_server_name"} {
		if n, err := t.text(k, maxToolName); err != nil {
			return err
		} else if n != "" {
			st.Name = n
		}
	}
	for _, k := range []string{"connector_id", "tunnel_id"} {
		if c, err := t.text(k, maxToolName); err != nil {
			return err
		} else if c != "" {
			st.Connector = c
		}
	}
	if st.URL, err = t.text("server_url", maxURLLen); err != nil || st.URL == "" {
		return err
	}
	st.Host, err = urlHost(st.URL, t.where+".server_url")
	return err
}

// readDomains reads a web tool's allowed_domains (Anthropic) or
// filters.allowed_domains (OpenAI).
func (st *ServerTool) readDomains(t object) error {
	filters, err := t.object("filters", "allowed_domains")
	if err != nil {
		return err
	}
	for _, o := range []object{t, filters} {
		ds, err := o.list("allowed_domains", maxDomains)
		if err != nil {
			return err
		}
		for j, raw := range ds {
			d, err := textOf(raw, fmt.Sprintf("%s.allowed_domains[%d]", o.where, j), 253)
			if err != nil {
				return err
			}
			st.Domains = append(st.Domains, d)
		}
	}
	return nil
}

// readMCPServers reads Anthropic's MCP connector: the servers the provider
// would connect to, each a server tool of kind mcp with its URL.
func (f *Facts) readMCPServers(top object) error {
	entries, err := top.list("mcp_servers", maxMCPServers)
	if err != nil {
		return err
	}
	for i, raw := range entries {
		s, err := readObject(raw, fmt.Sprintf("mcp_servers[%d]", i), "type", "url", "name")
		if err != nil {
			return err
		}
		st := ServerTool{Kind: "mcp", Type: "mcp_servers"}
		if st.Name, err = s.text("name", maxToolName); err != nil {
			return err
		}
		if st.URL, err = s.text("url", maxURLLen); err != nil {
			return err
		}
		if st.Host, err = urlHost(st.URL, s.where+".url"); err != nil {
			return err
		}
		f.ServerTools = append(f.ServerTools, st)
	}
	return nil
}

// readHostedOptions reads the request options that turn on a hosted tool
// without naming it in tools: chat completions' web_search_options, and
// the Responses API's stored prompt, which may carry tools of its own that
// the door cannot see.
func (f *Facts) readHostedOptions(e Endpoint, top object) error {
	switch e {
	case ChatCompletions:
		if _, ok := top.raw("web_search_options"); ok {
			f.ServerTools = append(f.ServerTools, ServerTool{Kind: "web_search", Type: "web_search_options", Name: "web_search_options"})
		}
	case Responses:
		if _, ok := top.raw("prompt"); ok {
			id, err := top.inner("prompt", "id", maxToolName)
			if err != nil {
				return err
			}
			f.ServerTools = append(f.ServerTools, ServerTool{Kind: "prompt", Type: "prompt", Name: id})
		}
	}
	return nil
}

// urlHost is the host:port a server URL names: an absolute http(s) URL
// without credentials.
func urlHost(s, where string) (string, error) {
	u, err := url.Parse(s)
	switch {
	case s == "":
		return "", badRequest("%s is missing", where)
	case err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Hostname() == "":
		return "", badRequest("%s is not an absolute http(s) URL", where)
	case u.User != nil:
		return "", badRequest("%s carries credentials in the URL", where)
	}
	port := u.Port()
	if port == "" {
		port = map[string]string{"https": "443", "http": "80"}[u.Scheme]
	}
	return net.JoinHostPort(strings.ToLower(u.Hostname()), port), nil
}
