package kube

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/internal/host/sandbox/rootfs"
	"github.com/toolgate/toolgate/internal/proto"
)

func TestObjectName(t *testing.T) {
	long := strings.Repeat("a", 63)
	tests := []struct{ agent, want string }{
		{"demo", "tg-i1-demo"},
		{"a_b", ""}, // hashed
		{"a-b", "tg-i1-a-b"},
		{long, ""},
	}
	seen := map[string]string{}
	for _, tt := range tests {
		for _, suffix := range []string{"", "-ws"} {
			got := objectName("i1", tt.agent, suffix)
			if tt.want != "" && got != tt.want+suffix {
				t.Errorf("objectName(%q, %q) = %q, want %q", tt.agent, suffix, got, tt.want+suffix)
			}
			if len(got) > 63 || !dnsLabel.MatchString(got) {
				t.Errorf("objectName(%q, %q) = %q: not a DNS label", tt.agent, suffix, got)
			}
			if other, dup := seen[got]; dup {
				t.Errorf("%q and %q both named %q", other, tt.agent, got)
			}
			seen[got] = tt.agent
		}
	}
}

// TestWriteImage reads back the OCI archive: the index names the image,
// the config runs the client's init as the sandbox user, and the layer
// holds the real binaries where the profile left mount points.
func TestWriteImage(t *testing.T) {
	if _, err := os.Stat(rootfs.BusyboxPath); err != nil {
		t.Skip("no busybox-static on this host")
	}
	dir := t.TempDir()
	client, launch := filepath.Join(dir, "client"), filepath.Join(dir, "launch")
	for f, body := range map[string]string{client: "client-binary", launch: "launch-binary"} {
		if err := os.WriteFile(f, []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	p, err := rootfs.Lookup("busybox-host") // offline: what is tested is the archive
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := WriteImage(context.Background(), &buf, "example.test/sb:1", p, rootfs.Env{}, Binaries{Client: client, Launcher: launch}); err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{}
	tr := tar.NewReader(&buf)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		files[h.Name], _ = io.ReadAll(tr)
	}
	blob := func(digest string) []byte {
		b, ok := files["blobs/sha256/"+strings.TrimPrefix(digest, "sha256:")]
		if !ok {
			t.Fatalf("no blob %s", digest)
		}
		return b
	}
	var index struct {
		Manifests []struct {
			Digest      string
			Annotations map[string]string
		}
	}
	if err := json.Unmarshal(files["index.json"], &index); err != nil || len(index.Manifests) != 1 ||
		index.Manifests[0].Annotations["io.containerd.image.name"] != "example.test/sb:1" {
		t.Fatalf("index: %v %s", err, files["index.json"])
	}
	var manifest struct {
		Config struct{ Digest string }
		Layers []struct{ Digest string }
	}
	if err := json.Unmarshal(blob(index.Manifests[0].Digest), &manifest); err != nil || len(manifest.Layers) != 1 {
		t.Fatalf("manifest: %v", err)
	}
	var cfg struct {
		Config struct {
			User string
			Cmd  []string
		}
	}
	if err := json.Unmarshal(blob(manifest.Config.Digest), &cfg); err != nil || cfg.Config.User != "1000:1000" ||
		strings.Join(cfg.Config.Cmd, " ") != proto.ClientPath+" init" {
		t.Fatalf("config: %v %+v", err, cfg)
	}
	layer := map[string]string{}
	lr := tar.NewReader(bytes.NewReader(blob(manifest.Layers[0].Digest)))
	for {
		h, err := lr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if _, dup := layer[h.Name]; dup {
			t.Errorf("%s twice in the layer", h.Name)
		}
		b, _ := io.ReadAll(lr)
		layer[h.Name] = string(b)
	}
	if layer["tools/toolgate-client"] != "client-binary" || layer["tools/toolgate-launch"] != "launch-binary" || layer["bin/busybox"] == "" {
		t.Fatalf("layer: client %q launcher %q, busybox %d bytes", layer["tools/toolgate-client"], layer["tools/toolgate-launch"], len(layer["bin/busybox"]))
	}
}
