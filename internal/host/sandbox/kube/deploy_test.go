package kube

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	authv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/restmapper"
)

var agentsGVR = schema.GroupVersionResource{Group: "toolgate.dev", Version: "v1alpha1", Resource: "agents"}

// applyManifests server-side applies deploy/kubernetes to the cluster, in
// dependency order.
func applyManifests(t *testing.T, c *cluster) dynamic.Interface {
	t.Helper()
	dyn, err := dynamic.NewForConfig(c.cfg)
	if err != nil {
		t.Fatal(err)
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(c.cs.Discovery()))
	ctx := context.Background()
	for _, f := range []string{"namespaces.yaml", "agent-crd.yaml", "rbac.yaml"} {
		eachObject(t, f, func(obj *unstructured.Unstructured) {
			gvk := obj.GroupVersionKind()
			mapping, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
			if err != nil {
				t.Fatalf("%s: %s: %v", f, gvk, err)
			}
			var ri dynamic.ResourceInterface = dyn.Resource(mapping.Resource)
			if ns := obj.GetNamespace(); ns != "" {
				ri = dyn.Resource(mapping.Resource).Namespace(ns)
			}
			if _, err := ri.Apply(ctx, obj.GetName(), obj, metav1.ApplyOptions{FieldManager: "toolgate-test", Force: true}); err != nil {
				t.Fatalf("%s: applying %s %s: %v", f, gvk.Kind, obj.GetName(), err)
			}
		})
	}
	// The CRD serves once it is established.
	for i := 0; ; i++ {
		if _, err := dyn.Resource(agentsGVR).Namespace("agents").List(ctx, metav1.ListOptions{}); err == nil {
			break
		} else if i == 100 {
			t.Fatalf("agents never served: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	return dyn
}

// eachObject calls fn with each object of deploy/kubernetes/file.
func eachObject(t *testing.T, file string, fn func(*unstructured.Unstructured)) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "..", "..", "..", "deploy", "kubernetes", file))
	if err != nil {
		t.Fatal(err)
	}
	dec := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(string(raw)), 4096)
	for {
		var obj unstructured.Unstructured
		if err := dec.Decode(&obj.Object); errors.Is(err, io.EOF) {
			return
		} else if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		if obj.Object != nil {
			fn(&obj)
		}
	}
}

// TestAgentResource: the Agent CRD's schema refuses bad agents at the API
// server, keeps status apart from spec, and the gateway's RBAC allows its
// sandboxes' objects in the agents' namespace and nothing else.
func TestAgentResource(t *testing.T) {
	c := needCluster(t)
	dyn := applyManifests(t, c)
	ctx := context.Background()
	agents := dyn.Resource(agentsGVR).Namespace("agents")
	agent := func(name string, spec map[string]any) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "toolgate.dev/v1alpha1", "kind": "Agent",
			"metadata": map[string]any{"name": name}, "spec": spec,
		}}
	}
	good := map[string]any{"image": "toolgate/sandbox:latest", "tools": []any{"git"}, "user": "1000:1000",
		"egress":  map[string]any{"allow": []any{"api.github.com:443", "*.pypi.org:443"}},
		"rules":   []any{map[string]any{"name": "no-rm", "deny": `call.argv.exists(a, a == "rm")`, "reason": "no deleting"}},
		"limits":  map[string]any{"memory": "512Mi", "cpus": 0.5, "execTimeout": "10m"},
		"default": "allow"}
	created, err := agents.Create(ctx, agent("demo", good), metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("a good agent: %v", err)
	}
	t.Cleanup(func() { _ = agents.Delete(context.Background(), "demo", metav1.DeleteOptions{}) })

	with := func(k string, v any) map[string]any {
		s := map[string]any{}
		for kk, vv := range good {
			s[kk] = vv
		}
		s[k] = v
		return s
	}
	bad := []struct {
		name, agent string
		spec        map[string]any
		want        string
	}{
		{"no image", "bad-a", map[string]any{"tools": []any{"git"}}, "spec.image: Required"},
		{"root user", "bad-b", with("user", "0:0"), "cannot be root"},
		{"user by name", "bad-c", with("user", "agent"), "spec.user"},
		{"tool with a slash", "bad-d", with("tools", []any{"../bin/sh"}), "spec.tools[0]"},
		{"egress without a port", "bad-e", with("egress", map[string]any{"allow": []any{"example.com"}}), "spec.egress.allow[0]"},
		{"rule with two verdicts", "bad-f", with("rules", []any{map[string]any{"name": "x", "allow": "true", "deny": "true", "reason": "r"}}), "exactly one of allow, deny, ask"},
		{"rule without a reason", "bad-j", with("rules", []any{map[string]any{"name": "x", "deny": "true"}}), "spec.rules[0].reason: Required"},
		{"negative cpus", "bad-g", with("limits", map[string]any{"cpus": -1}), "spec.limits.cpus"},
		{"unknown field", "bad-h", with("privileged", true), "privileged"},
		{"name with an underscore", "bad_i", good, "agent names are"},
	}
	for _, tt := range bad {
		_, err := agents.Create(ctx, agent(tt.agent, tt.spec), metav1.CreateOptions{FieldValidation: "Strict"})
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: got %v, want a refusal naming %q", tt.name, err, tt.want)
		}
	}

	// Status is its own subresource: the gateway writes it, an apply of
	// the spec does not touch it.
	created.Object["status"] = map[string]any{"phase": "Running", "pod": "tg-n1-demo", "calls": int64(3), "denials": int64(1)}
	if _, err := agents.UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	got, err := agents.Get(ctx, "demo", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if calls, _, _ := unstructured.NestedInt64(got.Object, "status", "calls"); calls != 3 {
		t.Fatalf("status: %v", got.Object["status"])
	}

	sa := "system:serviceaccount:toolgate-system:toolgate-gateway"
	access := []struct {
		ns, verb, group, resource, sub string
		want                           bool
	}{
		{"agents", "create", "", "pods", "", true},
		{"agents", "create", "", "pods", "exec", true},
		{"agents", "create", "", "persistentvolumeclaims", "", true},
		{"agents", "update", "toolgate.dev", "agents", "status", true},
		{"agents", "update", "toolgate.dev", "agents", "", false},
		{"agents", "get", "", "secrets", "", false},
		{"kube-system", "create", "", "pods", "", false},
		{"agents", "create", "rbac.authorization.k8s.io", "roles", "", false},
	}
	for _, a := range access {
		r, err := c.cs.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authv1.SubjectAccessReview{Spec: authv1.SubjectAccessReviewSpec{
			User: sa, ResourceAttributes: &authv1.ResourceAttributes{Namespace: a.ns, Verb: a.verb, Group: a.group, Resource: a.resource, Subresource: a.sub},
		}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if r.Status.Allowed != a.want {
			t.Errorf("gateway may %s %s/%s in %s: %v, want %v", a.verb, a.resource, a.sub, a.ns, r.Status.Allowed, a.want)
		}
	}
}
