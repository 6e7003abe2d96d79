package docker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"

	"github.com/moby/moby/client"
	"github.com/toolgate/toolgate/internal/host/sandbox/rootfs"
)

// Labels of a built image: the profile and the version of everything in it.
const (
	LabelProfile        = "toolgate.profile"
	LabelProfileVersion = "toolgate.profile.version"
)

// imageChanges configure the imported image (Dockerfile instructions).
func imageChanges(p rootfs.Profile) []string {
	changes := []string{
		"USER 1000:1000",
		"WORKDIR /workspace",
		"ENV PATH=/tools/bin:/usr/local/bin:/usr/bin:/bin",
		`CMD ["/tools/toolgate-client","init"]`,
		"LABEL " + LabelProfile + "=" + p.Name(),
		"LABEL " + LabelProfileVersion + "=" + p.Version(),
	}
	for _, kv := range p.Env() {
		changes = append(changes, "ENV "+kv)
	}
	return changes
}

// BuildDefaultImage builds the default profile's image (busybox) as tag,
// its progress in the log: a first build compiles busybox, ~30 s.
func (m *Manager) BuildDefaultImage(ctx context.Context, tag string, force bool) (bool, error) {
	p, err := rootfs.Lookup("default")
	if err != nil {
		return false, err
	}
	progress := slog.NewLogLogger(m.log.Handler(), slog.LevelInfo).Writer()
	return m.BuildImage(ctx, tag, p, rootfs.Env{Log: progress}, force)
}

// BuildImage builds profile p's image offline and imports it through the
// Engine as tag. It does nothing when tag exists with the profile's
// current version unless force. It reports whether it built.
func (m *Manager) BuildImage(ctx context.Context, tag string, p rootfs.Profile, env rootfs.Env, force bool) (bool, error) {
	old, current, err := m.imageVersion(ctx, tag)
	if err != nil {
		return false, err
	}
	if !force && current == p.Version() {
		return false, nil
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // ends a build the import no longer reads
	pr, pw := io.Pipe()
	wrote := make(chan error, 1)
	go func() {
		err := p.Write(ctx, env, pw)
		wrote <- err // before the pipe fails the import: see failed
		pw.CloseWithError(err)
	}()
	defer pr.Close() // ends the writer when the import stops early
	// failed says why the import failed: the profile's own error when its
	// build failed first (a missing tool, a refused download), not the
	// Engine client's wrapping of it in the whole request URL.
	failed := func(err error) error {
		select {
		case werr := <-wrote:
			if werr != nil {
				return fmt.Errorf("building image %s: %w", tag, werr)
			}
		default:
		}
		return fmt.Errorf("importing image %s: %w", tag, err)
	}
	resp, err := m.cli.ImageImport(ctx,
		client.ImageImportSource{Source: pr, SourceName: "-"},
		tag, client.ImageImportOptions{Changes: imageChanges(p), Message: "toolgate sandbox image, profile " + p.Name()})
	if err != nil {
		return false, failed(err)
	}
	defer resp.Close()
	if err := drainProgress(resp); err != nil {
		return false, failed(err)
	}
	if old != "" {
		// The image the tag left, hundreds of MB for an agent profile. Not
		// forced: one a container still runs, or another tag names, stays.
		_, _ = m.cli.ImageRemove(ctx, old, client.ImageRemoveOptions{})
	}
	return true, nil
}

// imageVersion is the id and profile version label of image ref: the
// version is "" when the image is missing or has none (built before images
// were labelled, or not by toolgate), so BuildImage makes it anew.
func (m *Manager) imageVersion(ctx context.Context, ref string) (id, version string, err error) {
	res, err := m.cli.ImageList(ctx, client.ImageListOptions{Filters: make(client.Filters).Add("reference", ref)})
	if err != nil {
		return "", "", fmt.Errorf("listing images: %w", err)
	}
	if len(res.Items) == 0 {
		return "", "", nil
	}
	return res.Items[0].ID, res.Items[0].Labels[LabelProfileVersion], nil
}

// drainProgress reads the Engine's JSON progress stream and returns the
// error it reports, if any.
func drainProgress(r io.Reader) error {
	dec := json.NewDecoder(r)
	for {
		var msg struct {
			Error string `json:"error"`
		}
		if err := dec.Decode(&msg); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		if msg.Error != "" {
			return errors.New(msg.Error)
		}
	}
}
