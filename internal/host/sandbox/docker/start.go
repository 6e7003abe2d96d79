package docker

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"
	"github.com/toolgate/toolgate/internal/host/gateway"
	"github.com/toolgate/toolgate/internal/host/sandbox"
	"github.com/toolgate/toolgate/internal/proto"
)

// startWait bounds how long a call waits for a sandbox still coming up.
const startWait = 2 * time.Minute

// upTimeout bounds one sandbox's bring-up in the background.
const upTimeout = 5 * time.Minute

// boot is whether a sandbox's container is up. A configured sandbox is
// starting until its container is verified (name, owner, spec) and runs;
// calls wait for that (Manager.Sandbox) and get its failure when it could
// not come up.
type boot struct {
	mu      sync.Mutex
	up      bool
	err     error         // why the last bring-up failed
	pending chan struct{} // non-nil while a bring-up is under way; closed when it ends
}

// begin marks a bring-up under way, unless the container is up already (a
// reload re-checking a running sandbox does not make it starting).
func (b *boot) begin() {
	b.mu.Lock()
	if b.pending == nil && !b.up {
		b.pending = make(chan struct{})
	}
	b.mu.Unlock()
}

// end records how a bring-up ended and lets the calls waiting go on.
func (b *boot) end(err error) {
	b.mu.Lock()
	b.up, b.err = err == nil, err
	if b.pending != nil {
		close(b.pending)
		b.pending = nil
	}
	b.mu.Unlock()
}

// wait waits, at most startWait, for a bring-up under way to end.
func (b *boot) wait(ctx context.Context, agent string) error {
	b.mu.Lock()
	p := b.pending
	b.mu.Unlock()
	if p == nil {
		return nil
	}
	t := time.NewTimer(startWait)
	defer t.Stop()
	select {
	case <-p:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return fmt.Errorf("%w: the sandbox of agent %q is still starting after %s", gateway.ErrSandboxUnavailable, agent, startWait)
	}
}

// state is "starting" or "failed" (with why), or "" when the container is
// up and the Engine says what it is doing.
func (b *boot) state() (string, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch {
	case b.up:
		return "", nil
	case b.pending != nil:
		return StateStarting, nil
	case b.err != nil:
		return StateFailed, b.err
	}
	return StateStarting, nil
}

func (b *boot) failure() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.up {
		return nil
	}
	if b.err != nil {
		return b.err
	}
	return fmt.Errorf("%w: not started", gateway.ErrSandboxUnavailable)
}

// notStarted is the error of a sandbox that could not be brought up: the
// calls to it get it, wrapping gateway.ErrSandboxUnavailable and the cause.
func notStarted(agent string, cause error) error {
	return fmt.Errorf("%w: the sandbox of agent %q could not be started: %w", gateway.ErrSandboxUnavailable, agent, cause)
}

// States of a sandbox that is not up (Status), beside the Engine's own.
const (
	StateStarting = "starting"
	StateFailed   = "failed"
)

// Up brings the sandboxes of specs up in the background and returns at
// once: each is starting until its container runs, or failed with the
// reason; calls to a starting sandbox wait for it. The default image is
// built first when an agent uses it. Containers are created
// sandbox.UpParallel at a time, from one listing of this instance's
// containers and one inspect per image for all of them. done is closed
// once every one is up or failed.
func (m *Manager) Up(ctx context.Context, specs []sandbox.AgentSpec) (done <-chan struct{}) {
	type job struct {
		b    *Sandbox
		lock *sync.Mutex
		spec sandbox.AgentSpec
	}
	var jobs []job
	for _, s := range specs {
		if err := s.Validate(); err != nil {
			b, _ := m.agents.Register(s)
			b.boot.end(notStarted(s.Agent, err))
			continue
		}
		b, lock := m.agents.Register(s)
		b.boot.begin()
		jobs = append(jobs, job{b, lock, s})
	}
	ch := make(chan struct{})
	go func() {
		defer close(ch)
		ctx, cancel := context.WithTimeout(ctx, upTimeout)
		defer cancel()
		specs := make([]sandbox.AgentSpec, len(jobs))
		for i, j := range jobs {
			specs[i] = j.spec
		}
		if err := m.Prepare(ctx, specs); err != nil {
			jobs = slices.DeleteFunc(jobs, func(j job) bool {
				if j.spec.Image != proto.DefaultImage {
					return false
				}
				j.b.boot.end(notStarted(j.spec.Agent, err))
				return true
			})
		}
		seen, err := m.survey(ctx, specs)
		if err != nil {
			for _, j := range jobs {
				j.b.boot.end(notStarted(j.spec.Agent, err))
			}
			return
		}
		sem := make(chan struct{}, sandbox.UpParallel)
		var wg sync.WaitGroup
		for _, j := range jobs {
			wg.Add(1)
			sem <- struct{}{}
			go func() {
				defer func() { <-sem; wg.Done() }()
				if err := m.upBox(ctx, j.b, j.lock, seen); err != nil {
					m.log.Error("sandbox not started", "agent", j.spec.Agent, "err", err)
				}
			}()
		}
		wg.Wait()
	}()
	return ch
}

// upBox is ensureBox for Up: from what the survey saw, with the agent's
// newest spec, and nothing to do when a reload brought it up meanwhile.
func (m *Manager) upBox(ctx context.Context, b *Sandbox, lock *sync.Mutex, seen *survey) error {
	lock.Lock()
	defer lock.Unlock()
	if st, _ := b.boot.state(); st == "" {
		return nil
	}
	spec, ok := m.spec(b.agent)
	if !ok {
		b.boot.end(fmt.Errorf("%w: agent %q is no longer configured", gateway.ErrSandboxUnavailable, b.agent))
		return nil
	}
	return m.ensureLocked(ctx, b, spec, seen)
}

