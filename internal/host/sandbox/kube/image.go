package kube

import (
	"archive/tar"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"hash"
	"io"
	"os"
	"path"
	"strings"
	"time"

	"github.com/toolgate/toolgate/internal/host/sandbox/rootfs"
	"github.com/toolgate/toolgate/internal/proto"
)

// Binaries are the static in-sandbox programs an image for this backend
// carries: a pod cannot bind-mount them from the host (Pod Security
// restricted allows no hostPath), so they are in the image.
type Binaries struct {
	Client   string // host path of toolgate-client
	Launcher string // host path of toolgate-launch
	// Gateway, when set, is the host path of a static toolgate-gateway:
	// the image is then the gateway's (deploy/kubernetes/gateway.yaml),
	// running `toolgate-gateway serve` as root with its home at GatewayHome.
	Gateway string
}

// Where the gateway image keeps its binary and its home.
const (
	GatewayPath = "/usr/local/bin/toolgate-gateway"
	GatewayHome = "/var/lib/toolgate"
)

// WriteImage writes an OCI image-layout archive (what `ctr images import`
// and registries' push tools take) of profile p as ref: one layer, the
// profile's root filesystem with the binaries in place of their mount
// points, configured like the Docker backend's image. Offline: nothing is
// pulled.
func WriteImage(ctx context.Context, w io.Writer, ref string, p rootfs.Profile, env rootfs.Env, bins Binaries) error {
	layer, err := os.CreateTemp("", "toolgate-layer-*.tar")
	if err != nil {
		return err
	}
	defer os.Remove(layer.Name())
	defer layer.Close()
	ld := sha256.New()
	if err := writeLayer(ctx, io.MultiWriter(layer, ld), p, env, bins); err != nil {
		return fmt.Errorf("image %s: %w", ref, err)
	}
	size, err := layer.Seek(0, io.SeekCurrent)
	if err != nil {
		return err
	}
	layerDigest := digest(ld)
	run := map[string]any{
		"User":       "1000:1000",
		"WorkingDir": proto.WorkspacePath,
		"Env":        append([]string{"PATH=/tools/bin:/usr/local/bin:/usr/bin:/bin"}, p.Env()...),
		"Cmd":        []string{proto.ClientPath, "init"},
		"Labels":     map[string]string{"toolgate.profile": p.Name(), "toolgate.profile.version": p.Version()},
	}
	if bins.Gateway != "" {
		// The gateway's pod is the trusted side: root, to serve sockets
		// owned by each sandbox's uid in the kubelet's pod directories.
		run["User"], run["WorkingDir"] = "0:0", GatewayHome
		run["Env"] = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "TOOLGATE_HOME=" + GatewayHome}
		run["Cmd"] = []string{GatewayPath, "serve"}
	}
	cfg, err := json.Marshal(map[string]any{
		"architecture": "amd64", "os": "linux", "created": time.Unix(0, 0).UTC(),
		"config": run,
		"rootfs": map[string]any{"type": "layers", "diff_ids": []string{layerDigest}},
	})
	if err != nil {
		return err
	}
	manifest, err := json.Marshal(map[string]any{
		"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
		"config": descriptor("application/vnd.oci.image.config.v1+json", cfg),
		"layers": []any{map[string]any{"mediaType": "application/vnd.oci.image.layer.v1.tar", "digest": layerDigest, "size": size}},
	})
	if err != nil {
		return err
	}
	tag := ref[strings.LastIndex(ref, ":")+1:]
	md := descriptor("application/vnd.oci.image.manifest.v1+json", manifest)
	md["platform"] = map[string]string{"architecture": "amd64", "os": "linux"}
	md["annotations"] = map[string]string{"io.containerd.image.name": ref, "org.opencontainers.image.ref.name": tag}
	index, err := json.Marshal(map[string]any{"schemaVersion": 2, "manifests": []any{md}})
	if err != nil {
		return err
	}
	tw := tar.NewWriter(w)
	put := func(name string, body []byte) error {
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(body)), Typeflag: tar.TypeReg}); err != nil {
			return err
		}
		_, err := tw.Write(body)
		return err
	}
	for _, f := range []struct {
		name string
		body []byte
	}{
		{"oci-layout", []byte(`{"imageLayoutVersion":"1.0.0"}`)},
		{"index.json", index},
		{blob(cfg), cfg},
		{blob(manifest), manifest},
	} {
		if err := put(f.name, f.body); err != nil {
			return err
		}
	}
	if _, err := layer.Seek(0, io.SeekStart); err != nil {
		return err
	}
	if err := tw.WriteHeader(&tar.Header{Name: "blobs/sha256/" + strings.TrimPrefix(layerDigest, "sha256:"), Mode: 0o644, Size: size, Typeflag: tar.TypeReg}); err != nil {
		return err
	}
	if _, err := io.Copy(tw, layer); err != nil {
		return err
	}
	return tw.Close()
}

// writeLayer copies the profile's tar, the binaries replacing their
// empty mount points.
func writeLayer(ctx context.Context, w io.Writer, p rootfs.Profile, env rootfs.Env, bins Binaries) error {
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(p.Write(ctx, env, pw)) }()
	defer pr.Close()
	replace := map[string]string{
		strings.TrimPrefix(proto.ClientPath, "/"):   bins.Client,
		strings.TrimPrefix(proto.LauncherPath, "/"): bins.Launcher,
	}
	if bins.Gateway != "" {
		replace[strings.TrimPrefix(GatewayPath, "/")] = bins.Gateway
	}
	tr, tw := tar.NewReader(pr), tar.NewWriter(w)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
		name := path.Clean(strings.TrimPrefix(h.Name, "./"))
		if src, ok := replace[name]; ok {
			delete(replace, name)
			if err := hostFile(tw, name, src); err != nil {
				return err
			}
			continue
		}
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if _, err := io.Copy(tw, tr); err != nil {
			return err
		}
	}
	for name, src := range replace { // profiles without the mount points
		if err := hostFile(tw, name, src); err != nil {
			return err
		}
	}
	return tw.Close()
}

func hostFile(tw *tar.Writer, name, src string) error {
	f, err := os.Open(src)
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o755, Size: fi.Size(), Typeflag: tar.TypeReg, ModTime: fi.ModTime(), Format: tar.FormatPAX}); err != nil {
		return err
	}
	_, err = io.Copy(tw, f)
	return err
}

func digest(h hash.Hash) string { return "sha256:" + hex.EncodeToString(h.Sum(nil)) }

func blob(b []byte) string {
	sum := sha256.Sum256(b)
	return "blobs/sha256/" + hex.EncodeToString(sum[:])
}

func descriptor(mediaType string, b []byte) map[string]any {
	sum := sha256.Sum256(b)
	return map[string]any{"mediaType": mediaType, "digest": "sha256:" + hex.EncodeToString(sum[:]), "size": len(b)}
}
