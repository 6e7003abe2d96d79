package kube

import (
	"testing"

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// The test cluster, for the tests of package kube_test (a gateway served
// by `toolgate serve` on it).
type Cluster struct{ c *cluster }

func NeedCluster(t testing.TB) Cluster { return Cluster{needCluster(t)} }

func (c Cluster) Dir() string                          { return c.c.dir }
func (c Cluster) Config() *rest.Config                 { return c.c.cfg }
func (c Cluster) Client() kubernetes.Interface         { return c.c.cs }
func (c Cluster) Namespace() string                    { return c.c.ns }
func (c Cluster) Node() string                         { return c.c.node }
func (c Cluster) Image() string                        { return c.c.img }
func (c Cluster) StorageClass() string                 { return testStorageClass }
func (c Cluster) Apply(t *testing.T) dynamic.Interface { return applyManifests(t, c.c) }

// Volume provides the workspace volume of agent's claim in instance inst.
func (c Cluster) Volume(t testing.TB, inst, agent string) {
	c.c.volume(t, c.c.manager(t, inst), agent)
}

// PodName is the pod of agent in instance inst.
func PodName(inst, agent string) string { return objectName(inst, agent, "") }