// survey is what one look at the Engine found for a batch of sandboxes:
// the containers named like this instance's, and each image the specs use.
type survey struct {
	containers map[string]*container.Summary // by name, without the slash
	images     map[string]imageFacts         // by reference
	imageErrs  map[string]error
}

// imageFacts is what a container's spec needs of its image.
type imageFacts struct {
	ID  string
	Env []string
}

// survey lists this instance's containers and inspects each image once.
func (m *Manager) survey(ctx context.Context, specs []sandbox.AgentSpec) (*survey, error) {
	cs, err := m.containers(ctx)
	if err != nil {
		return nil, err
	}
	s := &survey{containers: cs, images: map[string]imageFacts{}, imageErrs: map[string]error{}}
	for _, sp := range specs {
		if _, ok := s.images[sp.Image]; ok || s.imageErrs[sp.Image] != nil {
			continue
		}
		img, err := m.image(ctx, sp.Image)
		if err != nil {
			s.imageErrs[sp.Image] = err
			continue
		}
		s.images[sp.Image] = img
	}
	return s, nil
}

// containers lists, in one request, every container whose name has this
// instance's prefix, by name without the slash: an unmanaged one of such a
// name is among them too, to be refused.
func (m *Manager) containers(ctx context.Context) (map[string]*container.Summary, error) {
	res, err := m.cli.ContainerList(ctx, client.ContainerListOptions{
		All:     true,
		Filters: make(client.Filters).Add("name", "^/?"+regexp.QuoteMeta(m.ContainerName(""))),
	})
	if err != nil {
		if client.IsErrConnectionFailed(err) {
			return nil, m.unreachable(err)
		}
		return nil, fmt.Errorf("listing containers: %w", err)
	}
	out := make(map[string]*container.Summary, len(res.Items))
	for i, c := range res.Items {
		for _, n := range c.Names {
			out[strings.TrimPrefix(n, "/")] = &res.Items[i]
		}
	}
	return out, nil
}

// found is the container of this name the survey saw (nil: none), or, with
// no survey, the Engine's answer now.
func (m *Manager) found(ctx context.Context, seen *survey, name string) (*container.Summary, error) {
	if seen == nil {
		return m.findByName(ctx, name)
	}
	return seen.containers[name], nil
}

// imageOf is the image's facts from the survey, or the Engine's now.
func (m *Manager) imageOf(ctx context.Context, seen *survey, ref string) (imageFacts, error) {
	if seen == nil {
		return m.image(ctx, ref)
	}
	if err := seen.imageErrs[ref]; err != nil {
		return imageFacts{}, err
	}
	return seen.images[ref], nil
}

func (m *Manager) image(ctx context.Context, ref string) (imageFacts, error) {
	img, err := m.cli.ImageInspect(ctx, ref)
	if err != nil {
		if client.IsErrConnectionFailed(err) {
			return imageFacts{}, m.unreachable(err)
		}
		return imageFacts{}, fmt.Errorf("image %s: %w (the default image is built by `toolgate sandbox image`)", ref, err)
	}
	f := imageFacts{ID: img.ID}
	if img.Config != nil {
		f.Env = img.Config.Env
	}
	return f, nil
}

// fileSums are the SHA-256 sums of the binaries a sandbox mounts, each
// hashed once per version of the file: a restart with 30 agents would
// otherwise read ~14 MB per agent. A version is the file's device, inode,
// size, mtime and ctime; replacing or rewriting the file changes the ctime,
// which no one can set back.
type fileSums struct {
	mu   sync.Mutex
	sums map[string]fileSum
}

type fileSum struct {
	dev, ino     uint64
	size         int64
	mtime, ctime syscall.Timespec
	sum          string
}

func (f *fileSums) sum(path string) (string, error) {
	fh, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer fh.Close()
	fi, err := fh.Stat()
	if err != nil {
		return "", err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return "", errors.New(path + ": no file status")
	}
	key := fileSum{dev: uint64(st.Dev), ino: st.Ino, size: st.Size, mtime: st.Mtim, ctime: st.Ctim}
	f.mu.Lock()
	defer f.mu.Unlock() // one hash at a time: the next caller wants the same file
	if got, ok := f.sums[path]; ok && sameVersion(got, key) {
		return got.sum, nil
	}
	h := sha256.New()
	if _, err := io.Copy(h, fh); err != nil {
		return "", err
	}
	key.sum = hex.EncodeToString(h.Sum(nil))
	if f.sums == nil {
		f.sums = map[string]fileSum{}
	}
	f.sums[path] = key
	return key.sum, nil
}

func sameVersion(a, b fileSum) bool {
	a.sum, b.sum = "", ""
	return a == b
}

// Prepare builds the default image when one of specs uses it and it is
// missing or out of date (sandbox.Preparer).
func (m *Manager) Prepare(ctx context.Context, specs []sandbox.AgentSpec) error {
	for _, s := range specs {
		if s.Image == proto.DefaultImage {
			if _, err := m.BuildDefaultImage(ctx, s.Image, false); err != nil {
				return fmt.Errorf("building the default sandbox image: %w", err)
			}
			return nil
		}
	}
	return nil
}
