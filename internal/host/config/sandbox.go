package config

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// Sandbox backends.
const (
	BackendDocker     = "docker"
	BackendKubernetes = "kubernetes"
)

// Sandbox chooses where the agents' sandboxes run.
type Sandbox struct {
	// Backend is docker (the default) or kubernetes.
	Backend string `yaml:"backend"`
	// Kubernetes configures the kubernetes backend (docs/kubernetes.md).
	Kubernetes *Kubernetes `yaml:"kubernetes"`
	// RemoveOnExit removes the agents' sandboxes (never their workspaces)
	// when serve stops, as serve --rm does; by default they keep running
	// and the next serve adopts them.
	RemoveOnExit bool `yaml:"removeOnExit"`
}

// Kubernetes is the kubernetes backend: sandbox pods on this gateway's node.
type Kubernetes struct {
	// Kubeconfig reaches the API server; empty: the pod's service account
	// (in-cluster).
	Kubeconfig string `yaml:"kubeconfig"`
	// Context in the kubeconfig; empty: its current context.
	Context string `yaml:"context"`
	// Namespace holds the sandbox pods, their claims and the Agent resources.
	Namespace string `yaml:"namespace"`
	// Node is this gateway's node, where its pods run; default $NODE_NAME
	// (the DaemonSet sets it from spec.nodeName).
	Node string `yaml:"node"`
	// Instance tells this gateway's pods from others' in the namespace;
	// default "default". Gateways that share Agents share it.
	Instance string `yaml:"instance"`
	// KubeletDir is the kubelet's root directory as the gateway sees it;
	// default /var/lib/kubelet.
	KubeletDir string `yaml:"kubeletDir"`
	// SocketLinks is a directory of the gateway's for short links to the
	// pods' socket volumes; default /run/toolgate-kube.
	SocketLinks string `yaml:"socketLinks"`
	// StorageClass of the workspace claims; empty: the cluster's default.
	StorageClass string `yaml:"storageClass"`
	// WorkspaceSize of a new workspace claim, e.g. 1Gi (the default).
	WorkspaceSize string `yaml:"workspaceSize"`
	// PullPolicy of the sandbox images: Always, IfNotPresent (default) or Never.
	PullPolicy string `yaml:"pullPolicy"`
	// StartTimeout bounds a pod's start; default 2m.
	StartTimeout time.Duration `yaml:"startTimeout"`
	// Agents makes this gateway serve the namespace's Agent resources
	// (toolgate.dev/v1alpha1) beside the file's agents; default true.
	Agents *bool `yaml:"agents"`
}

// WatchAgents reports whether the gateway serves Agent resources.
func (k *Kubernetes) WatchAgents() bool { return k.Agents == nil || *k.Agents }

var (
	dnsLabel     = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)
	quantity     = regexp.MustCompile(`^[0-9]+(\.[0-9]+)?(Ki|Mi|Gi|Ti|k|M|G|T)?$`)
	pullPolicies = []string{"Always", "IfNotPresent", "Never"}
)

// maxSocketLinks keeps SocketLinks/<pod UID>/gateway.sock within a Unix
// socket address (107 bytes).
const maxSocketLinks = 107 - len("/12345678-1234-1234-1234-123456789012/gateway.sock")

func (d *decoder) sandbox(c *Config) {
	s, p := &c.Gateway.Sandbox, "gateway.sandbox"
	switch s.Backend {
	case "":
		s.Backend = BackendDocker
	case BackendDocker, BackendKubernetes:
	default:
		d.errorf(d.at(p+".backend"), p+".backend", "%q: the backends are docker (the default) and kubernetes", s.Backend)
		return
	}
	k := s.Kubernetes
	if s.Backend != BackendKubernetes {
		if k != nil {
			d.errorf(d.at(p+".kubernetes"), p+".kubernetes", "set only with backend: kubernetes")
		}
		return
	}
	p += ".kubernetes"
	if k == nil {
		d.errorf(d.at(p), p, "required with backend: kubernetes (at least its namespace)")
		return
	}
	k.Kubeconfig = d.hostPath(p+".kubeconfig", k.Kubeconfig, c.Home)
	k.KubeletDir = d.hostPath(p+".kubeletDir", k.KubeletDir, c.Home)
	k.SocketLinks = d.hostPath(p+".socketLinks", k.SocketLinks, c.Home)
	if k.Context != "" && k.Kubeconfig == "" {
		d.errorf(d.at(p+".context"), p+".context", "names a context of a kubeconfig: set kubeconfig too")
	}
	if k.Node == "" {
		k.Node, _ = lookupEnv("NODE_NAME")
	}
	d.label(p+".namespace", k.Namespace, 63, true)
	d.label(p+".node", k.Node, 253, true)
	d.label(p+".instance", k.Instance, 16, false)
	if len(k.SocketLinks) > maxSocketLinks {
		d.errorf(d.at(p+".socketLinks"), p+".socketLinks", "%d bytes is too long for a socket path under it; at most %d", len(k.SocketLinks), maxSocketLinks)
	}
	if k.WorkspaceSize != "" && !quantity.MatchString(k.WorkspaceSize) {
		d.errorf(d.at(p+".workspaceSize"), p+".workspaceSize", "%q is not a size as Kubernetes writes it (e.g. 1Gi, 500Mi)", k.WorkspaceSize)
	}
	if k.PullPolicy != "" && !slices.Contains(pullPolicies, k.PullPolicy) {
		d.errorf(d.at(p+".pullPolicy"), p+".pullPolicy", "%q is not one of %s", k.PullPolicy, strings.Join(pullPolicies, ", "))
	}
	d.positive(p+".startTimeout", int64(k.StartTimeout))
}

