package kube

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/toolgate/toolgate/internal/host/sandbox"
	"github.com/toolgate/toolgate/internal/proto"
	"github.com/toolgate/toolgate/internal/proto/hooks"
)

// Labels and annotations on everything this backend creates.
const (
	LabelManaged  = "toolgate.dev/managed"
	LabelAgent    = "toolgate.dev/agent"
	LabelInstance = "toolgate.dev/instance"
	AnnotSpec     = "toolgate.dev/spec"
	// Container is the sandbox container's name in the pod.
	Container = "sandbox"
)

// specVersion is part of every spec hash: bump it when the pod layout
// built here changes, so existing pods are recreated.
const specVersion = "1"

// Volumes of the pod the gateway reaches from the node (emptyDirs under the
// kubelet's pod directory): the agent socket, the executor socket, the
// launchers and Claude Code's managed settings. Each is one pod's only.
const (
	VolSocket   = "toolgate-sock"
	VolExec     = "toolgate-exec"
	VolToolsBin = "toolgate-tools-bin"
	VolClaude   = "toolgate-claude-code"
	volRun      = "toolgate-run"
	volTmp      = "tmp"
	volWork     = "workspace"
)

// Limits a sandbox pod gets when its spec sets none: a pod without limits
// could take the node.
const (
	DefaultMemory = 1 << 30
	DefaultCPUs   = 1.0
)

// dnsLabel is what a name inside a pod or object name may be.
var dnsLabel = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)

// objectName is the name of the agent's pod and claim in this instance.
// Agent names may hold "_", which object names may not: such a name is
// spelled with "-" and disambiguated by a hash of the real one.
func objectName(instance, agent, suffix string) string {
	n := "tg-" + instance + "-" + agent
	if strings.Contains(agent, "_") || len(n)+len(suffix) > 63 {
		sum := sha256.Sum256([]byte(agent))
		n = strings.ReplaceAll(n, "_", "-")
		n = strings.TrimRight(n[:min(len(n), 63-len(suffix)-9)], "-") + "-" + hex.EncodeToString(sum[:4])
	}
	return n + suffix
}

// podFor builds the agent's pod: Pod Security "restricted" (non-root, read-only
// root, no privilege escalation, no capabilities, RuntimeDefault seccomp), no
// service-account token, no service links, limits always set, the workspace
// on the agent's claim, and emptyDirs where the Docker backend bind-mounts
// host directories. The spec hash covers everything the pod is built from.
func (m *Manager) podFor(spec sandbox.AgentSpec) (*corev1.Pod, error) {
	uid, gid, err := sandbox.ParseUser(spec.UserOrDefault())
	if err != nil {
		return nil, err
	}
	if uid == 0 {
		return nil, fmt.Errorf("sandbox spec for agent %q: user 0 cannot run under Pod Security restricted", spec.Agent)
	}
	mem, cpus := spec.Memory, spec.CPUs
	if mem <= 0 {
		mem = DefaultMemory
	}
	if cpus <= 0 {
		cpus = DefaultCPUs
	}
	u, g := int64(uid), int64(gid)
	no, yes := false, true
	empty := func(name string) corev1.Volume {
		return corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}
	}
	tmpSize := resource.MustParse("64Mi")
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name:      m.PodName(spec.Agent),
			Namespace: m.ns,
			Labels:    m.labels(spec.Agent),
		},
		Spec: corev1.PodSpec{
			// The node whose gateway serves the pod: it reaches the pod's
			// sockets in the kubelet's directory, so the pod must be here.
			NodeName:                      m.node,
			RestartPolicy:                 corev1.RestartPolicyAlways,
			AutomountServiceAccountToken:  &no,
			EnableServiceLinks:            &no,
			TerminationGracePeriodSeconds: func() *int64 { v := int64(2); return &v }(),
			SecurityContext: &corev1.PodSecurityContext{
				RunAsNonRoot:   &yes,
				RunAsUser:      &u,
				RunAsGroup:     &g,
				FSGroup:        &g,
				SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
			},
			Containers: []corev1.Container{{
				Name:            Container,
				Image:           spec.Image,
				ImagePullPolicy: m.pull,
				Command:         sandbox.InitArgv(),
				Env:             envVars(append(spec.Env(), sandbox.PathEnv(nil))),
				WorkingDir:      proto.WorkspacePath,
				SecurityContext: &corev1.SecurityContext{
					RunAsNonRoot:             &yes,
					AllowPrivilegeEscalation: &no,
					ReadOnlyRootFilesystem:   &yes,
					Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
					SeccompProfile:           &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
				},
				Resources: corev1.ResourceRequirements{
					Limits: corev1.ResourceList{
						corev1.ResourceMemory: *resource.NewQuantity(mem, resource.BinarySI),
						corev1.ResourceCPU:    *resource.NewMilliQuantity(int64(cpus*1000), resource.DecimalSI),
					},
					Requests: corev1.ResourceList{
						corev1.ResourceMemory: resource.MustParse("32Mi"),
						corev1.ResourceCPU:    resource.MustParse("10m"),
					},
				},
				VolumeMounts: []corev1.VolumeMount{
					{Name: volWork, MountPath: proto.WorkspacePath},
					{Name: volTmp, MountPath: "/tmp"},
					{Name: volRun, MountPath: proto.RunDir},
					{Name: VolSocket, MountPath: proto.SocketDirPath, ReadOnly: true},
					{Name: VolExec, MountPath: proto.ExecDirPath},
					{Name: VolToolsBin, MountPath: proto.ToolsBinPath, ReadOnly: true},
					{Name: VolClaude, MountPath: hooks.ManagedSettingsDir, ReadOnly: true},
				},
			}},
			Volumes: []corev1.Volume{
				{Name: volWork, VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: m.ClaimName(spec.Agent)}}},
				{Name: volTmp, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory, SizeLimit: &tmpSize}}},
				empty(volRun), empty(VolSocket), empty(VolExec), empty(VolToolsBin), empty(VolClaude),
			},
		},
	}
	h := sha256.New()
	_ = json.NewEncoder(h).Encode([]any{specVersion, pod.Spec})
	pod.Annotations = map[string]string{AnnotSpec: hex.EncodeToString(h.Sum(nil))[:16]}
	return pod, nil
}

func envVars(kvs []string) []corev1.EnvVar {
	out := make([]corev1.EnvVar, 0, len(kvs))
	for _, kv := range kvs {
		k, v, _ := strings.Cut(kv, "=")
		out = append(out, corev1.EnvVar{Name: k, Value: v})
	}
	return out
}

func (m *Manager) labels(agent string) map[string]string {
	return map[string]string{LabelManaged: "true", LabelAgent: agent, LabelInstance: m.instance}
}

// NetworkPolicy denies the sandbox pods of this instance all traffic, in
// and out: the gateway is reached through the Unix socket in the pod's
// emptyDir, never over the network, and egress goes through it.
func (m *Manager) NetworkPolicy() *networkingv1.NetworkPolicy {
	return &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "tg-" + m.instance + "-sandboxes", Namespace: m.ns, Labels: map[string]string{LabelManaged: "true", LabelInstance: m.instance}},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{LabelManaged: "true", LabelInstance: m.instance}},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress},
		},
	}
}