// label checks a Kubernetes name field.
func (d *decoder) label(path, v string, max int, required bool) {
	switch {
	case v == "" && required && strings.HasSuffix(path, ".node"):
		d.errorf(d.at(path), path, "required: this gateway's node (or NODE_NAME in its environment, as the DaemonSet sets it)")
	case v == "" && required:
		d.errorf(d.at(path), path, "required")
	case v != "" && (len(v) > max || !dnsLabel.MatchString(strings.ReplaceAll(v, ".", "-"))):
		d.errorf(d.at(path), path, "%q: want at most %d lowercase letters, digits or -", v, max)
	}
}

// Extra is an agent defined outside the file — a cluster's Agent resource:
// its entry (JSON or YAML, the fields of agents.NAME) and the name errors
// about it carry instead of the file's.
type Extra struct {
	Name   string
	Source string // e.g. "Agent agents/demo"
	Entry  []byte
}

// ParseWith is Parse with agents from elsewhere added to the file's: each
// is checked, defaulted and merged exactly like an entry under agents.
// An error about an extra agent carries its Source as the file, no line,
// and its fields as spec.FIELD (the resource's spelling).
func ParseWith(home, name string, data []byte, extra []Extra) (*Config, error) {
	// The file's own problems first, with their lines: the merged text
	// below has lines of its own.
	cfg, err := Parse(home, name, data)
	if err != nil || len(extra) == 0 {
		return cfg, err
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, err
	}
	root := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
	if doc.Kind == yaml.DocumentNode && len(doc.Content) == 1 {
		root = doc.Content[0]
	}
	agents := mapValue(root, "agents")
	if agents == nil || agents.ShortTag() == "!!null" {
		if agents == nil {
			agents = &yaml.Node{}
			root.Content = append(root.Content, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: "agents"}, agents)
		}
		*agents = yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
	}
	var errs Errors
	for _, x := range extra {
		if mapValue(agents, x.Name) != nil {
			errs = append(errs, &Error{File: x.Source, Msg: fmt.Sprintf("agent %s is also defined in %s; one of them must go", x.Name, name)})
			continue
		}
		var entry yaml.Node
		if err := yaml.Unmarshal(x.Entry, &entry); err != nil || len(entry.Content) != 1 {
			errs = append(errs, &Error{File: x.Source, Msg: fmt.Sprintf("not an agent entry: %v", err)})
			continue
		}
		agents.Content = append(agents.Content, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: x.Name}, entry.Content[0])
	}
	if len(errs) > 0 {
		return nil, errs
	}
	merged, err := yaml.Marshal(root)
	if err != nil {
		return nil, err
	}
	cfg, err = Parse(home, name, merged)
	if err != nil {
		return nil, Attribute(err, extra)
	}
	return cfg, nil
}

// Attribute rewrites the Errors of a configuration with extra agents (from
// ParseWith, or a later check of its result such as the policy's) so that
// each problem of an extra agent names its Source and spec.FIELD, without
// a line of the merged text.
func Attribute(err error, extra []Extra) error {
	var es Errors
	if !errors.As(err, &es) {
		return err
	}
	for _, e := range es {
		for _, x := range extra {
			prefix := join("agents", x.Name)
			if rest, ok := strings.CutPrefix(e.Field, prefix); ok && (rest == "" || rest[0] == '.' || rest[0] == '[') {
				e.File, e.Line, e.Col, e.Field = x.Source, 0, 0, "spec"+rest
			}
		}
	}
	return err
}

// mapValue is the value of key in a mapping node, nil when absent.
func mapValue(m *yaml.Node, key string) *yaml.Node {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return m.Content[i+1]
		}
	}
	return nil
}
